"""The rubric's performance rules on paired ratio intervals: pass, fail, or cannot judge.

For a limit the ratio must stay under (`max_latency_p95_ratio`; larger is slower):

- fail only when the whole interval lies above the limit *and* above the noise floor (the upper
  bound of the noise reruns' own intervals, timed the same way): the slowdown is real and is more
  than reruns of the unchanged baseline show;
- pass when the whole interval lies at or under the limit;
- otherwise cannot judge: the interval straddles the limit, or is beyond it but within noise.
  Rerun with more `rounds`, on a quieter machine, or widen the limit.

Limits the ratio must stay over (`min_tokens_per_s_ratio`; smaller is slower) mirror this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..states import CANNOT_JUDGE
from .stats import RatioCI, paired_figures, paired_ratio

#: rubric field -> (PerfDelta ratio field, "max" or "min" limit, label)
RULE_FIELDS = {"max_latency_p95_ratio": ("latency_p95_ratio", "max", "latency p95"), "min_tokens_per_s_ratio": ("tokens_per_s_ratio", "min", "tokens/s")}


@dataclass(frozen=True)
class PerfCheck:
    """One CI-aware performance check: its status (pass, fail, cannot_judge) and why."""

    field: str
    status: str
    reason: str
    ci: RatioCI


def _fmt_hi(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def judge_ratio(ci: RatioCI, limit: float, kind: str, noise_bound: float | None = None, label: str = "ratio", rule_field: str = "limit") -> PerfCheck:
    """Judge a ratio interval against a limit (kind "max": ratio <= limit; "min": ratio >= limit)
    and the noise floor's bound on the same side (None: no noise rerun was timed)."""
    if kind not in ("max", "min"):
        raise ValueError(f"kind must be 'max' or 'min', got {kind!r}")
    desc = f"{label} {ci.text()} of the baseline"
    noise_txt = f"noise floor x{noise_bound:.2f}" if noise_bound is not None else "no noise rerun timed"
    if ci.n < 2 or math.isnan(ci.ratio):
        return PerfCheck(rule_field, CANNOT_JUDGE, f"{label}: {ci.n} paired round(s) without errors; at least 2 are needed", ci)
    if kind == "max":
        beyond, within = ci.low > limit, ci.high <= limit
        above_noise = noise_bound is None or ci.low > noise_bound
        sign, other = ">", "<="
    else:
        beyond, within = ci.high < limit, ci.low >= limit
        above_noise = noise_bound is None or ci.high < noise_bound
        sign, other = "<", ">="
    if beyond and above_noise:
        return PerfCheck(rule_field, "fail", f"{desc}: whole interval {sign} {rule_field} {limit:g}; beyond the {noise_txt}", ci)
    if within:
        return PerfCheck(rule_field, "pass", f"{desc}: whole interval {other} {rule_field} {limit:g}", ci)
    if beyond:
        return PerfCheck(rule_field, CANNOT_JUDGE, f"{desc}: {sign} {rule_field} {limit:g} but not beyond the {noise_txt}", ci)
    return PerfCheck(rule_field, CANNOT_JUDGE, f"{desc}: the interval straddles {rule_field} {limit:g} (more rounds or a quieter machine narrow it)", ci)


def ratios_from_timing(doc: Mapping, variant: str, level: float | None = None) -> dict[str, RatioCI]:
    """Paired ratios of one variant in a timing document: latency p95, tokens/s and block wall time."""
    lvl = level if level is not None else float((doc.get("settings") or {}).get("level", 0.95))
    figs = paired_figures(doc, variant)
    return {
        "latency_p95_ratio": paired_ratio(*figs["latency_p95_s"], level=lvl),
        "tokens_per_s_ratio": paired_ratio(*figs["tokens_per_s"], level=lvl),
        "wall_ratio": paired_ratio(*figs["wall_s"], level=lvl),
    }


def apply_timing(perfs: Sequence[Any], doc: Mapping | None) -> list[Any]:
    """PerfDeltas with their ratios (and intervals) taken from interleaved timing, where timed."""
    if not doc or doc.get("mode") != "interleaved":
        return list(perfs)
    timed = set(doc.get("variants") or [])
    out = []
    for p in perfs:
        if p.variant not in timed:
            out.append(p)
            continue
        r = ratios_from_timing(doc, p.variant)
        lat, tps = r["latency_p95_ratio"], r["tokens_per_s_ratio"]
        out.append(
            replace(
                p,
                latency_p95_ratio=None if math.isnan(lat.ratio) else lat.ratio,
                tokens_per_s_ratio=None if math.isnan(tps.ratio) else tps.ratio,
                latency_p95_ratio_ci=(lat.low, lat.high, lat.n, lat.level),
                tokens_per_s_ratio_ci=(tps.low, tps.high, tps.n, tps.level),
                timing="interleaved",
            )
        )
    return out


def _ci(perf: object, ratio_field: str) -> RatioCI | None:
    ci = getattr(perf, ratio_field + "_ci", None)
    if ci is None:
        return None
    ratio = getattr(perf, ratio_field)
    return RatioCI(math.nan if ratio is None else float(ratio), float(ci[0]), float(ci[1]), int(ci[2]), float(ci[3]))


def noise_bound(noise: Sequence[object], ratio_field: str, kind: str) -> float | None:
    """The noise floor on one side: the most extreme bound the noise reruns' intervals reach."""
    cis = [c for c in (_ci(p, ratio_field) for p in noise) if c is not None and c.n >= 2]
    if not cis:
        return None
    return max(c.high for c in cis) if kind == "max" else min(c.low for c in cis)


def ci_checks(rule: object, perf: object, noise: Sequence[object] = ()) -> dict[str, PerfCheck]:
    """The rule's CI-aware checks, for the performance limits it sets and the run timed interleaved
    (an empty dict for a sequentially timed run: the rule then compares point ratios)."""
    out = {}
    for rule_field, (ratio_field, kind, label) in RULE_FIELDS.items():
        limit = getattr(rule, rule_field, None)
        ci = _ci(perf, ratio_field)
        if limit is None or ci is None:
            continue
        out[rule_field] = judge_ratio(ci, float(limit), kind, noise_bound(noise, ratio_field, kind), label, rule_field)
    return out


def ratio_cell(perf: object, ratio_field: str) -> str:
    """A ratio for a table: `1.02` (sequential) or `1.02 [0.95, 1.10]` (interleaved, with its interval)."""
    ratio = getattr(perf, ratio_field)
    if ratio is None:
        return "-"
    ci = _ci(perf, ratio_field)
    return f"{ratio:.2f}" if ci is None else f"{ratio:.2f} [{ci.low:.2f}, {_fmt_hi(ci.high)}]"
