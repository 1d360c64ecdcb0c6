"""How the gate applies reviewers' verdicts (verdict/decisions.py's ReviewDecisions):

- `acceptable`: a reviewer says the variant's output for that case is fine. Its per-case value is
  set to the baseline's (it is no longer a pass->fail flip or a worse case), the delta's statistics
  are recomputed from the paired per-case values with the comparison's own tests (and an accepted
  output of a speculative variant counts as identical for `min_exactness`), and the rules are judged
  again. A rule that failed only because of accepted cases passes, with the waiver in its note and
  in the verdict's notes; accepted cases leave the violation's evidence.
- `regression`: a reviewer says the output is worse. The variant fails the `human-review` rule
  (severity block) with those cases as evidence, whatever the statistics say.
- open items (never reviewed, latest verdict `unsure`, a double review still waiting for its second
  verdict or disputed, or a waiver that expired) above `max_open`: the verdict is marked
  `needs_review` (exit code 3 when nothing else failed), reported apart from pass/regression.
- the queue's own notes (an adjudicated disagreement, a dispute awaiting adjudication, an expired
  waiver) are the verdict's notes, and each variant's `human-review` result counts them, so the
  gate says why an output it waived before counts again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from .compare import Comparison, MetricDelta
from .decisions import REVIEW_RULE, ReviewDecisions
from .outcome import RuleResult, Verdict, Violation, short_diff
from .rubric import StageRubric
from .stats import bootstrap_delta_ci, paired_test, seed_for


def waive_delta(d: MetricDelta, accepted: Mapping[str, str], seed: int) -> tuple[MetricDelta, tuple[str, ...]]:
    """The delta with the accepted offending cases counted as equal to the baseline; and those cases.
    Its statistics are recomputed with the comparison's own `paired_test` and bootstrap."""
    acc = tuple(c for c in d.offending if c in accepted and c in d.paired)
    if not acc:
        return d, ()
    shared = sorted(d.paired)
    paired = {c: (d.paired[c][0], d.paired[c][0]) if c in acc else d.paired[c] for c in shared}
    b = np.array([paired[c][0] for c in shared])
    v = np.array([paired[c][1] for c in shared])
    s = seed_for(seed, d.variant, d.scenario, d.metric)
    changes: dict = {}  # MetricDelta fields by name (of several types)
    if d.pass_fail:
        changes["pass_to_fail"] = p2f = tuple(c for c in d.pass_to_fail if c not in acc)
        p_two, p_worse, p_min = paired_test(b, v, pass_fail=True, higher_is_better=True, flips=(len(p2f), len(d.fail_to_pass)), seed=s)
    else:
        changes["worse_cases"] = tuple(c for c in d.worse_cases if c not in acc)
        p_two, p_worse, p_min = paired_test(b, v, pass_fail=False, higher_is_better=d.higher_is_better, seed=s)
    lo, hi = bootstrap_delta_ci(b, v, s)
    new = replace(
        d,
        variant_mean=float(np.mean(v)),
        delta=float(np.mean(v) - np.mean(b)),
        ci_low=lo,
        ci_high=hi,
        p_value=p_two,
        p_worse=p_worse,
        p_min=p_min,
        details={c: x for c, x in d.details.items() if c not in acc},
        paired=paired,
        **changes,
    )
    return new, acc


def waive(cmp: Comparison, reviews: ReviewDecisions) -> tuple[Comparison, dict[tuple[str, str, str], tuple[str, ...]]]:
    """The comparison with accepted outputs waived; and (variant, scenario, metric) -> waived cases."""
    deltas, waived = [], {}
    for d in cmp.deltas:
        acc = reviews.accepted.get(d.variant) or {}
        if d.noise or not acc:
            deltas.append(d)
            continue
        nd, cases = waive_delta(d, acc, cmp.seed)
        deltas.append(nd)
        if cases:
            waived[(d.variant, d.scenario, d.metric)] = cases
    perf = []
    for p in cmp.perf:  # speculative exactness: an accepted output that differs counts as identical
        acc = reviews.accepted.get(p.variant) or {}
        differ = tuple(sorted(c for c in acc if cmp.output(p.variant, c) is not None and cmp.output(p.variant, c) != cmp.output(cmp.baseline, c)))
        if p.noise or not differ or p.exactness is None or not p.exactness_n:
            perf.append(p)
            continue
        perf.append(replace(p, exactness=min(1.0, p.exactness + len(differ) / p.exactness_n)))
        waived[(p.variant, "*", "exactness.identical")] = differ
    return replace(cmp, deltas=tuple(deltas), perf=tuple(perf)), waived


