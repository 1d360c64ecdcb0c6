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

With `max_rounds`, timing goes on past `rounds` (two rounds at a time, keeping the ABBA balance)
while some ratio's interval is wider than x/÷ (1 + `precision`): a quiet machine stops early, a
busy one buys the rounds it needs to decide, up to the cap. The stopping rule looks at the width
of the intervals only, never at where they lie against a rubric's limits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import EvalsuiteError

MODES = ("interleaved", "sequential")
TIMING_FILE = "timing.json"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TimingSettings:
    """How to time variants against the baseline (`timing:` in a suite file)."""

    mode: str = "interleaved"  #: interleaved | sequential (sequential: the run's own timings, no intervals)
    rounds: int = 8  #: paired rounds (each times one block of every variant)
    block: int = 6  #: requests per block (sample 0 of the first cases by id)
    warmup: int = 1  #: rounds run first and not counted (lazy initialisation, caches, page faults)
    level: float = 0.95  #: confidence level of the ratio intervals
    max_rounds: int | None = None  #: keep timing past `rounds`, two rounds at a time, up to this many ...
    precision: float = 0.10  #: ... until every interval is within ratio x/÷ (1 + precision)

    @property
    def interleaved(self) -> bool:
        return self.mode == "interleaved"

    def to_dict(self) -> dict:
        return asdict(self)


def parse_timing(raw: Any, where: str = "timing") -> TimingSettings | None:
    """The suite's `timing:` value as settings, None when absent or sequential; errors name the file and field."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"mode": raw}
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"{where}: expected 'interleaved', 'sequential' or a mapping (mode, rounds, block, warmup, level), got {raw!r}")
    known = set(TimingSettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise EvalsuiteError(f"{where}.{unknown[0]}: unknown setting (known: {', '.join(sorted(known))})")
    mode = raw.get("mode", "interleaved")
    if mode not in MODES:
        raise EvalsuiteError(f"{where}.mode: must be one of {', '.join(MODES)}, got {mode!r}")
    vals: dict[str, Any] = {"mode": mode}
    for key, lo in (("rounds", 2), ("block", 1), ("warmup", 0), ("max_rounds", 2)):
        if key in raw:
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise EvalsuiteError(f"{where}.{key}: expected an integer of at least {lo}, got {v!r}")
            vals[key] = v
    if "level" in raw:
        v = raw["level"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.5 <= v < 1:
            raise EvalsuiteError(f"{where}.level: expected a number in [0.5, 1), got {v!r}")
        vals["level"] = float(v)
    if "precision" in raw:
        v = raw["precision"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise EvalsuiteError(f"{where}.precision: expected a number in (0, 1], got {v!r}")
        vals["precision"] = float(v)
    if vals.get("max_rounds") is not None and vals["max_rounds"] < vals.get("rounds", TimingSettings.rounds):
        raise EvalsuiteError(f"{where}.max_rounds: must be at least rounds ({vals.get('rounds', TimingSettings.rounds)}), got {vals['max_rounds']}")
    settings = TimingSettings(**vals)
    return settings if settings.interleaved else None


def block_requests(requests: Mapping[str, Sequence[Any]], baseline: str, size: int) -> dict[str, list[Any]]:
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


def _time_block(backend: Any, reqs: Sequence[Any], batch_size: int) -> dict:
    from ..run.runner import _batches

    batches = _batches(list(reqs), max(1, batch_size))
    gens: list[Any] = []
    t0 = time.perf_counter()
    for batch in batches:
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
        "latency_p95_s": lat[min(len(lat) - 1, int(math.ceil(0.95 * len(lat))) - 1)] if lat else None,
    }


def time_interleaved(
    backends: Mapping[str, Any],
    requests: Mapping[str, Sequence[Any]],
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
    from ..run.runner import _progress

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
    with _progress(progress, "interleaved timing", total) as advance:
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
    from .stats import paired_ratio

    bound = 1 + settings.precision
    for name in doc["variants"][1:]:
        for base, var in (v for k, v in paired_figures(doc, name).items() if k != "wall_s"):
            if not base:
                continue
            ci = paired_ratio(base, var, settings.level)
            if not (ci.n >= 2 and ci.high / ci.ratio <= bound and ci.ratio / ci.low <= bound):
                return False
    return True


def time_run(store: Any, variants: Sequence[Any], backends: Mapping[str, Any], cases: Sequence[Any], settings: TimingSettings, progress: bool = False) -> dict:
    """The runner's hook: time the run's loaded backends interleaved and write `timing.json`."""
    from ..run.prompting import build_requests

    baseline = next(v.name for v in variants if v.baseline)
    requests = {v.name: build_requests(cases, v) for v in variants}
    doc = time_interleaved(
        {v.name: backends[v.name] for v in variants}, requests, baseline, settings, {v.name: v.generation.batch_size for v in variants}, progress
    )
    store.write_json(TIMING_FILE, doc)
    return doc


def paired_figures(doc: Mapping, variant: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per-round (baseline, variant) figures of a timing document: block wall time, p95 latency,
    tokens/s. Rounds where either block had an error are left out."""
    base = doc["baseline"]
    by: dict[tuple[int, str], dict] = {(b["round"], b["variant"]): b for b in doc.get("blocks", [])}
    rounds = sorted({r for r, _ in by})
    out: dict[str, tuple[list[float], list[float]]] = {"wall_s": ([], []), "latency_p95_s": ([], []), "tokens_per_s": ([], [])}
    for r in rounds:
        b, v = by.get((r, base)), by.get((r, variant))
        if b is None or v is None or b.get("errors") or v.get("errors"):
            continue
        for key in ("wall_s", "latency_p95_s"):
            if b.get(key) and v.get(key):
                out[key][0].append(float(b[key]))
                out[key][1].append(float(v[key]))
        if b.get("new_tokens") and v.get("new_tokens") and b["wall_s"] > 0 and v["wall_s"] > 0:
            out["tokens_per_s"][0].append(b["new_tokens"] / b["wall_s"])
            out["tokens_per_s"][1].append(v["new_tokens"] / v["wall_s"])
    return out
