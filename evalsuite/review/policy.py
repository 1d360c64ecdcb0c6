"""Which differences a human should look at: the flagging policy, and the pure function applying it.

`flag_comparison(cmp, policy, records=..., fingerprints=...)` turns a compare.Comparison (plus the
run's per-case score records, which hold the drift metrics the comparison cannot pair: the baseline
has no similarity to itself) into one `NewItem` per (variant, case) that has at least one reason:

| code | flagged when (per variant and case, sample 0) |
| --- | --- |
| `flip` | a pass/fail metric matching `flip_metrics` passed on the baseline and fails on the variant |
| `similarity` | `similarity_metric` (default chrF, 0-100, vs the baseline's output) < `min_similarity` |
| `json_drift` | `json.drift` (structural differences from the baseline's JSON) > `max_json_drift` |
| `citations` | the cited sources changed: `citations.agreement` < 1 (the sets are shown) |
| `leak` | `grounding.leak` fires on the variant's output (any leak, even one the baseline shared) |
| `speculative` | a variant that changes speculative decoding (which must be exact) differs from the baseline |
| `disagreement` | scorer disagreement: within one group of related metrics (`related`, default: the metrics of one family such as `citations.*`), the variant moved one metric pass->fail and another fail->pass against the baseline, i.e. the scorers disagree on whether the output got better or worse |

The policy is configured by an optional `review:` section of the rubric file, parsed with the rubric
(evalsuite.verdict.review_policy) with errors that name the file, line and field; `max_open` there
sets how many open items the gate tolerates before it reports "needs review".
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..verdict.review_policy import DEFAULT_POLICY, ReviewPolicy, parse_review_policy
from .store import NewItem

__all__ = ["DEFAULT_POLICY", "REASON_CODES", "ReviewPolicy", "flag_comparison", "parse_review_policy"]

REASON_CODES = ("flip", "similarity", "json_drift", "citations", "leak", "speculative", "disagreement")


# ---------------------------------------------------------------------------------------------
# flagging


def _by_case(records: Iterable[Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(variant, case id) -> metric -> the sample-0 (or case-level) record."""
    out: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for r in records:
        if r.sample not in (0, None) or r.metric.endswith(".scorer_error"):
            continue
        if r.sample == 0 or r.metric not in out[(r.variant, r.case_id)]:
            out[(r.variant, r.case_id)][r.metric] = r
    return out


def _scores(recs: Mapping[str, Any]) -> dict:
    return {m: {"value": r.value, "passed": r.passed} for m, r in sorted(recs.items()) if r.value is not None or r.passed is not None}


def _group_of(metric: str, policy: ReviewPolicy) -> str | None:
    for i, group in enumerate(policy.related):
        if any(fnmatch.fnmatchcase(metric, g) for g in group):
            return f"group{i}"
    if policy.related:
        return None
    return metric.split(".", 1)[0]


def _reason(code: str, metric: str | None, message: str, detail: Mapping | None = None) -> dict:
    return {"code": code, "metric": metric, "message": message, "detail": dict(detail or {})}