def apply_reviews(cmp: Comparison, reviews: ReviewDecisions, judge: Callable[[Comparison], Verdict], rules: StageRubric) -> Verdict:
    """Judge `cmp` with and without the waivers (`judge(comparison) -> Verdict`; `rules` the
    StageRubric) and merge: notes on
    waived rules, a `human-review` result per variant, `needs_review` and a `review` summary."""
    plain = judge(cmp)
    waived_cmp, waived = waive(cmp, reviews)
    verdict = judge(waived_cmp) if waived else plain
    notes = list(verdict.notes)
    results = []
    for r in verdict.results:
        before = plain.result(r.variant, r.rule)
        cases = sorted({c for (v, s, m), cs in waived.items() if v == r.variant for c in cs if _rule_matches(rules, r.rule, s, m)})
        note = r.note
        if cases:
            if before is not None and before.status == "fail" and r.status != "fail":
                note = f"{note}; waived by review: {len(cases)} accepted output(s) ({', '.join(cases[:10])})".lstrip("; ")
                notes.append(f"review: rule {r.rule} passes for {r.variant} only because reviewers accepted {', '.join(cases[:10])} ({reviews.source})")
            else:
                note = f"{note}; {len(cases)} accepted output(s) left out ({', '.join(cases[:10])})".lstrip("; ")
        results.append(replace(r, note=note))
    for variant in verdict.variants:
        regs = reviews.regressions.get(variant) or {}
        n_open = len(reviews.open_items.get(variant) or ())
        if regs:
            regressed = tuple(sorted(regs))
            diffs = tuple(f"{c}: {short_diff(cmp.output(cmp.baseline, c), cmp.output(variant, c))}  [{regs[c][:160]}]" for c in regressed[:3])
            v = Violation(
                rule=REVIEW_RULE,
                severity="block",
                variant=variant,
                scenario=None,
                metric=None,
                reason=f"{len(regressed)} output(s) judged a regression by a reviewer",
                numbers={"regressions": len(regressed), "open": n_open},
                cases=regressed[:10],
                diffs=diffs,
            )
            results.append(
                RuleResult(
                    variant=variant,
                    rule=REVIEW_RULE,
                    severity="block",
                    status="fail",
                    violations=(v,),
                    note=f"reviewed{_extra(reviews, variant)} in {reviews.source}",
                )
            )
        else:
            acc = len(reviews.accepted.get(variant) or {})
            results.append(
                RuleResult(
                    variant=variant,
                    rule=REVIEW_RULE,
                    severity="block",
                    status="pass",
                    note=f"{acc} accepted, {n_open} open, 0 regression(s){_extra(reviews, variant)} in {reviews.source}",
                )
            )
    notes.extend(reviews.notes)
    if reviews.needs_review:
        notes.append(f"needs review: {reviews.n_open} open item(s) > max_open {reviews.max_open} (see `evalsuite review list --run {cmp.run_id}`)")
    passed = verdict.judgeable and not any(r.status == "fail" for r in results)
    return replace(verdict, results=tuple(results), notes=tuple(notes), passed=passed, needs_review=reviews.needs_review, review=reviews.summary())


def _extra(reviews: ReviewDecisions, variant: str) -> str:
    """`, 1 expired waiver(s) (kb-003), 1 disputed`: what else the queue says about a variant's outputs."""
    parts = []
    expired = sorted(reviews.expired.get(variant) or {})
    if expired:
        parts.append(f"{len(expired)} expired waiver(s) ({', '.join(expired[:5])})")
    disputed = reviews.disputed.get(variant) or ()
    if disputed:
        parts.append(f"{len(disputed)} disputed (item {', '.join(f'#{i}' for i in disputed[:5])})")
    return "".join(f", {p}" for p in parts)


def _rule_matches(rules: StageRubric, rule_name: str, scenario: str, metric: str) -> bool:
    """Whether the stage rule `rule_name` checks (scenario, metric)."""
    rule = next((r for r in getattr(rules, "rules", ()) if r.name == rule_name), None)
    if rule is None:
        return False
    if hasattr(rule, "matches"):
        return bool(rule.matches(scenario, metric))
    return metric == "exactness.identical" and getattr(rule, "min_exactness", None) is not None
