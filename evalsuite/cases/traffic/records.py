"""The records traffic import passes between its steps: a logged request, a skipped line, a set-aside request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class TrafficRequest:
    """One logged chat-completions request and the answer production gave, as read from any format."""

    source: str  #: the file it came from
    line: int  #: its line (JSONL) or row (Parquet, dataset; 1-based)
    request_id: str | None = None  #: the Batch API's `custom_id`, if any
    messages: tuple[tuple[str, str], ...]  #: (role, text); parts of a multi-part content joined
    answer: str | None = None  #: what production answered (the last assistant turn, or the response)
    response_format: dict | None = None  #: the request's `response_format`, as logged
    tools: tuple[Any, ...] = ()  #: the request's `tools`, as logged
    documents: tuple[tuple[str, str], ...] = ()  #: (id, text) of a `documents` field


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A line that could not be read: where, which field, why."""

    source: str
    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.field}: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class SetAside:
    """A request read but not turned into a case, and why."""

    request: TrafficRequest
    reason: str


@dataclass(frozen=True, kw_only=True)
class ReadResult:
    """What the readers got from the files: requests in file order, and the lines they skipped."""

    requests: tuple[TrafficRequest, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    files: tuple[str, ...] = field(default=())
