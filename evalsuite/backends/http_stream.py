"""Reading an OpenAI-compatible reply: a server-sent event stream, or one JSON body.

Each reader returns an `Attempt`, the outcome of one try of one request; TTFT is the arrival of
the first non-empty content delta of a stream (or the first tool-call fragment). Tool calls the
server parsed are read here too: a chat message's `tool_calls`, or the `delta.tool_calls` fragments
of a stream joined by index (evalsuite.backends.toolcalls).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ..states import AttemptKind
from .toolcalls import StreamedCalls, ToolCall, parse_openai_calls


@dataclass
class Attempt:
    """The outcome of one try of one request."""

    kind: AttemptKind  #: ok, retry (transient: try again), fail (an answer: record it), timeout (states.AttemptKind)
    reason: str = ""
    latency: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    text: str = ""
    usage: dict | None = None
    finish: str | None = None
    ttft: float | None = None
    extra: dict = field(default_factory=dict)
    stamps: tuple[float, ...] = ()  #: a stream's content chunks: seconds since the request was sent (inter-token gaps)
    #: the calls the server parsed (chat `message.tool_calls`, or streamed `delta.tool_calls` joined); None: the reply had none
    tool_calls: tuple[ToolCall, ...] | None = None


def choice_text(choice: dict, *, endpoint: str, delta: bool) -> str:
    """The text of one choice: `text` (completions), the delta's or the message's `content` (chat)."""
    if endpoint == "completions":
        return choice.get("text") or ""
    return (choice.get("delta" if delta else "message") or {}).get("content") or ""


def read_body(raw: bytes, *, endpoint: str, redact: Callable[[str], str]) -> Attempt:
    """One JSON reply (no stream)."""
    data = json.loads(raw)
    if data.get("error"):
        return Attempt("fail", reason=redact(f"server error: {error_message(data)}"))
    choice = data["choices"][0]
    return Attempt(
        "ok",
        text=choice_text(choice, endpoint=endpoint, delta=False),
        tool_calls=parse_openai_calls(choice.get("message")) if endpoint == "chat" else None,
        usage=data.get("usage"),
        finish=choice.get("finish_reason"),
        extra={"served_model": data.get("model"), "system_fingerprint": data.get("system_fingerprint"), "ttft_source": None},
    )


async def read_stream(lines: AsyncIterator[str], t0: float, *, endpoint: str, redact: Callable[[str], str], until_first_content: bool = False) -> Attempt:
    """Read SSE `data:` events (the one server-sent event reader: generation, load, the fault probes);
    TTFT is the arrival of the first non-empty content delta (since `t0`). `until_first_content`:
    stop reading there (a client that goes away mid-reply)."""
    parts: list[str] = []
    stamps: list[float] = []
    usage = finish = served = fingerprint = None
    calls = StreamedCalls()
    events = 0
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, comments, `event:` lines
        events += 1
        data = line[5:].strip()
        if data == "[DONE]":
            break
        event = json.loads(data)
        if event.get("error"):
            return Attempt("fail", reason=redact(f"server error: {error_message(event)}"))
        served = event.get("model", served)
        fingerprint = event.get("system_fingerprint") or fingerprint
        if event.get("usage"):
            usage = event["usage"]
        for choice in event.get("choices") or []:
            content = choice_text(choice, endpoint=endpoint, delta=True)
            called = endpoint == "chat" and bool((choice.get("delta") or {}).get("tool_calls"))
            if called:
                calls.add(choice.get("delta"))
            if content or called:  # a tool call's fragments are output too: the first one is the first token
                stamps.append(time.perf_counter() - t0)
            if content:
                parts.append(content)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if until_first_content and stamps:
            break
    if not events:
        return Attempt("fail", reason="the server's reply had no `data:` events (not a server-sent event stream)")
    ttft = stamps[0] if stamps else None
    extra = {"served_model": served, "system_fingerprint": fingerprint, "ttft_source": "stream" if ttft is not None else None, "content_chunks": len(stamps)}
    return Attempt("ok", text="".join(parts), usage=usage, finish=finish, ttft=ttft, extra=extra, stamps=tuple(stamps), tool_calls=calls.calls())


def names(text: str, key: str) -> bool:
    """Whether an error body names a body field (quoted, or as a word)."""
    return re.search(rf"(?<![A-Za-z_]){re.escape(key)}(?![A-Za-z_])", text) is not None


def error_message(body: str | dict) -> str:
    """The `error.message` (or FastAPI's `detail`) of an error body, else the body itself (shortened)."""
    data: object = body
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data))
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
        if isinstance(err, list):  # FastAPI validation errors
            return json.dumps(err)[:500]
    return json.dumps(data)[:500]
