"""The fault probes themselves: each talks to a served variant's own loopback server and returns
what it saw, classified by evalsuite.run.faults (which documents each fault and its outcomes).

Every wait is bounded by the `faults:` block's `timeout_s`; a probe that leaves the server dead
or wedged restarts it through its launcher, so the probes after it meet a working server.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import httpx

from ..backends.base import Backend, Generation, Request
from ..backends.http_serve import ServerStartError
from ..backends.http_stream import choice_text, error_message, read_stream
from ..backends.served import ServedBackend
from ..cases.fault_options import FAULTS
from ..errors import EvalsuiteError
from ..states import CANNOT_JUDGE_WORD, FaultOutcome
from .faults import (
    LOAD_FAILURE,
    FaultResult,
    Generate,
    ProbeContext,
    Verdict,
    classify_burst,
    classify_disconnect,
    classify_killed,
    classify_load_failure,
    classify_overlong,
    classify_retry,
    is_served,
    read_faults,
    record_fault,
)
from .prompting import build_requests
from .store import GenerationCache, RunStore

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.fault_options import FaultSettings
    from ..cases.suite import Variant

log = logging.getLogger("evalsuite")

DEFAULT_CONTEXT = 32768  #: the context assumed when the served weights do not say theirs

Probe = Callable[[ProbeContext], tuple[Verdict, dict[str, float]]]


def _requests(ctx: ProbeContext) -> list[Request]:
    return build_requests(ctx.cases, ctx.variant)[: ctx.settings.cases]


def _served(ctx: ProbeContext) -> ServedBackend:
    """The probed variant's backend, as the served interface (a probe's own failure when it is not one)."""
    be = ctx.backend
    if not isinstance(be, ServedBackend):
        raise EvalsuiteError(f"variant {ctx.variant.name!r}: fault probes need a served backend, not {be.name!r}")
    return be


def _url(ctx: ProbeContext) -> str:
    be = _served(ctx)
    be.start()  # the server up (started if it is not), the model name known
    return be.endpoint()


def alive(be: ServedBackend) -> bool:
    """The backend's server is running and answers `GET /models` within ALIVE_TIMEOUT_S."""
    return be.alive()


def _answer(client: httpx.Client, url: str, body: dict, endpoint: str, why: list[str] | None = None) -> str | None:
    """The text of one non-streamed request; None when it failed (why it failed appended to `why`)."""
    try:
        resp = client.post(url, json=body)
        if resp.status_code != 200:
            problem = f"HTTP {resp.status_code}: {error_message(resp.text)[:200]}"
        else:
            return choice_text(resp.json()["choices"][0], endpoint=endpoint, delta=False)
    except httpx.TimeoutException:
        problem = f"no answer within {client.timeout.read}s"
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        problem = f"{type(exc).__name__}: {exc}"[:200]
    if why is not None:
        why.append(problem)
    return None


# -- over-long input ----------------------------------------------------------------------------


def context_length(weights: Path) -> int:
    """The served model's context (config.json's max_position_embeddings), else DEFAULT_CONTEXT."""
    config = weights / "config.json" if weights.is_dir() else None
    try:
        data = json.loads(config.read_text("utf-8")) if config else {}
        return int(data.get("max_position_embeddings") or data.get("text_config", {}).get("max_position_embeddings") or DEFAULT_CONTEXT)
    except (OSError, ValueError, TypeError, AttributeError):
        return DEFAULT_CONTEXT


