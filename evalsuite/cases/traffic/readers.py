"""Readers for logged traffic: the OpenAI Batch API (input and output JSONL), chat-completions
request/response pairs (JSONL), and rows with a `messages` column (JSONL, Parquet, a Hugging Face
dataset directory). A line that cannot be read is skipped and named by file, line and field."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import EvalsuiteError
from .records import ReadResult, Skipped, TrafficRequest

ROLES = ("system", "user", "assistant", "tool", "developer")
ANSWER_COLUMNS = ("reference", "answer", "response", "completion")


class BadField(ValueError):
    """A record's field that cannot be read; `field` names it as a dotted path."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def read_traffic(paths: Iterable[str | Path]) -> ReadResult:
    """Every request in the given files (Batch API outputs joined to their inputs by `custom_id`)."""
    requests: list[TrafficRequest] = []
    skipped: list[Skipped] = []
    answers: dict[str, tuple[str, int, str]] = {}
    files = []
    for path in map(Path, paths):
        if not path.exists():
            raise EvalsuiteError(f"{path}: no such file or directory")
        files.append(str(path))
        for item in _records(path):
            _take(item, requests, skipped, answers)
    joined = _join_batch(requests, answers, skipped)
    return ReadResult(requests=tuple(joined), skipped=tuple(skipped), files=tuple(files))


def _take(item: Any, requests: list, skipped: list, answers: dict) -> None:
    source, line, record = item
    if isinstance(record, Skipped):
        skipped.append(record)
        return
    try:
        kind, value = parse_record(record, source=source, line=line)
    except BadField as exc:
        skipped.append(Skipped(source=source, line=line, field=exc.field, reason=exc.reason))
        return
    if kind == "batch-output":
        answers[value[0]] = (source, line, value[1])
    else:
        requests.append(value)


def _join_batch(requests: list[TrafficRequest], answers: dict, skipped: list) -> list[TrafficRequest]:
    """Batch API inputs with the answers of the output lines that share their `custom_id`."""
    out = []
    for r in requests:
        got = answers.pop(r.request_id, None) if r.request_id is not None else None
        out.append(replace(r, answer=got[2]) if got is not None and r.answer is None else r)
    for cid, (source, line, _) in answers.items():
        skipped.append(Skipped(source=source, line=line, field="custom_id", reason=f"batch output {cid!r} has no input line"))
    return out


# ---------------------------------------------------------------------------------------------
# files


def _records(path: Path) -> Iterator[tuple[str, int, Any]]:
    """(file, line, record or Skipped) for each line or row of a traffic file or dataset directory."""
    if path.is_dir():
        yield from _dataset_rows(path)
    elif path.suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        yield from _jsonl_lines(path)


def _jsonl_lines(path: Path) -> Iterator[tuple[str, int, Any]]:
    src = str(path)
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                yield src, n, json.loads(text)
            except json.JSONDecodeError as exc:
                yield src, n, Skipped(source=src, line=n, field="(line)", reason=f"not JSON: {exc.msg} (column {exc.colno})")


def _parquet_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for n, row in enumerate(table.to_pylist(), 1):
        yield str(path), n, row


def _dataset_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise EvalsuiteError(f"{path}: not a Hugging Face dataset directory (saved with save_to_disk): {exc}") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds[next(iter(ds))]
    for n, row in enumerate(ds, 1):
        yield str(path), n, row


# ---------------------------------------------------------------------------------------------
# records


def parse_record(record: Any, *, source: str, line: int) -> tuple[str, Any]:
    """("request", TrafficRequest) or ("batch-output", (custom_id, answer)); BadField names what is wrong."""
    if not isinstance(record, dict):
        raise BadField("(line)", f"expected a JSON object, got {type(record).__name__}")
    if "custom_id" in record and "body" in record:
        body = _object(record["body"], "body")
        return "request", _request(body, "body.", source=source, line=line, request_id=str(record["custom_id"]))
    if "custom_id" in record and ("response" in record or "error" in record):
        return "batch-output", (str(record["custom_id"]), _batch_answer(record))
    if "request" in record:
        body = _object(record["request"], "request")
        req = _request(body, "request.", source=source, line=line)
        return "request", replace(req, answer=_answer(record.get("response"), "response"))
    if "messages" in record:
        req = _request(record, "", source=source, line=line)
        if "response" in record and isinstance(record["response"], dict):
            return "request", replace(req, answer=_answer(record["response"], "response"))
        return "request", _with_answer_column(req, record)
    raise BadField("(record)", "not a traffic record: expected `custom_id` + `body` (Batch API), `request` + `response`, or `messages`")


