"""Review decisions as plain data, and how the (pure) gate applies them.

The gate never opens the queue: `evalsuite.review.api.reviews_for_run` reads the queue and builds a
`ReviewDecisions` for one run's outputs, and `gate(..., reviews=...)` calls `apply_reviews` here:

- `acceptable`: a reviewer says the variant's output for that case is fine. Its per-case value is
  set to the baseline's (it is no longer a pass->fail flip or a worse case), the delta's statistics
  are recomputed from the paired per-case values with compare's own tests (and an accepted output of
  a speculative variant counts as identical for `min_exactness`), and the rules are judged again. A rule that failed only because of accepted cases passes, with the waiver in its note and
  in the verdict's notes; accepted cases leave the violation's evidence.
- `regression`: a reviewer says the output is worse. The variant fails the `human-review` rule
  (severity block) with those cases as evidence, whatever the statistics say.
- open items (never reviewed, or latest verdict `unsure`) above `max_open`: the verdict is marked
  `needs_review` (exit code 3 when nothing else failed), reported apart from pass/regression.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

REVIEW_RULE = "human-review"


@dataclass(frozen=True)
class ReviewDecisions:
    """The current human verdicts on one run's outputs (only the outputs that were flagged)."""

    accepted: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  #: variant -> case id -> "item #N, reviewer: note"
    regressions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  #: variant -> case id -> "item #N, reviewer: note"
    open_items: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  #: variant -> ids of items still open
    max_open: int | None = None  #: more open items than this: "needs review" (None: never)
    source: str = ""  #: where the decisions came from (the queue file)

    @property
    def n_open(self) -> int:
        return sum(len(v) for v in self.open_items.values())

    @property
    def needs_review(self) -> bool:
        return self.max_open is not None and self.n_open > self.max_open

    def summary(self) -> dict:
        return {
            "source": self.source,
            "accepted": {v: sorted(c) for v, c in self.accepted.items() if c},
            "regressions": {v: sorted(c) for v, c in self.regressions.items() if c},
            "open": self.n_open,
            "open_items": {v: list(ids) for v, ids in self.open_items.items() if ids},
            "max_open": self.max_open,
            "needs_review": self.needs_review,
        }


def waive_delta(d: Any, accepted: Mapping[str, str], seed: int) -> tuple[Any, tuple[str, ...]]:
    """The delta with the accepted offending cases counted as equal to the baseline; and those cases."""
    import numpy as np

    from ..verdict.compare import _perm_p_min, _seed_for, binom_worse_p, bootstrap_delta_ci, mcnemar_p, permutation_p

    acc = tuple(c for c in d.offending if c in accepted and c in d.paired)
    if not acc:
        return d, ()
    shared = sorted(d.paired)
    paired = {c: (d.paired[c][0], d.paired[c][0]) if c in acc else d.paired[c] for c in shared}
    b = np.array([paired[c][0] for c in shared])
    v = np.array([paired[c][1] for c in shared])
    s = _seed_for(seed, d.variant, d.scenario, d.metric)
    changes: dict[str, Any] = {}
    if d.pass_fail:
        p2f = tuple(c for c in d.pass_to_fail if c not in acc)
        binary = bool(np.all(np.isin(b, (0.0, 1.0))) and np.all(np.isin(v, (0.0, 1.0))))
        if binary:
            bp, vp = b >= 0.5, v >= 0.5
            table = [[int(np.sum(bp & vp)), len(p2f)], [len(d.fail_to_pass), int(np.sum(~bp & ~vp))]]
            p_two, p_worse, p_min = mcnemar_p(table), binom_worse_p(len(p2f), len(d.fail_to_pass)), 0.5 ** (len(p2f) + len(d.fail_to_pass))
        else:
            (p_two, p_worse), p_min = permutation_p(b, v, True, s), _perm_p_min(b, v)
        changes["pass_to_fail"] = p2f
    else:
        (p_two, p_worse), p_min = permutation_p(b, v, d.higher_is_better, s), _perm_p_min(b, v)
        changes["worse_cases"] = tuple(c for c in d.worse_cases if c not in acc)
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


def waive(cmp: Any, reviews: ReviewDecisions) -> tuple[Any, dict[tuple[str, str, str], tuple[str, ...]]]:
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


def apply_reviews(cmp: Any, reviews: ReviewDecisions, judge: Callable[[Any], Any], rules: Any) -> Any:
    """Judge `cmp` with and without the waivers (`judge(comparison) -> Verdict`; `rules` the
    StageRubric) and merge: notes on
    waived rules, a `human-review` result per variant, `needs_review` and a `review` summary."""
    from ..verdict.gate import RuleResult, Violation, short_diff

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
            cases = tuple(sorted(regs))
            diffs = tuple(f"{c}: {short_diff(cmp.output(cmp.baseline, c), cmp.output(variant, c))}  [{regs[c][:160]}]" for c in cases[:3])
            v = Violation(
                REVIEW_RULE,
                "block",
                variant,
                None,
                None,
                f"{len(cases)} output(s) judged a regression by a reviewer",
                {"regressions": len(cases), "open": n_open},
                cases[:10],
                diffs,
            )
            results.append(RuleResult(variant, REVIEW_RULE, "block", "fail", (v,), note=f"reviewed in {reviews.source}"))
        else:
            acc = len(reviews.accepted.get(variant) or {})
            results.append(RuleResult(variant, REVIEW_RULE, "block", "pass", note=f"{acc} accepted, {n_open} open, 0 regression(s) in {reviews.source}"))
    if reviews.needs_review:
        notes.append(f"needs review: {reviews.n_open} open item(s) > max_open {reviews.max_open} (see `evalsuite review list --run {cmp.run_id}`)")
    passed = verdict.judgeable and not any(r.status == "fail" for r in results)
    return replace(verdict, results=tuple(results), notes=tuple(notes), passed=passed, needs_review=reviews.needs_review, review=reviews.summary())


def _rule_matches(rules: Any, rule_name: str, scenario: str, metric: str) -> bool:
    """Whether the stage rule `rule_name` checks (scenario, metric)."""
    rule = next((r for r in getattr(rules, "rules", ()) if r.name == rule_name), None)
    if rule is None:
        return False
    if hasattr(rule, "matches"):
        return bool(rule.matches(scenario, metric))
    return metric == "exactness.identical" and getattr(rule, "min_exactness", None) is not None