def flag_comparison(
    cmp: Any, policy: ReviewPolicy = DEFAULT_POLICY, *, records: Sequence[Any] = (), fingerprints: Mapping[str, str] | None = None
) -> list[NewItem]:
    """The outputs to review, one NewItem per (variant, case) with the reasons (pure: data in, data out).

    `records`: the run's ScoreRecords (drift metrics, per-case details, scenarios);
    `fingerprints`: variant -> fingerprint (the run signature's); a missing one falls back to the
    variant name, which still keys identical outputs of the same variant name together.
    """
    fingerprints = fingerprints or {}
    per = _by_case(records)
    reasons: dict[tuple[str, str], list[dict]] = defaultdict(list)
    scen: dict[str, tuple[str, str]] = {}
    for (_v, c), recs in per.items():
        for r in recs.values():
            scen.setdefault(c, (r.scenario, r.kind))
    variants = list(cmp.variants)
    # pass->fail flips, and the directions that scorer disagreement compares
    moves: dict[tuple[str, str], dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for d in cmp.deltas:
        if d.noise or d.variant not in variants or not d.pass_fail:
            continue
        for c in d.pass_to_fail:
            scen.setdefault(c, (d.scenario, ""))
            if policy.flips and any(fnmatch.fnmatchcase(d.metric, g) for g in policy.flip_metrics):
                reasons[(d.variant, c)].append(
                    _reason("flip", d.metric, f"{d.scenario}/{d.metric}: passed on the baseline, fails on {d.variant}", d.details.get(c))
                )
        group = _group_of(d.metric, policy)
        if group is not None:
            for c in d.pass_to_fail:
                moves[(d.variant, c)][group].append((d.metric, -1))
            for c in d.fail_to_pass:
                moves[(d.variant, c)][group].append((d.metric, +1))
    if policy.disagreement:
        for (v, c), groups in moves.items():
            for mv in groups.values():
                worse = sorted(m for m, s in mv if s < 0)
                better = sorted(m for m, s in mv if s > 0)
                if worse and better:
                    reasons[(v, c)].append(
                        _reason(
                            "disagreement",
                            worse[0],
                            f"scorers disagree: {', '.join(worse)} pass->fail but {', '.join(better)} fail->pass",
                            {"worse": worse, "better": better},
                        )
                    )
    spec = {p.variant for p in cmp.perf if p.speculative}
    for v in variants:
        cases = {c for (vv, c) in per if vv == v} | {c for (vv, c) in cmp.outputs if vv == v}
        for c in sorted(cases):
            recs = per.get((v, c), {})
            r = recs.get(policy.similarity_metric)
            if policy.min_similarity is not None and r is not None and r.value is not None and r.value < policy.min_similarity:
                reasons[(v, c)].append(
                    _reason("similarity", r.metric, f"{r.metric} {r.value:.1f} < {policy.min_similarity:g} (vs the baseline's output)", {"value": r.value})
                )
            r = recs.get("json.drift")
            if policy.max_json_drift is not None and r is not None and r.value is not None and r.value > policy.max_json_drift:
                reasons[(v, c)].append(_reason("json_drift", r.metric, f"JSON drift: {r.value:g} structural difference(s) from the baseline", r.details))
            r = recs.get("citations.agreement")
            if policy.citations and r is not None and r.value is not None and r.value < 1.0 - 1e-12:
                det = r.details or {}
                reasons[(v, c)].append(
                    _reason(
                        "citations",
                        r.metric,
                        f"citations changed: only baseline {det.get('only_baseline', [])}, only variant {det.get('only_variant', [])}",
                        det,
                    )
                )
            r = recs.get("grounding.leak")
            if policy.leaks and r is not None and (r.passed is False or (r.value or 0) > 0):
                det = r.details or {}
                reasons[(v, c)].append(
                    _reason("leak", r.metric, f"leak: canaries {det.get('canaries', [])}, {len(det.get('overlaps', []))} verbatim overlap(s)", det)
                )
            if policy.speculative and v in spec:
                r = recs.get("exactness.identical")
                differs = (
                    (r.value == 0)
                    if r is not None and r.value is not None
                    else (cmp.output(v, c) is not None and cmp.output(v, c) != cmp.output(cmp.baseline, c))
                )
                if differs:
                    reasons[(v, c)].append(
                        _reason(
                            "speculative",
                            "exactness.identical",
                            "speculative decoding changed the output (it must reproduce the baseline exactly)",
                            (r.details if r is not None else {}),
                        )
                    )
    items = []
    for (v, c), rs in sorted(reasons.items()):
        scenario, kind = scen.get(c, ("", ""))
        items.append(
            NewItem(
                run_id=cmp.run_id,
                variant=v,
                fingerprint=fingerprints.get(v) or f"name:{v}",
                case_id=c,
                scenario=scenario,
                kind=kind,
                baseline=cmp.baseline,
                reasons=tuple(rs),
                baseline_output=cmp.output(cmp.baseline, c),
                variant_output=cmp.output(v, c),
                baseline_scores=_scores(per.get((cmp.baseline, c), {})),
                variant_scores=_scores(per.get((v, c), {})),
            )
        )
    return items