def probe_overlong(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    be = _served(ctx)
    timeout = ctx.settings.timeout_s
    weights = be.served_weights()
    words = ctx.settings.overlong_tokens or int((context_length(weights) if weights is not None else DEFAULT_CONTEXT) * 1.25) + 16
    req = replace(_requests(ctx)[0], messages=(("user", "word " * words),), max_new_tokens=4)
    url = _url(ctx)
    body = be.request_body(req, stream=False)
    status, message, timed_out = None, "", False
    t0 = time.perf_counter()
    try:
        resp = httpx.post(url, json=body, timeout=timeout)
        status, message = resp.status_code, error_message(resp.text)[:300]
    except httpx.TimeoutException:
        timed_out = True
    except httpx.HTTPError as exc:
        message = f"{type(exc).__name__}: {exc}"
    took = time.perf_counter() - t0
    up = alive(be)
    verdict = classify_overlong(status=status, timed_out=timed_out, alive=up, message=message, timeout_s=timeout)
    timings = {"answer_s": took}
    if (timed_out or not up) and be.runs_server():  # a wedged or dead server: the next probes need a working one
        t1 = time.perf_counter()
        be.restart()
        timings["restart_s"] = time.perf_counter() - t1
        verdict = (verdict[0], f"{verdict[1]} (a prompt of {words} words; the server was restarted for the next probes)")
    else:
        verdict = (verdict[0], f"{verdict[1]} (a prompt of {words} words)")
    return verdict, timings


# -- client disconnect mid-stream ---------------------------------------------------------------


async def _drop_after_first_token(url: str, body: dict, endpoint: str, timeout_s: float) -> bool:
    """Stream `body` and close the connection as soon as the first content arrives; whether it did."""
    t0 = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client, client.stream("POST", url, json=body) as resp:
            if resp.status_code != 200:
                return False
            att = await read_stream(resp.aiter_lines(), t0, endpoint=endpoint, redact=str, until_first_content=True)
            return bool(att.stamps)  # leaving the block closes the unread response: the client is gone
    except (httpx.HTTPError, ValueError):
        return False


def probe_disconnect(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    be = _served(ctx)
    reqs = _requests(ctx)
    url = _url(ctx)
    why: list[str] = []
    with httpx.Client(timeout=ctx.settings.timeout_s) as client:
        before = [_answer(client, url, be.request_body(r, stream=False), be.endpoint_kind, why) for r in reqs]
        longest = replace(reqs[0], max_new_tokens=max(64, reqs[0].max_new_tokens))
        t0 = time.perf_counter()
        streamed = asyncio.run(_drop_after_first_token(url, be.request_body(longest, stream=True), be.endpoint_kind, ctx.settings.timeout_s))
        dropped_s = time.perf_counter() - t0
        up = alive(be)
        after = [_answer(client, url, be.request_body(r, stream=False), be.endpoint_kind, why) for r in reqs] if up else [None] * len(reqs)
    outcome, evidence = classify_disconnect(streamed=streamed, alive=up, before=before, after=after)
    return (outcome, f"{evidence} ({'; '.join(why)})" if why else evidence), {"first_token_s": dropped_s}


# -- caller retries -----------------------------------------------------------------------------


def _stamped(gens: list[Generation], reqs: list[Request], ctx: ProbeContext, fingerprint: str) -> list[Generation]:
    return [replace(g, variant=ctx.variant.name, request_hash=r.request_hash(), fingerprint=fingerprint) for g, r in zip(gens, reqs)]


def probe_retry(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    """Each request sent twice, one after the other, as a caller retrying it; both answers recorded
    the way the runner does (cache first, then the run), in stores of the probe's own."""
    be = _served(ctx)
    reqs = _requests(ctx)
    fp = be.fingerprint()
    folder = ctx.scratch / "retry"
    folder.mkdir(parents=True, exist_ok=True)
    store, cache = RunStore(folder), GenerationCache(folder / "cache.sqlite")
    answers: list[list[str | None]] = []
    try:
        for r in reqs:
            for send in range(2):
                gens = _stamped(be.generate([r]), [r], ctx, fp)
                cache.put_many(gens)
                store.append(gens)
                if send == len(answers):
                    answers.append([])
                answers[send].append(gens[0].text if gens[0].ok else None)
        recorded = ctx.store.lookup((ctx.variant.name, r.case_id, r.sample) for r in reqs)
        if len(recorded) == len(reqs) and all(g.ok for g in recorded):
            answers.insert(0, [g.text for g in recorded])  # the run's own answers count as the first send
        records = sum(1 for g in store.generations() if g.variant == ctx.variant.name)
        verdict = classify_retry(answers=answers, records=records, cached=cache.count(), expected=len(reqs))
    finally:
        cache.close()
    return verdict, {}


# -- a burst above the concurrent-sequence limit ------------------------------------------------


async def _streamed(client: httpx.AsyncClient, url: str, body: dict, endpoint: str) -> tuple[float | None, str | None]:
    """(time to first token, error) of one streamed request."""
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body) as resp:
            if resp.status_code != 200:
                return None, f"HTTP {resp.status_code}: {error_message((await resp.aread()).decode('utf-8', 'replace'))[:120]}"
            att = await read_stream(resp.aiter_lines(), t0, endpoint=endpoint, redact=str)
            return (att.ttft, None) if att.kind == "ok" else (None, att.reason[:120])
    except httpx.TimeoutException:
        return None, "timed out"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}"


async def _send_all(url: str, bodies: list[dict], endpoint: str, timeout_s: float) -> list[tuple[float | None, str | None]]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
        return list(await asyncio.gather(*(_streamed(client, url, b, endpoint) for b in bodies)))


def probe_burst(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    be = _served(ctx)
    reqs = _requests(ctx)
    url = _url(ctx)
    bodies = [be.request_body(reqs[i % len(reqs)], stream=True) for i in range(ctx.settings.burst)]
    solo = asyncio.run(_send_all(url, bodies[:1], be.endpoint_kind, ctx.settings.timeout_s))[0]
    results = asyncio.run(_send_all(url, bodies, be.endpoint_kind, ctx.settings.timeout_s))
    errors = [e for _, e in results if e is not None]
    base = solo[0] or 0.0
    waits = [max(0.0, t - base) for t, _ in results if t is not None]
    timings = {"solo_ttft_s": base}
    if waits:
        timings |= {"queue_wait_p50_s": statistics.median(waits), "queue_wait_max_s": max(waits)}
    return classify_burst(sent=len(bodies), errors=errors, queue_waits=waits), timings


# -- the server killed mid-run ------------------------------------------------------------------


def _kill_mid_reply(be: ServedBackend, begun_before: int, after: int, deadline: float, events: tuple[threading.Event, threading.Event]) -> None:
    """SIGKILL the server once reply number `after + 1` of the probe's run has begun (one request per
    batch: `after` replies are then finished; no server log line needed). Counted from the transport's
    `responses_begun` as it was before the run (`begun_before`), so a reply that begins before this
    thread looks is still counted. `events`: (set when killed, set to give up)."""
    killed, stop = events
    while not stop.is_set() and time.monotonic() < deadline:
        if be.responses_begun > begun_before + after:
            be.kill()
            killed.set()
            return
        time.sleep(0.005)


def probe_server_killed(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    """The runner's own loop (`ctx.generate`: evalsuite.run.runner.generate_into), one request per batch, in a run of
    the probe's own: killed mid-reply, then restarted through the launcher and resumed."""
    be = _served(ctx)
    _url(ctx)
    folder = ctx.scratch / "killed"
    folder.mkdir(parents=True, exist_ok=True)
    store, cache = RunStore(folder), GenerationCache(folder / "cache.sqlite")
    variant = replace(ctx.variant, generation=replace(ctx.variant.generation, batch_size=1))
    killed, stop = threading.Event(), threading.Event()
    deadline = time.monotonic() + ctx.settings.timeout_s * (ctx.settings.kill_after + 2)  # the requests before the kill, and the one cut
    begun_before = be.responses_begun
    killer = threading.Thread(target=_kill_mid_reply, args=(be, begun_before, ctx.settings.kill_after, deadline, (killed, stop)), daemon=True)
    try:
        killer.start()
        ctx.generate(store, cache, variant, ctx.cases, set())
        stop.set()
        killer.join(timeout=5)
        first = {g.key(): g.text for g in store.generations() if g.variant == variant.name and g.ok}
        noticed = any(not g.ok for g in store.generations() if g.variant == variant.name)
        t0 = time.perf_counter()
        restarted: str | None = None
        try:
            be.restart()
        except EvalsuiteError as exc:
            restarted = str(exc)[:300]
        restart_s = time.perf_counter() - t0
        if restarted is None:
            ctx.generate(store, cache, variant, ctx.cases, set(first))
        final = {g.key(): g for g in store.generations() if g.variant == variant.name}
    finally:
        cache.close()
    lost = [f"{k[1]}#{k[2]}" for k, text in first.items() if k not in final or final[k].text != text]
    unfinished = [f"{k[1]}#{k[2]}" for k, g in final.items() if not g.ok]
    verdict = classify_killed(killed=killed.is_set(), noticed=noticed, restarted=restarted, lost=lost, unfinished=unfinished)
    return verdict, {"restart_s": restart_s}


# -- a model that fails to load -----------------------------------------------------------------


def broken_copy(weights: Path, folder: Path) -> Path:
    """A copy of `weights` that no server can load: a model directory whose config names no
    architecture (the other files linked), or a GGUF file of garbage."""
    folder.mkdir(parents=True, exist_ok=True)
    if weights.is_file():
        out = folder / weights.name
        out.write_bytes(b"GGUF" + b"\x00\xff" * 64)
        return out
    out = folder / "broken-model"
    out.mkdir(exist_ok=True)
    for f in weights.iterdir():
        if f.name != "config.json" and not (out / f.name).exists():
            os.symlink(f.resolve(), out / f.name)
    config = json.loads((weights / "config.json").read_text("utf-8")) if (weights / "config.json").is_file() else {}
    (out / "config.json").write_text(json.dumps(config | {"model_type": "evalsuite_broken_on_purpose", "architectures": ["EvalsuiteBroken"]}), "utf-8")
    return out


def probe_load_failure(ctx: ProbeContext) -> tuple[Verdict, dict[str, float]]:
    be = _served(ctx)
    weights = be.served_weights()
    if weights is None:
        raise EvalsuiteError(f"variant {ctx.variant.name!r}: no server of its own to start on broken weights")
    server = be.server_like_its_own(broken_copy(weights, ctx.scratch / "load_failure"), ctx.settings.timeout_s)
    timeout = server.startup_timeout_s
    error: str | None = None
    hung = False
    tail = ""
    t0 = time.perf_counter()
    try:
        server.start()
        # it came up (a server that loads lazily): the first request must fail clearly instead
        resp = httpx.post(
            f"{server.base_url}/chat/completions", json={"model": server.model_name, "messages": [{"role": "user", "content": "hi"}]}, timeout=timeout
        )
        tail = server.log_tail()
        error = None if resp.status_code == 200 else f"HTTP {resp.status_code}: {error_message(resp.text)[:300]}"
    except ServerStartError as exc:  # classified from what the server did, not from the message's words
        error, hung, tail = str(exc), exc.hung, exc.log_tail
    except EvalsuiteError as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error, tail = f"{type(exc).__name__}: {exc}", server.log_tail()
    finally:
        server.stop()
    verdict = classify_load_failure(error=error, hung=hung, tail=tail, timeout_s=timeout)
    return verdict, {"error_after_s": time.perf_counter() - t0}


def _resolve(target: str) -> Probe:
    """A probe from its "module:attr" entry in the table of fault kinds."""
    module, _, attr = target.partition(":")
    found: Probe = getattr(importlib.import_module(module), attr)
    return found


#: each fault kind's probe, from the one table of fault kinds (evalsuite.cases.fault_options.FAULTS)
PROBES: dict[str, Probe] = {f.name: _resolve(f.probe) for f in FAULTS}


def probe_variant(
    store: RunStore, variant: Variant, backend: Backend, cases: Sequence[Case], settings: FaultSettings | None, *, generate: Generate
) -> list[FaultResult]:
    """Run the fault probes `settings` selects for `variant` that the run has not recorded yet, each
    outcome stored as soon as it is known. A variant whose server did not come up gets its
    load failure recorded ("cannot judge"), with or without `settings`. Returns the new results."""
    load_error = backend.load_error
    out: list[FaultResult] = []
    if load_error and LOAD_FAILURE not in read_faults(store).get(variant.name, {}):
        out.append(FaultResult(variant=variant.name, kind=LOAD_FAILURE, outcome=CANNOT_JUDGE_WORD, evidence=f"its model did not load: {load_error}"))
        record_fault(store, out[-1])
    if settings is None or not is_served(variant) or (settings.variants is not None and variant.name not in settings.variants):
        return out
    done = read_faults(store).get(variant.name, {})
    ctx = ProbeContext(
        variant=variant,
        backend=backend,
        cases=list(cases)[: settings.cases],
        settings=settings,
        scratch=store.dir / "faults" / variant.name,
        store=store,
        generate=generate,
    )
    for kind in settings.kinds:
        if kind in done:
            continue
        if load_error:
            res = FaultResult(variant=variant.name, kind=kind, outcome=CANNOT_JUDGE_WORD, evidence=f"no server to probe: {load_error[:300]}")
        else:
            res = _run_probe(kind, PROBES[kind], ctx)
        record_fault(store, res)
        out.append(res)
    return out


def _run_probe(kind: str, probe: Callable[[ProbeContext], tuple[Verdict, dict[str, float]]], ctx: ProbeContext) -> FaultResult:
    """One probe, timed; a probe that breaks is "cannot judge" with its error, never the run's failure."""
    log.info("variant %s: fault probe %s", ctx.variant.name, kind)
    t0 = time.perf_counter()
    try:
        (outcome, evidence), timings = probe(ctx)
    except Exception as exc:  # noqa: BLE001 - a probe's own failure says nothing of the server
        log.warning("variant %s: fault probe %s broke: %s", ctx.variant.name, kind, exc)
        outcome, evidence, timings = cast(FaultOutcome, CANNOT_JUDGE_WORD), f"the probe itself failed: {type(exc).__name__}: {exc}", {}
    timings = {"probe_s": round(time.perf_counter() - t0, 3)} | {k: round(v, 4) for k, v in timings.items()}
    log.info("variant %s: %s: %s (%s)", ctx.variant.name, kind, outcome, evidence)
    return FaultResult(variant=ctx.variant.name, kind=kind, outcome=outcome, evidence=evidence, timings=timings)
