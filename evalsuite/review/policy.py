"""Which differences a human should look at, in which order, and how: the flagging policy applied.

`flag_plan(cmp, policy, FlagInputs(records, fingerprints, cases, rubric_digest))` turns a
compare.Comparison (plus the run's per-case score records, which hold the drift metrics the
comparison cannot pair: the baseline has no similarity to itself) into one `NewItem` per (variant,
case) that has at least one reason, plus the audit sample; pure: data in, data out.

| code | flagged when (per variant and case, sample 0) |
| --- | --- |
| `flip` | a pass/fail metric matching `flip_metrics` passed on the baseline and fails on the variant |
| `similarity` | `similarity_metric` (default chrF, 0-100, vs the baseline's output) < `min_similarity` |
| `json_drift` | `json.drift` (structural differences from the baseline's JSON) > `max_json_drift` |
| `citations` | the cited sources changed: `citations.agreement` < 1 (the sets are shown) |
| `leak` | `grounding.leak` fires on the variant's output (any leak, even one the baseline shared) |
| `speculative` | a variant that changes speculative decoding (which must be exact) differs from the baseline |
| `disagreement` | scorer disagreement: within one group of related metrics (`related`, default: the metrics of one family such as `citations.*`), the variant moved one metric pass->fail and another fail->pass against the baseline, i.e. the scorers disagree on whether the output got better or worse |
| `audit` | not flagged: drawn at random (`audit_rate`, seeded) from the unflagged outputs that differ from the baseline's, so that reviewing them estimates how many regressions the flags miss |

Triage: the queue hands out the item of highest expected impact first: the sum of its reasons'
weights (`REASON_WEIGHTS`: a leak outweighs a flip, which outweighs a changed citation, ...), halved
for a knife-edge item. An item is *knife-edge* when the baseline itself barely preferred its token
at the first position where the outputs diverge (its logit margin there, in nats, is below
`knife_edge_margin`: a near-tie that flipped), *substantive* when the margin is larger, and has no
label where the backend recorded no margin (`logits.*` scores with `baseline_margin`).

The policy is configured by an optional `review:` section of the rubric file, parsed with the rubric
(evalsuite.verdict.review_policy) with errors that name the file, line and field.
"""

from __future__ import annotations

import fnmatch
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..verdict.review_policy import DEFAULT_POLICY, ReviewPolicy, parse_review_policy
from .store import AuditPopulation, ItemReview, NewItem, item_key, output_hash

if TYPE_CHECKING:
    from ..run.store import ScoreRecord
    from ..verdict.compare import Comparison

__all__ = ["DEFAULT_POLICY", "REASON_CODES", "FlagInputs", "FlagPlan", "ReviewPolicy", "flag_comparison", "flag_plan", "parse_review_policy"]

REASON_CODES = ("flip", "similarity", "json_drift", "citations", "leak", "speculative", "disagreement", "audit")
#: expected impact of each reason (the triage order sums them; knife-edge items count half)
REASON_WEIGHTS = {"leak": 5.0, "flip": 3.0, "speculative": 3.0, "citations": 2.0, "json_drift": 2.0, "disagreement": 2.0, "audit": 1.5, "similarity": 1.0}
KNIFE_EDGE, SUBSTANTIVE = "knife-edge", "substantive"

Reasons = dict[tuple[str, str], list[dict]]


@dataclass(frozen=True)
class FlagInputs:
    """What flagging reads besides the comparison and the policy."""

    records: Sequence[Any] = ()  #: the run's ScoreRecords (drift metrics, per-case details, scenarios, logit margins)
    fingerprints: Mapping[str, str] = field(default_factory=dict)  #: variant -> fingerprint (a missing one falls back to the name)
    cases: Mapping[str, Any] = field(default_factory=dict)  #: case id -> Case, for each item's context (prompt, documents, checks)
    rubric_digest: str | None = None  #: the rubric flagged under (a waiver "until the rubric changes" holds while it is the same)
    dropped: Mapping[tuple[str, str], Sequence[str]] = field(default_factory=dict)  #: (variant, case id) -> documents its context trimming dropped


@dataclass(frozen=True)
class FlagPlan:
    """What one flagging pass queues: the items (flagged, then audited) and the audit populations."""

    items: tuple[NewItem, ...]
    audits: tuple[AuditPopulation, ...] = ()

    @property
    def flagged(self) -> tuple[NewItem, ...]:
        return tuple(it for it in self.items if not (it.review and it.review.audit))


# ---------------------------------------------------------------------------------------------
# reasons


def _by_case(records: Iterable[ScoreRecord]) -> dict[tuple[str, str], dict[str, ScoreRecord]]:
    """(variant, case id) -> metric -> the sample-0 (or case-level) record."""
    out: dict[tuple[str, str], dict[str, ScoreRecord]] = defaultdict(dict)
    for r in records:
        if r.sample not in (0, None) or r.metric.endswith(".scorer_error"):
            continue
        if r.sample == 0 or r.metric not in out[(r.variant, r.case_id)]:
            out[(r.variant, r.case_id)][r.metric] = r
    return out


