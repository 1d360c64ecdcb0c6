"""Stability under load: a run's load windows (evalsuite.run.load) as per-level figures, and the
rubric's load rules judged on them.

Per served variant and level: TTFT, inter-token and end-to-end latency at p50/p95/p99 over every
round's requests, aggregate tokens/s (tokens over window time) and the per-request median, errors,
timeouts and the server's queue wait where it exposes it. Quality under load pairs each replayed
answer with the same variant's answer at rest: a *flip* is a case whose pass/fail verdict on a
pass/fail metric differs (paired with evalsuite.verdict.compare's machinery); the at-rest rerun
(level 0) gives the noise floor, the flips a rerun at rest shows alone. The replayed answers are
compared with the baseline too, as the run's own are.

The p95 TTFT ratio against the baseline's server at the same level is paired by round (both
measured in the same interleaved round) and judged with evalsuite.perf's interval rule: fail only
when the whole interval lies above the limit, pass when it lies under, else cannot judge; without
the baseline's server under load, or with one round, it cannot be judged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from ..perf.stats import RatioCI, paired_ratio
from ..perf.verdict import judge_ratio
from ..quantiles import percentile, percentiles
from ..run.load_records import REST, LoadWindow, stored_windows
from ..scoring.base import ScoreRecord
from ..scoring.run import LOAD_MARK
from ..states import CANNOT_JUDGE, FAIL, PASS


@dataclass(frozen=True, kw_only=True)
class LoadLevel:
    """One served variant at one level of load (level 0: its at-rest rerun), every round together."""

    variant: str
    level: int
    rounds: int
    requests: int
    not_sent: int
    errors: int
    timeouts: int
    ttft_s: Mapping[str, float | None]  #: p50, p95, p99 over streamed requests
    itl_s: Mapping[str, float | None]  #: inter-token latency (gaps between content chunks)
    e2e_s: Mapping[str, float | None]  #: end-to-end latency
    tokens_per_s: float | None  #: aggregate: tokens generated over the windows' time
    tokens_per_s_request: float | None  #: median of the requests' own tokens/s
    queue_wait_s: float | None  #: mean queue wait from the server's metrics (None: not exposed)
    queue_wait_source: str
    ttft_p95_ratio: RatioCI | None = None  #: vs the baseline's server at this level, paired by round
    replayed: int = 0  #: replayed answers (first round)
    changed: tuple[str, ...] = ()  #: replayed cases whose text differs from the answer at rest
    flips: tuple[LoadFlip, ...] = ()  #: the replayed cases whose pass/fail differs from at rest
    scored: bool = False  #: the replayed answers were scored (flips are known)
    baseline_pass_to_fail: int = 0  #: replayed answers failing where the baseline passes (as the run's own are compared)
    error_samples: tuple[str, ...] = ()

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def timeout_rate(self) -> float:
        return self.timeouts / self.requests if self.requests else 0.0

    @property
    def flipped_cases(self) -> int:
        """Cases with at least one flipped metric."""
        return len({f.case_id for f in self.flips})

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ttft_p95_ratio"] = self.ttft_p95_ratio.to_dict() if self.ttft_p95_ratio is not None else None
        d["flips"] = tuple(str(f) for f in self.flips)
        d.update(error_rate=self.error_rate, timeout_rate=self.timeout_rate, flipped_cases=self.flipped_cases)
        return d


@dataclass(frozen=True, kw_only=True)
class LoadSummary:
    """A run's stability under load (the report's section; faults sit beside it in their own record)."""

    settings: Mapping = field(default_factory=dict)
    baseline: str = ""
    levels: tuple[LoadLevel, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)  #: variant -> why it was not put under load (its server did not start)

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(lv.variant for lv in self.levels))

    def for_variant(self, variant: str) -> list[LoadLevel]:
        """The variant's levels under load (not its at-rest rerun), lowest first."""
        return sorted((lv for lv in self.levels if lv.variant == variant and lv.level != REST), key=lambda lv: lv.level)

    def rest(self, variant: str) -> LoadLevel | None:
        """The variant's at-rest rerun: the noise floor of quality under load."""
        return next((lv for lv in self.levels if lv.variant == variant and lv.level == REST), None)

    def to_dict(self) -> dict:
        return {"settings": dict(self.settings), "baseline": self.baseline, "levels": [lv.to_dict() for lv in self.levels], "failed": dict(self.failed)}


