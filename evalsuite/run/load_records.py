"""The records of load under traffic (`load.json`): what a window sends and what it gave.

No HTTP here: the verdict layer reads these records (evalsuite.verdict.load) without the client.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from ..backends.base import Request
from ..backends.vllm_metrics import NOT_EXPOSED
from ..schemalib import check_schema_version
from ..states import LoadRequestKind

SCHEMA_VERSION = 1
REST = 0  #: the level of the at-rest rerun: the replayed cases alone, one at a time
#: a window's queue-wait source when the server's metrics have no queue series (the one NOT_EXPOSED, said of the server)
QUEUE_NOT_EXPOSED = f"{NOT_EXPOSED} by the server"


@dataclass(frozen=True, kw_only=True)
class LoadTarget:
    """Where a variant's load goes and what it sends: its own server, and the run's own request bodies."""

    name: str
    base_url: str  #: the API root (…/v1), on loopback
    body: Callable[[Request, bool], dict]  #: (request, stream) -> the JSON body
    headers: dict = field(default_factory=dict, repr=False)
    #: the server's Prometheus page now (a served backend's `read_metrics`); None: the window's client reads /metrics
    metrics: Callable[[], str | None] | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class TrafficItem:
    """One request of a window: a replayed case or background traffic."""

    kind: LoadRequestKind  #: replay, short or long (states.LoadRequestKind)
    request: Request
    stream: bool


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one request of a window gave."""

    kind: LoadRequestKind
    case_id: str
    stream: bool
    ok: bool
    error: str | None = None
    timeout: bool = False
    ttft_s: float | None = None  #: streams only: the first non-empty content
    gaps_s: tuple[float, ...] = ()  #: between content chunks (inter-token latency)
    latency_s: float = 0.0
    new_tokens: int | None = None
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class LoadWindow:
    """One window of one variant at one level (a record of `load.json`)."""

    variant: str
    level: int  #: requests in flight at once; 0 (REST): the at-rest rerun of the replayed cases
    round: int
    requests: int  #: sent
    not_sent: int = 0  #: left when `duration_s` passed
    errors: int = 0  #: failed requests that did not time out
    timeouts: int = 0
    wall_s: float = 0.0
    new_tokens: int = 0
    ttft_s: tuple[float, ...] = ()  #: per streamed request that answered
    itl_s: tuple[float, ...] = ()  #: every gap between content chunks of the window's streams
    e2e_s: tuple[float, ...] = ()  #: per request that answered
    tokens_per_s: tuple[float, ...] = ()  #: per request that answered with a token count
    queue_wait_s: float | None = None  #: mean queue wait over the window (server metrics), None: not exposed
    queue_wait_source: str = QUEUE_NOT_EXPOSED
    error_samples: tuple[str, ...] = ()  #: the first few error messages
    replays: tuple[dict, ...] = ()  #: per replayed case: case_id, text, error, ttft_s, latency_s

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.variant, self.level, self.round)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping) -> LoadWindow:
        known = set(cls.__dataclass_fields__)
        fields: dict = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known}
        return cls(**fields)


def summarize_window(variant: str, level: int, rnd: int, results: Sequence[Outcome | None], wall: float, queue: tuple[float | None, str]) -> LoadWindow:
    """A window's record from its requests' outcomes (None: not sent before `duration_s` passed)."""
    sent = [o for o in results if o is not None]
    ok = [o for o in sent if o.ok]
    tokens = sum(o.new_tokens or 0 for o in ok)
    return LoadWindow(
        variant=variant,
        level=level,
        round=rnd,
        requests=len(sent),
        not_sent=len(results) - len(sent),
        errors=sum(1 for o in sent if not o.ok and not o.timeout),
        timeouts=sum(1 for o in sent if o.timeout),
        wall_s=round(wall, 4),
        new_tokens=tokens,
        ttft_s=tuple(round(o.ttft_s, 5) for o in ok if o.ttft_s is not None),
        itl_s=tuple(round(g, 5) for o in ok for g in o.gaps_s),
        e2e_s=tuple(round(o.latency_s, 5) for o in ok),
        tokens_per_s=tuple(round(o.new_tokens / o.latency_s, 3) for o in ok if o.new_tokens and o.latency_s > 0),
        queue_wait_s=queue[0],
        queue_wait_source=queue[1],
        error_samples=tuple(dict.fromkeys(o.error for o in sent if o.error))[:3],
        replays=tuple(
            {"case_id": o.case_id, "text": o.text, "error": o.error, "ttft_s": o.ttft_s, "latency_s": round(o.latency_s, 5)} for o in sent if o.kind == "replay"
        ),
    )


def stored_windows(doc: Mapping | None) -> list[LoadWindow]:
    """The windows of a `load.json` document (refused, clearly, when a newer evalsuite wrote it)."""
    check_schema_version(doc, SCHEMA_VERSION, "load.json")
    return [LoadWindow.from_dict(w) for w in (doc or {}).get("windows", [])]


def median_or_none(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None
