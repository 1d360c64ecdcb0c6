"""The three logged formats, read from the stored samples in data/: requests, answers joined, malformed lines named."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite.cases.traffic import read_traffic
from evalsuite.cases.traffic.readers import BadField, parse_record

DATA = Path(__file__).parent / "data"


def test_batch_api_input_joined_to_its_output_by_custom_id():
    got = read_traffic([DATA / "batch_input.jsonl", DATA / "batch_output.jsonl"])
    by_id = {r.request_id: r for r in got.requests}
    assert sorted(by_id) == ["req-1", "req-2", "req-3"]
    assert by_id["req-1"].answer == "Backups are kept for 30 days [kb-12]."
    assert by_id["req-2"].response_format["type"] == "json_schema"
    assert by_id["req-3"].tools and by_id["req-3"].tools[0]["function"]["name"] == "weather"
    assert by_id["req-1"].messages[0] == ("system", "Answer from the documents and cite them as [id].")


def test_malformed_lines_named_by_file_line_and_field_and_the_rest_read():
    got = read_traffic([DATA / "batch_input.jsonl", DATA / "batch_output.jsonl", DATA / "chat_pairs.jsonl"])
    skipped = {(Path(s.source).name, s.line, s.field) for s in got.skipped}
    assert skipped == {
        ("batch_input.jsonl", 4, "body.messages"),  # a string that is not a message list
        ("batch_input.jsonl", 5, "(line)"),  # cut-off JSON
        ("chat_pairs.jsonl", 3, "request.messages[0].role"),  # unknown role
        ("chat_pairs.jsonl", 4, "(record)"),  # not a traffic record
        ("batch_output.jsonl", 4, "custom_id"),  # an output without its input
    }
    assert "unknown role 'wizard'" in next(str(s) for s in got.skipped if s.line == 3)
    assert len(got.requests) == 5  # 3 batch + 2 chat pairs


def test_chat_pairs_request_response_and_body_with_response():
    got = read_traffic([DATA / "chat_pairs.jsonl"])
    first, second = got.requests
    assert first.answer.startswith("```python") and "reverses a string" in first.messages[0][1]
    assert second.documents == (("kb-7", "在设置页面点击“重置密码”。"),) and second.answer.endswith("[kb-7]。")


def test_messages_column_in_parquet_and_in_a_dataset_directory():
    parquet = read_traffic([DATA / "messages.parquet"])
    assert [r.line for r in parquet.requests] == [1, 2] and [(s.line, s.field) for s in parquet.skipped] == [(3, "messages")]
    assert parquet.requests[0].answer.startswith("A list comprehension")  # the last assistant turn
    assert parquet.requests[1].answer == '{"product": "Lumora Sync"}' and parquet.requests[1].response_format == {"type": "json_object"}  # reference column
    ds = read_traffic([DATA / "messages_dataset"])
    assert [r.messages[0][1][:9] for r in ds.requests] == ["Write SQL", "Call me a"] and ds.requests[0].answer.startswith("```sql")


@pytest.mark.parametrize(
    "record, field",
    [
        ({"custom_id": "x", "body": []}, "body"),
        ({"request": {"messages": [{"role": "assistant", "content": "hi"}]}}, "request.messages"),
        ({"request": {"messages": [{"role": "user", "content": 3}]}}, "request.messages[0].content"),
        ({"request": {"messages": [{"role": "user", "content": "q"}], "tools": "x"}}, "request.tools"),
        ({"request": {"messages": [{"role": "user", "content": "q"}]}, "response": {"choices": []}}, "response.choices"),
        ({"messages": [{"role": "user", "content": "q"}], "documents": [5]}, "documents[0]"),
        ({"custom_id": "x", "response": None, "error": {"code": "rate_limit"}}, "error"),
    ],
)
def test_bad_fields_are_named(record, field):
    with pytest.raises(BadField) as exc:
        parse_record(record, source="f.jsonl", line=7)
    assert exc.value.field == field


def test_a_missing_file_is_an_error():
    from evalsuite.errors import EvalsuiteError

    with pytest.raises(EvalsuiteError, match="no such file"):
        read_traffic([DATA / "nope.jsonl"])