def _object(value: Any, name: str) -> dict:
    if not isinstance(value, dict):
        raise BadField(name, f"expected an object, got {type(value).__name__}")
    return value


def _request(body: dict, prefix: str, *, source: str, line: int, request_id: str | None = None) -> TrafficRequest:
    messages = _messages(body.get("messages"), prefix + "messages")
    answer = None
    if messages and messages[-1][0] == "assistant":
        answer, messages = messages[-1][1], messages[:-1]
    if not any(role == "user" for role, _ in messages):
        raise BadField(prefix + "messages", "no user message")
    fmt = _maybe_json(body.get("response_format"), prefix + "response_format")
    if fmt is not None and not isinstance(fmt, dict):
        raise BadField(prefix + "response_format", f"expected an object, got {type(fmt).__name__}")
    tools = _maybe_json(body.get("tools"), prefix + "tools") or ()
    if not isinstance(tools, (list, tuple)):
        raise BadField(prefix + "tools", f"expected a list, got {type(tools).__name__}")
    return TrafficRequest(
        source=source,
        line=line,
        request_id=request_id,
        messages=messages,
        answer=answer,
        response_format=fmt,
        tools=tuple(tools),
        documents=_documents(body.get("documents"), prefix + "documents"),
    )


def _messages(raw: Any, name: str) -> tuple[tuple[str, str], ...]:
    if isinstance(raw, str):  # a dataset column stored as JSON text
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BadField(name, f"expected a list of messages (or its JSON text); text that is not JSON: {exc.msg}") from None
    if not isinstance(raw, (list, tuple)) or not raw:
        raise BadField(name, "expected a non-empty list of messages")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadField(f"{name}[{i}]", f"expected an object, got {type(m).__name__}")
        role = m.get("role")
        if role not in ROLES:
            raise BadField(f"{name}[{i}].role", f"unknown role {role!r} (one of: {', '.join(ROLES)})")
        out.append(("system" if role == "developer" else role, _content(m.get("content"), f"{name}[{i}].content")))
    return tuple((r, t) for r, t in out if r != "tool")


def _content(value: Any, name: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(p.get("text", "") for p in value if isinstance(p, dict) and p.get("type", "text") == "text")
    raise BadField(name, f"expected text or a list of content parts, got {type(value).__name__}")


def _documents(raw: Any, name: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise BadField(name, f"expected a list, got {type(raw).__name__}")
    out: list[tuple[str, str]] = []
    for i, d in enumerate(raw):
        if isinstance(d, str):
            out.append((f"doc-{i + 1}", d))
        elif isinstance(d, dict) and isinstance(d.get("text", d.get("content")), str):
            out.append((str(d.get("id", f"doc-{i + 1}")), str(d.get("text", d.get("content")))))
        else:
            raise BadField(f"{name}[{i}]", "expected text or an object with `text`")
    return tuple(out)


def _answer(response: Any, name: str) -> str | None:
    """The assistant's text of a chat-completions response (or a plain string)."""
    if response is None or isinstance(response, str):
        return response
    if not isinstance(response, dict):
        raise BadField(name, f"expected an object, got {type(response).__name__}")
    if "body" in response and "choices" not in response:  # a Batch API response wraps the completion
        return _answer(response["body"], name + ".body")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadField(name + ".choices", "expected a non-empty list of choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise BadField(name + ".choices[0].message", "missing")
    return _content(message.get("content"), name + ".choices[0].message.content")


def _batch_answer(record: dict) -> str | None:
    if record.get("error"):
        raise BadField("error", f"the batch request failed: {json.dumps(record['error'], ensure_ascii=False)[:120]}")
    return _answer(record.get("response"), "response")


def _with_answer_column(req: TrafficRequest, record: dict) -> TrafficRequest:
    """A dataset row's reference answer column (`reference`, `answer`, `response` or `completion`)."""
    for col in ANSWER_COLUMNS:
        if isinstance(record.get(col), str) and record[col]:
            return replace(req, answer=record[col])
    return req


def _maybe_json(value: Any, name: str) -> Any:
    """A column stored as JSON text (Parquet, datasets) decoded; other values as they are; "" as None."""
    if not isinstance(value, str):
        return value
    if not value:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise BadField(name, f"not JSON: {exc.msg}") from None