def _pooled(windows: Sequence[LoadWindow]) -> dict:
    """A level's latency and throughput figures over its rounds' windows."""
    wall = sum(w.wall_s for w in windows)
    tokens = sum(w.new_tokens for w in windows)
    waits = [w.queue_wait_s for w in windows if w.queue_wait_s is not None]
    tps = [x for w in windows for x in w.tokens_per_s]
    return {
        "rounds": len(windows),
        "requests": sum(w.requests for w in windows),
        "not_sent": sum(w.not_sent for w in windows),
        "errors": sum(w.errors for w in windows),
        "timeouts": sum(w.timeouts for w in windows),
        "ttft_s": percentiles([x for w in windows for x in w.ttft_s]),
        "itl_s": percentiles([x for w in windows for x in w.itl_s]),
        "e2e_s": percentiles([x for w in windows for x in w.e2e_s]),
        "tokens_per_s": tokens / wall if wall > 0 and tokens else None,
        "tokens_per_s_request": percentile(tps, 50),
        "queue_wait_s": sum(waits) / len(waits) if waits else None,
        "queue_wait_source": windows[0].queue_wait_source if windows else "",
        "error_samples": tuple(dict.fromkeys(e for w in windows for e in w.error_samples))[:3],
    }


def _ttft_ratio(windows: Mapping[tuple[str, int], list[LoadWindow]], baseline: str, variant: str, level: int) -> RatioCI | None:
    """The p95 TTFT ratio variant/baseline at a level, one pair per round both measured in."""
    base = {w.round: percentile(w.ttft_s, 95) for w in windows.get((baseline, level), []) if not w.errors and not w.timeouts}
    var = {w.round: percentile(w.ttft_s, 95) for w in windows.get((variant, level), []) if not w.errors and not w.timeouts}
    rounds = sorted(r for r in set(base) & set(var) if base[r] and var[r])
    if variant == baseline or not base:
        return None
    return paired_ratio([base[r] or 0.0 for r in rounds], [var[r] or 0.0 for r in rounds])


#: compare._compare_metric: (variant, scenario, metric, base cases, variant cases, noise=, seed=, n_resamples=) -> MetricDelta


class Paired(Protocol):
    """What the load figures read of a paired comparison (compare.MetricDelta)."""

    @property
    def pass_fail(self) -> bool: ...
    @property
    def pass_to_fail(self) -> tuple[str, ...]: ...
    @property
    def fail_to_pass(self) -> tuple[str, ...]: ...


class Pair(Protocol):
    """compare._compare_metric: one metric of a variant paired, case by case, with another's."""

    def __call__(self, variant: str, scenario: str, metric: str, base: dict, var: dict) -> Paired | None: ...


@dataclass(frozen=True, kw_only=True)
class LoadFlip:
    """A replayed case whose pass/fail on a pass/fail metric differs from the variant's answer at rest."""

    scenario: str
    metric: str
    case_id: str

    def __str__(self) -> str:
        """As the report, the gate's reason and the JSON show it: `scenario/metric: case`."""
        return f"{self.scenario}/{self.metric}: {self.case_id}"


def _quality(variant: str, level: int, rest: Mapping, load: Mapping, baseline: str, pair: Pair) -> tuple[tuple[LoadFlip, ...], int]:
    """(flips against the variant at rest, pass->fail against the baseline) of one level's replayed answers."""
    name = f"{variant}{LOAD_MARK}{level}"
    flips: list[LoadFlip] = []
    p2f = 0
    for (v, scenario, metric), cases in load.items():
        if v != name:
            continue
        at_rest = rest.get((variant, scenario, metric), {})
        d = pair(name, scenario, metric, at_rest, cases)
        if d is not None and d.pass_fail:
            flips += [LoadFlip(scenario=scenario, metric=metric, case_id=c) for c in (*d.pass_to_fail, *d.fail_to_pass)]
        b = pair(name, scenario, metric, rest.get((baseline, scenario, metric), {}), cases)
        if b is not None and b.pass_fail:
            p2f += len(b.pass_to_fail)
    return tuple(sorted(flips, key=str)), p2f  # in the order they are shown


def summarize_load(
    doc: Mapping | None,
    baseline: str,
    *,
    records: Sequence[ScoreRecord] = (),
    load_records: Sequence[ScoreRecord] = (),
    outputs: Mapping[tuple[str, str], str] | None = None,
    pairing: tuple[Callable[[Sequence[ScoreRecord]], Mapping], Pair] | None = None,
) -> LoadSummary | None:
    """The per-level figures of a `load.json` document (None without one). `records`: the run's own
    scores; `load_records`: the replayed answers' (load_scores.parquet); `outputs`: (variant, case) ->
    the answer at rest; `pairing`: compare's (per_case, _compare_metric), the paired comparison the
    run's own answers get (handed in: compare builds the summary, and imports this module)."""
    windows = stored_windows(doc)
    failed = dict((doc or {}).get("failed") or {})
    if not windows and not failed:
        return None
    by: dict[tuple[str, int], list[LoadWindow]] = defaultdict(list)
    for w in windows:
        by[(w.variant, w.level)].append(w)
    per_case, pair = pairing if pairing is not None else (_no_scores, _no_pair)
    rest, load = per_case(records), per_case(load_records)
    scored_names = {r.variant for r in load_records}
    outputs = outputs or {}
    levels = []
    for (variant, level), ws in sorted(by.items()):
        ws = sorted(ws, key=lambda w: w.round)
        first = [r for w in ws if w.round == 0 for r in w.replays]
        changed = tuple(sorted(r["case_id"] for r in first if r.get("error") or r.get("text") != outputs.get((variant, r["case_id"]))))
        scored = f"{variant}{LOAD_MARK}{level}" in scored_names
        flips, p2f = _quality(variant, level, rest, load, baseline, pair) if scored else ((), 0)
        levels.append(
            LoadLevel(
                variant=variant,
                level=level,
                **_pooled(ws),
                ttft_p95_ratio=None if level == REST else _ttft_ratio(by, baseline, variant, level),
                replayed=len(first),
                changed=changed,
                flips=flips,
                scored=scored,
                baseline_pass_to_fail=p2f,
            )
        )
    return LoadSummary(settings=dict((doc or {}).get("settings") or {}), baseline=baseline, levels=tuple(levels), failed=failed)