def _scores(recs: Mapping[str, ScoreRecord]) -> dict:
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


def _flip_reasons(cmp: Comparison, policy: ReviewPolicy, reasons: Reasons) -> None:
    """pass->fail flips of the policy's flip metrics; scorer disagreements within a metric family."""
    moves: dict[tuple[str, str], dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for d in cmp.deltas:
        if d.noise or d.variant not in cmp.variants or not d.pass_fail:
            continue
        if policy.flips and any(fnmatch.fnmatchcase(d.metric, g) for g in policy.flip_metrics):
            for c in d.pass_to_fail:
                reasons[(d.variant, c)].append(
                    _reason("flip", d.metric, f"{d.scenario}/{d.metric}: passed on the baseline, fails on {d.variant}", d.details.get(c))
                )
        group = _group_of(d.metric, policy)
        if group is not None:
            for c in d.pass_to_fail:
                moves[(d.variant, c)][group].append((d.metric, -1))
            for c in d.fail_to_pass:
                moves[(d.variant, c)][group].append((d.metric, +1))
    if not policy.disagreement:
        return
    for key, groups in moves.items():
        for mv in groups.values():
            worse, better = sorted(m for m, s in mv if s < 0), sorted(m for m, s in mv if s > 0)
            if worse and better:
                msg = f"scorers disagree: {', '.join(worse)} pass->fail but {', '.join(better)} fail->pass"
                reasons[key].append(_reason("disagreement", worse[0], msg, {"worse": worse, "better": better}))


def _drift_reasons(recs: Mapping[str, ScoreRecord], policy: ReviewPolicy) -> list[dict]:
    """Low similarity, JSON drift, changed citations and leaks of one output, from its records."""
    out = []
    r = recs.get(policy.similarity_metric)
    if policy.min_similarity is not None and r is not None and r.value is not None and r.value < policy.min_similarity:
        out.append(_reason("similarity", r.metric, f"{r.metric} {r.value:.1f} < {policy.min_similarity:g} (vs the baseline's output)", {"value": r.value}))
    r = recs.get("json.drift")
    if policy.max_json_drift is not None and r is not None and r.value is not None and r.value > policy.max_json_drift:
        out.append(_reason("json_drift", r.metric, f"JSON drift: {r.value:g} structural difference(s) from the baseline", r.details))
    r = recs.get("citations.agreement")
    if policy.citations and r is not None and r.value is not None and r.value < 1.0 - 1e-12:
        det = r.details or {}
        msg = f"citations changed: only baseline {det.get('only_baseline', [])}, only variant {det.get('only_variant', [])}"
        out.append(_reason("citations", r.metric, msg, det))
    r = recs.get("grounding.leak")
    if policy.leaks and r is not None and (r.passed is False or (r.value or 0) > 0):
        det = r.details or {}
        out.append(_reason("leak", r.metric, f"leak: canaries {det.get('canaries', [])}, {len(det.get('overlaps', []))} verbatim overlap(s)", det))
    return out


def _speculative_reason(cmp: Comparison, variant: str, case: str, recs: Mapping[str, ScoreRecord]) -> dict | None:
    r = recs.get("exactness.identical")
    if r is not None and r.value is not None:
        differs = r.value == 0
    else:
        differs = cmp.output(variant, case) is not None and cmp.output(variant, case) != cmp.output(cmp.baseline, case)
    if not differs:
        return None
    msg = "speculative decoding changed the output (it must reproduce the baseline exactly)"
    return _reason("speculative", "exactness.identical", msg, (r.details if r is not None else {}))


def _all_reasons(cmp: Comparison, policy: ReviewPolicy, per: Mapping[tuple[str, str], Mapping[str, ScoreRecord]]) -> Reasons:
    reasons: Reasons = defaultdict(list)
    _flip_reasons(cmp, policy, reasons)
    spec = {p.variant for p in cmp.perf if p.speculative}
    for v in cmp.variants:
        cases = {c for (vv, c) in per if vv == v} | {c for (vv, c) in cmp.outputs if vv == v}
        for c in sorted(cases):
            recs = per.get((v, c), {})
            reasons[(v, c)].extend(_drift_reasons(recs, policy))
            sr = _speculative_reason(cmp, v, c, recs) if policy.speculative and v in spec else None
            if sr is not None:
                reasons[(v, c)].append(sr)
    return {k: rs for k, rs in reasons.items() if rs}


# ---------------------------------------------------------------------------------------------
# triage, blind sides, the audit sample


def triage(recs: Mapping[str, ScoreRecord], policy: ReviewPolicy) -> tuple[str | None, float | None]:
    """(knife-edge | substantive | None, the baseline's logit margin at the first divergent token)
    from the logit-agreement records' details, where the backend recorded them."""
    for metric in ("logits.top1_agreement", "logits.kl_mean"):
        r = recs.get(metric)
        det = (r.details or {}) if r is not None else {}
        margin = det.get("baseline_margin")
        if det.get("first_disagreement") is not None and isinstance(margin, (int, float)):
            return (KNIFE_EDGE if margin < policy.knife_edge_margin else SUBSTANTIVE), float(margin)
    return None, None


def priority(codes: Iterable[str], label: str | None) -> float:
    """Expected impact: the reasons' weights summed, halved for a knife-edge item."""
    w = sum(REASON_WEIGHTS.get(c, 1.0) for c in set(codes))
    return round(w * (0.5 if label == KNIFE_EDGE else 1.0), 3)


def blind_left(key: str, seed: int = 0) -> str:
    """Which side a blind pairwise review shows on the left for an item: seeded per item key."""
    return "variant" if random.Random(f"{seed}:{key}").random() < 0.5 else "baseline"


def audit_sample(cmp: Comparison, policy: ReviewPolicy, flagged: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[AuditPopulation]]:
    """A seeded random share (`audit_rate`) of each variant's unflagged outputs that differ from the
    baseline's (identical outputs cannot regress against it), and each variant's population."""
    if policy.audit_rate <= 0:
        return [], []
    skip = set(flagged)
    picked: list[tuple[str, str]] = []
    pops: list[AuditPopulation] = []
    for v in cmp.variants:
        pop = sorted(
            c
            for (vv, c), text in cmp.outputs.items()
            if vv == v and (v, c) not in skip and text is not None and text != cmp.output(cmp.baseline, c) and cmp.output(cmp.baseline, c) is not None
        )
        k = min(len(pop), max(1, round(policy.audit_rate * len(pop)))) if pop else 0
        chosen = sorted(random.Random(f"{policy.seed}:{cmp.run_id}:{v}").sample(pop, k))
        picked += [(v, c) for c in chosen]
        pops.append(AuditPopulation(cmp.run_id, v, len(pop), k, policy.audit_rate, policy.seed))
    return picked, pops


# ---------------------------------------------------------------------------------------------
# items


def _new_item(
    cmp: Comparison,
    policy: ReviewPolicy,
    key: tuple[str, str],
    reasons: list[dict],
    per: Mapping[tuple[str, str], Mapping[str, ScoreRecord]],
    inputs: FlagInputs,
) -> NewItem:
    v, c = key
    recs, base = per.get((v, c), {}), per.get((cmp.baseline, c), {})
    scenario, kind = next(((r.scenario, r.kind) for r in list(recs.values()) + list(base.values())), ("", ""))
    if not scenario:
        scenario = next((d.scenario for d in cmp.deltas if d.variant == v and c in d.pass_to_fail), "")
    fp = inputs.fingerprints.get(v) or f"name:{v}"
    label, margin = triage(recs, policy)
    is_audit = [r["code"] for r in reasons] == ["audit"]
    b_out, v_out = cmp.output(cmp.baseline, c), cmp.output(v, c)
    review = ItemReview(
        mode=policy.mode,
        left_side=blind_left(item_key(c, fp, output_hash(v_out)), policy.seed) if policy.mode == "pairwise" else None,
        reviews_needed=policy.reviews_per_item,
        priority=priority([r["code"] for r in reasons], label),
        triage=label,
        margin=margin,
        audit=is_audit,
        rubric_digest=inputs.rubric_digest,
    )
    case = inputs.cases.get(c)
    # here, not at the top: the context pulls in the scorers, the case loader and the run store,
    # which `evalsuite review annotate` (a reviewer's every verdict) never needs
    from .context import item_context

    context = item_context(case, b_out, v_out, base, recs, dropped=inputs.dropped.get((v, c), ())) if case is not None else None
    return NewItem(
        run_id=cmp.run_id,
        variant=v,
        fingerprint=fp,
        case_id=c,
        scenario=scenario,
        kind=kind,
        baseline=cmp.baseline,
        reasons=tuple(reasons),
        baseline_output=b_out,
        variant_output=v_out,
        baseline_scores=_scores(base),
        variant_scores=_scores(recs),
        context=context,
        review=review,
    )


def flag_plan(cmp: Comparison, policy: ReviewPolicy = DEFAULT_POLICY, inputs: FlagInputs | None = None) -> FlagPlan:
    """The outputs to review, one NewItem per (variant, case) with its reasons, then the audit
    sample with its populations (pure: data in, data out)."""
    inputs = inputs or FlagInputs()
    per = _by_case(inputs.records)
    reasons = _all_reasons(cmp, policy, per)
    items = [_new_item(cmp, policy, key, rs, per, inputs) for key, rs in sorted(reasons.items())]
    picked, pops = audit_sample(cmp, policy, reasons)
    note = _reason(
        "audit", None, f"random audit sample ({policy.audit_rate:.0%} of the unflagged outputs that differ from the baseline's)", {"rate": policy.audit_rate}
    )
    items += [_new_item(cmp, policy, key, [note], per, inputs) for key in picked]
    return FlagPlan(tuple(items), tuple(pops))


def flag_comparison(
    cmp: Comparison, policy: ReviewPolicy = DEFAULT_POLICY, *, records: Sequence[ScoreRecord] = (), fingerprints: Mapping[str, str] | None = None
) -> list[NewItem]:
    """The flagged outputs alone (no audit sample, no context): `flag_plan` with records and fingerprints only."""
    return list(flag_plan(cmp, policy, FlagInputs(records, fingerprints or {})).flagged)
