"""Interleaved timing: baseline and variants alternate in short blocks of the same requests.

In a suite file::

    timing: interleaved            # or, with its settings:
    timing: {mode: interleaved, rounds: 8, block: 6, warmup: 1, level: 0.95, max_rounds: 24, precision: 0.10}

After the run has generated (and cached) its outputs, every variant's backend is still loaded; the
timer then runs `warmup` + `rounds` rounds. A round times one block per variant: the same `block`
requests (sample 0 of the first cases by id), in the variant's batch size, straight from the backend
(the cache would time SQLite, not the model). Odd rounds reverse the order (ABBA), so a machine that
slowly gets busier does not favour whoever runs first. The blocks go to `timing.json` in the run;
`compare` turns them into paired ratios with intervals (evalsuite.perf.stats).
The `timing:` block itself is parsed when the suite loads (evalsuite.cases.options).

With `max_rounds`, timing goes on past `rounds` (two rounds at a time, keeping the ABBA balance)
while some ratio's interval is wider than x/÷ (1 + `precision`): a quiet machine stops early, a
busy one buys the rounds it needs to decide, up to the cap. The stopping rule looks at the width
of the intervals only, never at where they lie against a rubric's limits.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..cases.options import TimingSettings
from ..errors import EvalsuiteError
from ..perf.stats import paired_figures, paired_ratio
from ..quantiles import FIGURE_DEFINITIONS, percentile
from .progress import progress_bar
from .prompting import batches, build_requests

if TYPE_CHECKING:
    from ..backends.base import Backend, Generation, Request
    from ..cases.caseset import Case
    from ..cases.suite import Variant
    from .store import RunStore

SCHEMA_VERSION = 1


def block_requests(requests: Mapping[str, Sequence[Request]], baseline: str, size: int) -> dict[str, list[Request]]:
    """The same cases for every variant: sample 0 of the first `size` case ids the baseline has."""
    ids = sorted({r.case_id for r in requests[baseline] if r.sample == 0})[:size]
    wanted = set(ids)
    out = {}
    for name, reqs in requests.items():
        mine = sorted((r for r in reqs if r.sample == 0 and r.case_id in wanted), key=lambda r: r.case_id)
        if [r.case_id for r in mine] != ids:
            raise EvalsuiteError(f"interleaved timing: variant {name!r} lacks case(s) {sorted(wanted - {r.case_id for r in mine})} that the baseline has")
        out[name] = mine
    return out


def _time_block(backend: Backend, reqs: Sequence[Request], batch_size: int) -> dict:
    chunks = batches(list(reqs), max(1, batch_size))
    gens: list[Generation] = []
    t0 = time.perf_counter()
    for batch in chunks:
        try:
            gens.extend(backend.generate(batch))
        except Exception as exc:  # noqa: BLE001 - a failing block is recorded and left out of the ratios
            return {"wall_s": time.perf_counter() - t0, "requests": len(reqs), "errors": len(reqs), "error": f"{type(exc).__name__}: {exc}"}
    wall = time.perf_counter() - t0
    ok = [g for g in gens if getattr(g, "ok", False)]
    lat = sorted(g.latency_s for g in ok if g.latency_s is not None)
    return {
        "wall_s": wall,
        "requests": len(reqs),
        "errors": len(reqs) - len(ok),
        "new_tokens": sum(g.new_tokens or 0 for g in ok),
        "latency_p95_s": percentile(lat, 95, FIGURE_DEFINITIONS["latency_p95_s"]),
    }


def time_interleaved(
    backends: Mapping[str, Backend],
    requests: Mapping[str, Sequence[Request]],
    baseline: str,
    settings: TimingSettings,
    batch_sizes: Mapping[str, int] | None = None,
    progress: bool = False,
) -> dict:
    """Time every backend on the same requests in alternating blocks; the `timing.json` document.

    `backends` and `requests` are keyed by variant name; `baseline` names the reference.
    """
    if baseline not in backends:
        raise EvalsuiteError(f"interleaved timing: no backend for the baseline {baseline!r}")
    names = [baseline] + [n for n in backends if n != baseline]
    reqs = block_requests({n: requests[n] for n in names}, baseline, settings.block)
    sizes = dict(batch_sizes or {})
    blocks: list[dict] = []
    doc = {
        "schema_version": SCHEMA_VERSION,
        "mode": "interleaved",
        "settings": settings.to_dict(),
        "baseline": baseline,
        "variants": names,
        "cases": [r.case_id for r in reqs[baseline]],
        "blocks": blocks,
    }
    total = (settings.warmup + max(settings.rounds, settings.max_rounds or 0)) * len(names)  # an upper bound with max_rounds
    r = 0
    with progress_bar(progress, "interleaved timing", total) as advance:
        while True:
            order = names if r % 2 == 0 else names[::-1]
            for pos, name in enumerate(order):
                rec = _time_block(backends[name], reqs[name], sizes.get(name, 1))
                if r >= settings.warmup:
                    blocks.append({"round": r - settings.warmup, "position": pos, "variant": name, **rec})
                advance(1)
            r += 1
            counted = r - settings.warmup
            if counted < settings.rounds or (counted - settings.rounds) % 2:
                continue
            if counted >= (settings.max_rounds or settings.rounds) or precise_enough(doc, settings):
                break
    doc["rounds"] = r - settings.warmup
    return doc


def precise_enough(doc: Mapping, settings: TimingSettings) -> bool:
    """Whether every variant's ratios (latency p95, tokens/s) are known to within x/÷ (1 + precision)."""
    bound = 1 + settings.precision
    for name in doc["variants"][1:]:
        for base, var in (v for k, v in paired_figures(doc, name).items() if k != "wall_s"):
            if not base:
                continue
            ci = paired_ratio(base, var, settings.level)
            if not (ci.n >= 2 and ci.high / ci.ratio <= bound and ci.ratio / ci.low <= bound):
                return False
    return True


def time_run(
    store: RunStore, variants: Sequence[Variant], backends: Mapping[str, Backend], cases: Sequence[Case], settings: TimingSettings, progress: bool = False
) -> dict:
    """The runner's hook: time the run's loaded backends interleaved and write `timing.json`."""
    baseline = next(v.name for v in variants if v.baseline)
    requests = {v.name: build_requests(cases, v) for v in variants}
    doc = time_interleaved(
        {v.name: backends[v.name] for v in variants}, requests, baseline, settings, {v.name: v.generation.batch_size for v in variants}, progress
    )
    store.write_json(store.TIMING, doc)
    return doc