def _no_scores(_records: Sequence[ScoreRecord]) -> dict:
    return {}


def _no_pair(variant: str, scenario: str, metric: str, base: dict, var: dict) -> None:
    return None


# -- the rubric's load rules -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LoadCheck:
    """One load rule's check at one level: pass, fail or cannot_judge, and why."""

    level: int
    field: str
    status: str
    reason: str


def _rate_check(level: LoadLevel, fld: str, limit: float, count: int, what: str) -> LoadCheck:
    if not level.requests:
        return LoadCheck(level=level.level, field=fld, status=CANNOT_JUDGE, reason=f"{level.level} in flight: no request was sent")
    rate = count / level.requests
    text = f"{level.level} in flight: {what} rate {rate:.3f} ({count}/{level.requests})"
    if rate > limit + 1e-12:
        return LoadCheck(level=level.level, field=fld, status=FAIL, reason=f"{text} > {fld} {limit:g}")
    return LoadCheck(level=level.level, field=fld, status=PASS, reason=f"{text} <= {fld} {limit:g}")


def _flip_check(level: LoadLevel, rest: LoadLevel | None, allowed: int) -> LoadCheck:
    fld = "max_load_flips"
    if not level.scored:
        return LoadCheck(
            level=level.level, field=fld, status=CANNOT_JUDGE, reason=f"{level.level} in flight: the replayed answers are not scored (`evalsuite score`)"
        )
    if rest is None or not rest.scored:
        return LoadCheck(level=level.level, field=fld, status=CANNOT_JUDGE, reason=f"{level.level} in flight: no scored at-rest rerun (the noise floor)")
    floor = len(rest.flips)
    text = f"{level.level} in flight: {len(level.flips)} flip(s) against the answers at rest (at-rest rerun: {floor})"
    if len(level.flips) - floor > allowed:
        shown = ", ".join(map(str, level.flips[:5]))
        return LoadCheck(
            level=level.level, field=fld, status=FAIL, reason=f"{text}: {len(level.flips) - floor} beyond the noise floor > {fld} {allowed} ({shown})"
        )
    return LoadCheck(level=level.level, field=fld, status=PASS, reason=f"{text}: within {fld} {allowed} of the noise floor")


def _ttft_check(level: LoadLevel, limit: float, baseline: str) -> LoadCheck:
    fld = "max_load_ttft_p95_ratio"
    ci = level.ttft_p95_ratio
    if ci is None:
        why = f"the baseline {baseline!r} was not put under load" if baseline else "no baseline under load"
        return LoadCheck(level=level.level, field=fld, status=CANNOT_JUDGE, reason=f"{level.level} in flight: TTFT p95 ratio: {why}")
    check = judge_ratio(ci, limit, "max", None, f"{level.level} in flight: TTFT p95", fld)
    return LoadCheck(level=level.level, field=fld, status=check.status, reason=check.reason)


def load_checks(rule: object, summary: LoadSummary, variant: str) -> list[LoadCheck]:
    """A load rule's checks of one variant, per level (empty when the variant was not put under load)."""
    out: list[LoadCheck] = []
    if variant in summary.failed:
        return [LoadCheck(level=REST, field="load", status=CANNOT_JUDGE, reason=f"not put under load: {summary.failed[variant][:300]}")]
    rest = summary.rest(variant)
    for level in summary.for_variant(variant):
        flips = getattr(rule, "max_load_flips", None)
        if flips is not None:
            out.append(_flip_check(level, rest, int(flips)))
        ttft = getattr(rule, "max_load_ttft_p95_ratio", None)
        if ttft is not None:
            out.append(_ttft_check(level, float(ttft), summary.baseline))
        for fld, count, what in (("max_load_error_rate", level.errors, "error"), ("max_load_timeout_rate", level.timeouts, "timeout")):
            limit = getattr(rule, fld, None)
            if limit is not None:
                out.append(_rate_check(level, fld, float(limit), count, what))
    return out


def ratio_text(ci: RatioCI | None) -> str:
    """A ratio with its interval for a table (`-` when unknown)."""
    if ci is None or math.isnan(ci.ratio):
        return "-"
    hi = "inf" if math.isinf(ci.high) else f"{ci.high:.2f}"
    return f"{ci.ratio:.2f} [{ci.low:.2f}, {hi}]"
