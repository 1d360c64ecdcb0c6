"""Served variants under load: the fixed cases replayed while background traffic runs.

In a suite file::

    load:
      levels: [1, 4, 16]        # requests in flight at once
      requests: 16              # background requests per window (bounded) ...
      duration_s: 120           # ... and no new request after this many seconds
      replay: 8                 # fixed cases replayed in every window (sample 0 of the first ids)
      mix: {short: 1, long: 1}  # background: the shortest prompts, and the longest contexts
      stream: 0.5               # share of background requests streamed (the rest: one JSON reply)
      rounds: 2                 # windows per level and variant, interleaved across variants (ABBA)
      timeout_s: 60             # per request

After the run has generated its outputs at rest, every loaded variant's server is still up. First
each variant replays the fixed cases alone, one at a time: the at-rest rerun (level 0), whose
answers against the run's own give the noise floor of "answers that change under load". Then, per
level and round, one *window* per variant: `requests` background requests drawn from the run's
cases (the same draw for every variant at the same level and round) with the replayed cases spread
among them, `level` in flight at once. A window records every request's TTFT (first content of a
stream), the gaps between content chunks (inter-token latency), its end-to-end latency, tokens,
errors and timeouts, the server's queue wait where its /metrics expose it (vLLM's
`vllm:request_queue_time_seconds`), and the replayed answers. Windows go to `load.json` in the run
as each finishes: a resumed run skips the finished ones.

Traffic goes only to the variant's own server on loopback (evalsuite.cases.options.is_loopback):
a suite whose served variant names another host is refused when it loads, and again here.
evalsuite.verdict.load turns the windows into per-level figures and the rubric's load rules.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

import httpx

from ..backends.base import Backend
from ..backends.http_stream import read_stream
from ..backends.served import ServedBackend
from ..backends.wire import metrics_url, prometheus_samples
from ..cases.options import LoadSettings, is_loopback
from ..errors import EvalsuiteError
from ..quantiles import percentile, percentiles
from ..schemalib import check_schema_version
from ..states import LoadRequestKind
from .load_records import QUEUE_NOT_EXPOSED, REST, SCHEMA_VERSION, LoadTarget, LoadWindow, Outcome, TrafficItem, stored_windows, summarize_window
from .load_traffic import background_pools, replay_requests, window_traffic
from .progress import progress_bar

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.suite import Variant
    from .store import RunStore

log = logging.getLogger("evalsuite")

__all__ = [
    "QUEUE_NOT_EXPOSED",
    "REST",
    "SCHEMA_VERSION",
    "LoadTarget",
    "LoadWindow",
    "Outcome",
    "TrafficItem",
    "background_pools",
    "percentile",
    "percentiles",
    "queue_totals",
    "replay_requests",
    "run_load",
    "run_window",
    "stored_windows",
    "summarize_window",
    "target_of",
    "window_traffic",
]

#: Prometheus series of the time requests wait in the server's queue (vLLM), summed over label sets
QUEUE_METRICS = ("vllm:request_queue_time_seconds",)
_METRICS_TIMEOUT_S = 5.0


# -- one request -------------------------------------------------------------------------------


class _Sent(TypedDict):
    """What an outcome says of its request: its kind, case, and whether it was streamed."""

    kind: LoadRequestKind
    case_id: str
    stream: bool


async def _send(client: httpx.AsyncClient, url: str, item: TrafficItem, body: dict, timeout_s: float) -> Outcome:
    base: _Sent = {"kind": item.kind, "case_id": item.request.case_id, "stream": item.stream}
    t0 = time.perf_counter()
    try:
        return await asyncio.wait_for(_exchange(client, url, body, t0, base), timeout=timeout_s)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        return Outcome(**base, ok=False, timeout=True, error=f"timed out after {timeout_s:g}s", latency_s=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - a failed request is recorded, never the window's end
        return Outcome(**base, ok=False, error=f"{type(exc).__name__}: {exc}"[:300], latency_s=time.perf_counter() - t0)


async def _exchange(client: httpx.AsyncClient, url: str, body: dict, t0: float, base: _Sent) -> Outcome:
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code >= 400:
            raw = (await resp.aread()).decode("utf-8", "replace")
            return Outcome(**base, ok=False, error=f"HTTP {resp.status_code}: {raw.strip()[:200]}", latency_s=time.perf_counter() - t0)
        if base["stream"] and "json" not in resp.headers.get("content-type", ""):
            return await _read_stream(resp, t0, base)
        data = json.loads(await resp.aread())
        choice = (data.get("choices") or [{}])[0]
        text = choice.get("text") or (choice.get("message") or {}).get("content") or ""
        usage = data.get("usage") or {}
        return Outcome(**base, ok=True, text=text, latency_s=time.perf_counter() - t0, new_tokens=usage.get("completion_tokens"))


async def _read_stream(resp: httpx.Response, t0: float, base: _Sent) -> Outcome:
    att = await read_stream(resp.aiter_lines(), t0, endpoint="chat", redact=str)
    if att.kind != "ok":
        return Outcome(**base, ok=False, error=att.reason[:300], latency_s=time.perf_counter() - t0)
    stamps = att.stamps
    tokens = (att.usage or {}).get("completion_tokens", len(stamps) if stamps else None)
    gaps = tuple(b - a for a, b in zip(stamps, stamps[1:]))
    return Outcome(**base, ok=True, text=att.text, ttft_s=att.ttft, gaps_s=gaps, latency_s=time.perf_counter() - t0, new_tokens=tokens)


# -- server metrics ----------------------------------------------------------------------------


def queue_totals(text: str) -> tuple[float, float] | None:
    """(seconds waited, requests) summed over a Prometheus page's queue-time series; None when absent."""
    total = count = 0.0
    seen = False
    for name, value in prometheus_samples(text):
        for metric in QUEUE_METRICS:
            if name == f"{metric}_sum":
                total += value
                seen = True
            elif name == f"{metric}_count":
                count += value
    return (total, count) if seen else None


