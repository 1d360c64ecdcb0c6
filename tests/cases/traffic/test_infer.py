"""Scenario, kind and expectations inferred from one request, and the reasons a request is set aside."""

from __future__ import annotations

import pytest

from evalsuite.cases.traffic.infer import NO_ANSWER, NO_SCENARIO, TOOL_USE, infer, language, length_bucket
from evalsuite.cases.traffic.records import TrafficRequest


def req(text, answer="ok", **kw):
    return TrafficRequest(source="t.jsonl", line=1, messages=(("user", text),), answer=answer, **kw)


SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize(
    "request_, scenario, kind",
    [
        (req('<document id="d1">Backups are kept 30 days.</document> How long?', "30 days [d1]"), "kb_qa", "grounded"),
        (req("How long?", "30 days", documents=(("d1", "Backups are kept 30 days."),)), "kb_qa", "grounded"),
        (req("A card as JSON", "{}", response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}), "brand", "structured"),
        (req("A card as JSON", "{}", response_format={"type": "json_object"}), "brand", "structured"),
        (req("Write a Python function to add", "def add(a, b): ..."), "code", "explanation"),
        (req("Hello there", "```js\nconsole.log(1)\n```"), "code", "explanation"),
        (req("写一个函数，反转字符串", "def r(s): ..."), "code", "explanation"),
    ],
)
def test_scenarios(request_, scenario, kind):
    got = infer(request_)
    assert (got.scenario, got.kind) == (scenario, kind)
    assert got.fields["expect"]["reference_answer"] == request_.answer


@pytest.mark.parametrize(
    "request_, reason",
    [
        (req("weather?", tools=({"type": "function"},)), TOOL_USE),
        (req("Hello there", "Hi!"), NO_SCENARIO),
        (req("Write a Python function", None), NO_ANSWER),
    ],
)
def test_set_aside_with_a_reason(request_, reason):
    assert infer(request_) == reason
    assert "issue 43" in TOOL_USE


def test_documents_leave_the_prompt_for_the_context_and_cited_ids_become_citations():
    got = infer(req('<doc id="a">Alpha text.</doc><doc id="b">Beta text.</doc>\nWhich one?', "Alpha [a]."))
    assert got.fields["prompt"] == "Which one?"
    assert [d["id"] for d in got.fields["context"]] == ["a", "b"]
    assert got.fields["expect"]["citations"] == ["a"]


def test_schema_taken_from_response_format_and_glossary_terms_the_answer_uses():
    r = req("card", '{"a": "Lumora Cloud backups"}', response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}})
    got = infer(r, ("Lumora Cloud", "Lumora Sync", "露莫拉云", "backup"))
    assert got.schema == SCHEMA
    assert got.fields["expect"]["required_terms"] == ["Lumora Cloud"]  # whole words only: "backups" is not "backup"


def test_conversation_system_and_turns():
    r = TrafficRequest(source="t", line=1, messages=(("system", "Be brief."), ("user", "Write code"), ("assistant", "Which language?"), ("user", "Python")), answer="```python\n```")
    got = infer(r)
    assert got.fields["system"] == "Be brief." and [m["role"] for m in got.fields["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize("text, lang", [("How do I reset it?", "en"), ("如何重置露莫拉云的密码？", "zh"), ("Lumora Cloud 的备份保留多久？", "zh"), ("", "en")])
def test_language(text, lang):
    assert language(text) == lang


@pytest.mark.parametrize("n, bucket", [(10, "short"), (199, "short"), (200, "medium"), (999, "medium"), (1000, "long")])
def test_length_bucket(n, bucket):
    assert length_bucket("x" * n) == bucket