async def _read_queue(client: httpx.AsyncClient, target: LoadTarget) -> tuple[float, float] | None:
    """The queue totals of the target's server now: its page as its served backend reads it, else
    through the window's client."""
    if target.metrics is not None:
        page = await asyncio.to_thread(target.metrics)
    else:
        try:
            resp = await client.get(metrics_url(target.base_url), timeout=_METRICS_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        page = resp.text if resp.status_code == 200 else None
    return queue_totals(page) if page is not None else None


# -- a window ----------------------------------------------------------------------------------


async def _pool(client: httpx.AsyncClient, target: LoadTarget, items: Sequence[TrafficItem], level: int, settings: LoadSettings) -> list[Outcome | None]:
    """Send `items` with `level` in flight at once (at rest: one); none is sent after `duration_s`."""
    url = f"{target.base_url}/chat/completions"
    pending = list(enumerate(items))
    results: list[Outcome | None] = [None] * len(items)
    deadline = time.perf_counter() + settings.duration_s

    async def worker() -> None:
        while pending and time.perf_counter() < deadline:
            i, item = pending.pop(0)
            body = target.body(item.request, item.stream)
            results[i] = await _send(client, url, item, body, settings.timeout_s)

    await asyncio.gather(*(worker() for _ in range(max(1, level))))
    return results


async def run_window(
    target: LoadTarget, items: Sequence[TrafficItem], level: int, rnd: int, settings: LoadSettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> LoadWindow:
    """Send one window's traffic to one variant's server and record what it gave."""
    if not is_loopback(target.base_url):
        raise EvalsuiteError(f"variant {target.name!r}: load traffic goes only to a server on this machine; {target.base_url!r} is not on loopback")
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(4, level))
    async with httpx.AsyncClient(headers=target.headers, timeout=httpx.Timeout(settings.timeout_s), limits=limits, transport=transport) as client:
        before = await _read_queue(client, target)
        t0 = time.perf_counter()
        results = await _pool(client, target, items, level, settings)
        wall = time.perf_counter() - t0
        after = await _read_queue(client, target) if before is not None else None
    return summarize_window(target.name, level, rnd, results, wall, _queue_wait(before, after))


def _queue_wait(before: tuple[float, float] | None, after: tuple[float, float] | None) -> tuple[float | None, str]:
    if before is None or after is None:
        return None, QUEUE_NOT_EXPOSED
    waited, n = after[0] - before[0], after[1] - before[1]
    return (waited / n if n > 0 else None), "server /metrics: " + ", ".join(QUEUE_METRICS)


# -- the runner's hook -------------------------------------------------------------------------


def target_of(variant: Variant, backend: Backend) -> LoadTarget:
    """A served variant's load target, from its served backend (its server started if need be)."""
    if not isinstance(backend, ServedBackend):
        raise EvalsuiteError(f"variant {variant.name!r}: load needs a served variant (`backend: http`), not backend {variant.backend!r}")
    url = backend.start()
    if not is_loopback(url):
        raise EvalsuiteError(f"variant {variant.name!r}: load traffic goes only to a server on this machine; {url!r} is not on loopback")
    return LoadTarget(
        name=variant.name,
        base_url=url,
        body=lambda req, stream: backend.request_body(req, stream=stream),
        headers=backend.headers,
        metrics=backend.read_metrics,
    )


def _order(names: list[str], rnd: int) -> list[str]:
    """ABBA: odd rounds reverse the variants' order, so a machine that slowly gets busier favours none."""
    return names if rnd % 2 == 0 else names[::-1]


def _open_doc(store: RunStore, settings: LoadSettings) -> dict:
    doc = store.read_json(store.LOAD)
    check_schema_version(doc, SCHEMA_VERSION, f"run {store.run_id}: load.json")
    if doc and doc.get("settings") == settings.to_dict():
        doc.pop("failed", None)  # a variant whose server did not start is tried again
        return doc
    if doc:
        log.warning("run %s: the load block changed since its windows were recorded: they are measured again", store.run_id)
    return {"schema_version": SCHEMA_VERSION, "settings": settings.to_dict(), "windows": []}


def run_load(
    store: RunStore,
    variants: Sequence[Variant],
    backends: Mapping[str, Backend],
    cases: Sequence[Case],
    settings: LoadSettings,
    *,
    progress: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict:
    """Put the loaded variants under load, window by window, and keep `load.json` current after each
    (a resumed run skips the windows it holds). Returns the document."""
    doc = _open_doc(store, settings)
    done = {LoadWindow.from_dict(w).key for w in doc["windows"]}
    names = [v.name for v in variants]
    by_name = {v.name: v for v in variants}
    targets: dict[str, LoadTarget] = {}
    plans = [(REST, 0)] + [(level, r) for level in settings.levels for r in range(settings.rounds)]
    for level, rnd in plans:
        todo = [n for n in _order(names, rnd) if (n, level, rnd) not in done]
        label = "load: at rest (replayed cases)" if level == REST else f"load: {level} in flight, round {rnd + 1}/{settings.rounds}"
        with progress_bar(progress and bool(todo), label, len(todo)) as advance:
            for name in todo:
                v = by_name[name]
                if name in doc.setdefault("failed", {}):
                    advance(1)
                    continue
                if name not in targets:
                    try:
                        targets[name] = target_of(v, backends[name])
                    except EvalsuiteError as exc:  # its server did not start: that variant cannot be judged, the others go on
                        log.warning("variant %s: not put under load: %s", name, exc)
                        doc["failed"][name] = str(exc)[:2000]
                        store.write_json(store.LOAD, doc, indent=None)
                        advance(1)
                        continue
                replays = replay_requests(cases, v, settings.replay)
                items = window_traffic(background_pools(cases, v, settings), replays, settings, level, rnd)
                window = asyncio.run(run_window(targets[name], items, level, rnd, settings, transport=transport))
                doc["windows"].append(window.to_dict())
                store.write_json(store.LOAD, doc, indent=None)
                advance(1)
    return doc
