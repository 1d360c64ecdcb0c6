"""The gate: a stage's rubric rules applied to a comparison and the decisions taken on it, giving a
verdict with evidence. `gate(comparison, stage_rubric, decisions)` is pure: data in, a Verdict out;
it opens no file and imports nothing above verdict/ (evalsuite.judge.judge_run gathers its inputs).

Multiple testing: a variant is judged by several significance-gated block checks at once (one per
rule and matching scenario/metric). Their one-sided p-values are corrected together, so the chance
that an unchanged variant fails the gate on noise alone stays at or below the rubric's `alpha`.
The default is Tarone's modified Bonferroni, made for discrete tests: an exact McNemar test with
few discordant cases cannot reach a small p-value, so it is left out of the count, and a planted
regression in one metric is not diluted by the metrics that did not move. `holm` and `bonferroni`
(statsmodels' `multipletests`) are available too. Warn checks use the raw p-values.

An adaptive run (`Decisions.adaptive`) is judged by its sequential decisions instead of a fixed-n
test on the cases it happened to stop at (that test would be biased: the run stopped *because* of
what those cases showed); variant-level rules (reliability, speed, memory, exactness) are judged on
the generated cases as for a fixed-n run. Reviewers' regressions and open items count for both;
accepted outputs waive only in a fixed-n run (verdict/waivers.py).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import replace

from ..errors import suggest
from ..states import CANNOT_JUDGE, FAIL, MISSING, PASS, SKIP, WARN, RuleStatus
from .compare import Comparison, MetricDelta
from .decisions import AdaptiveDecisions, CheckResult, Decisions
from .outcome import DIFF_WIDTH, Judgment, RuleResult, Verdict, Violation, short_diff, violation_text
from .rubric import LoadRule, MetricRule, StageRubric, VariantRule
from .stats import adjust_pvalues, tarone_k
from .waivers import apply_reviews

__all__ = ["DIFF_WIDTH", "Judgment", "RuleResult", "Verdict", "Violation", "adjust_pvalues", "gate", "short_diff", "tarone_k", "violation_text"]

MAX_CASES_SHOWN = 10
MAX_DIFFS = 3


# ---------------------------------------------------------------------------------------------
# evidence


def _nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _numbers(d: MetricDelta, noise, p_adj: float | None) -> dict:
    return {
        "stat": "pass rate" if d.pass_fail else "mean",
        "n": d.n,
        "baseline": _nan(d.baseline_mean),
        "variant": _nan(d.variant_mean),
        "delta": _nan(d.delta),
        "ci95": [_nan(d.ci_low), _nan(d.ci_high)],
        "p_value": _nan(d.p_value),
        "p_worse": _nan(d.p_worse),
        "p_adjusted": _nan(p_adj),
        "pass_to_fail": len(d.pass_to_fail),
        "fail_to_pass": len(d.fail_to_pass),
        "noise_flips": noise.flips if noise is not None else None,
        "noise_delta": noise.harm if noise is not None else None,
        "noise_runs": list(noise.runs) if noise is not None else [],
        "missing_in_variant": len(d.missing_in_variant),
    }


def _evidence(cmp: Comparison, d: MetricDelta) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # no flips (a floor the baseline is below too): the cases the variant fails are the evidence
    cases = tuple((d.offending or d.variant_failed)[:MAX_CASES_SHOWN])
    diffs = []
    for c in cases[:MAX_DIFFS]:
        detail = d.details.get(c) or {}
        hint = ", ".join(
            f"{k}={v}"
            for k, v in detail.items()
            if k in ("missing", "invalid", "hits", "canaries", "facts", "forbidden", "reason", "error", "status", "not_gold", "phrase") and v
        )
        diffs.append(f"{c}: {short_diff(cmp.output(cmp.baseline, c), cmp.output(d.variant, c))}" + (f"  [{hint[:160]}]" if hint else ""))
    return cases, tuple(diffs)


# ---------------------------------------------------------------------------------------------
# the gate


def gate(comparison: Comparison, stage_rubric: StageRubric, decisions: Decisions | None = None, *, judge_noise: bool = False) -> Verdict:
    """Apply one stage's rules to a comparison and the decisions taken on it; every (variant, rule) gets a result.

    `decisions.review`: reviewers' verdicts (waivers, regressions, open items); `decisions.adaptive`:
    an adaptive run's sequential decisions, which replace the fixed-n tests of metric rules.
    `judge_noise`: also judge the noise runs as if they were variants (a noise run that fails
    shows the gate is more sensitive than the run-to-run noise; fixed-n runs only).
    """
    decisions = decisions or Decisions()
    sr, reviews = stage_rubric, decisions.review
    if decisions.adaptive is not None:
        verdict = _adaptive_gate(comparison, sr, decisions.adaptive, judge_noise)
        if reviews is None:
            return verdict
        merged = apply_reviews(comparison, replace(reviews, accepted={}), lambda _c: verdict, sr)
        if reviews.accepted:  # the sequential decision was taken on every generated case, in order
            n = sum(len(c) for c in reviews.accepted.values())
            note = f"review: {n} accepted output(s) not waived: an adaptive run's sequential decision uses every generated case"
            merged = replace(merged, notes=merged.notes + (note,))
        return merged
    if reviews is not None:
        return apply_reviews(comparison, reviews, lambda c: _fixed_gate(c, sr, judge_noise), sr)
    return _fixed_gate(comparison, sr, judge_noise)


def _fixed_gate(comparison: Comparison, sr: StageRubric, judge_noise: bool) -> Verdict:
    """The fixed-n gate: each metric rule's paired tests, corrected per variant over its significance family."""
    problems = list(comparison.problems)
    judged = list(comparison.variants) + (list(comparison.noise_runs) if judge_noise else [])
    notes = _gate_notes(comparison, sr, judged)
    results: list[RuleResult] = []
    for variant in judged:
        deltas = comparison.deltas_for(variant)
        # the significance family: every significance-gated block check of this variant
        family: list[tuple[int, int]] = []  # (rule index, delta index)
        matches: dict[int, list[int]] = {}
        for ri, rule in enumerate(sr.rules):
            if isinstance(rule, MetricRule):
                matches[ri] = [di for di, d in enumerate(deltas) if rule.matches(d.scenario, d.metric) and d.n > 0]
                if rule.severity == "block" and rule.significance_gated:
                    family += [(ri, di) for di in matches[ri]]
        pv = [deltas[di].p_worse for _, di in family]
        adjusted = dict(zip(family, adjust_pvalues(pv, [deltas[di].p_min for _, di in family], sr.multiple_testing, sr.alpha)))
        for ri, rule in enumerate(sr.rules):
            if isinstance(rule, MetricRule):
                results.append(_judge_metric_rule(comparison, rule, variant, deltas, matches[ri], adjusted, ri, problems))
            elif isinstance(rule, LoadRule):
                results.append(_judge_load_rule(comparison, rule, variant, problems))
            else:
                results.append(_judge_variant_rule(comparison, rule, variant, problems))
    return _assemble_verdict(comparison, sr, judged, results, problems, notes)


def _gate_notes(comparison: Comparison, sr: StageRubric, judged: list[str]) -> list[str]:
    notes: list[str] = []
    if not judged:
        notes.append("no variant to judge besides the baseline" + (" (noise runs are only a noise floor)" if comparison.noise_runs else ""))
    uses_noise = any(isinstance(r, MetricRule) and r.above_noise for r in sr.rules)
    if uses_noise and not comparison.noise_runs:
        notes.append("no noise run in this run: `above_noise` checks use a noise floor of 0 (add a `noise: true` rerun of the baseline)")
    other = [p.variant for p in comparison.perf if p.noise and not p.same_settings]
    if other and any(p.timing == "interleaved" for p in comparison.perf) and not any(p.noise and p.same_settings for p in comparison.perf):
        notes.append(
            f"noise run(s) {', '.join(other)} differ from the baseline's settings: a noise floor for quality, not for speed "
            "(add a `noise: true` rerun with the baseline's exact settings)"
        )
    notes += _sandbox_notes(comparison)
    return notes


def _sandbox_notes(comparison: Comparison) -> list[str]:
    """How many code runs of each variant the sandbox could not judge (errors: never failures)."""
    return [
        f"{p.variant}: {p.sandbox_errors} of {p.sandbox_runs} code runs were sandbox errors (infrastructure: not scored, never a regression)"
        for p in comparison.perf
        if p.sandbox_errors and not p.noise
    ]


def _assemble_verdict(comparison: Comparison, sr: StageRubric, judged: list[str], results: list[RuleResult], problems: list[str], notes: list[str]) -> Verdict:
    single = sorted({r.rule for r in results if r.single_pass})
    if single:
        notes = notes + [
            f"{', '.join(single)}: speed (latency, tokens/s) is not judged: each variant was timed in one sequential pass, which another job "
            "on the machine moves by tens of percent; time the run with `timing: interleaved` to judge it (docs/performance.md)"
        ]
    if not any(r.status == FAIL for r in results):  # a sure regression outranks a performance check that cannot be judged
        problems += [
            f"rule {r.rule}: {r.variant}: cannot judge: {r.note}" for r in results if r.status == CANNOT_JUDGE and r.severity == "block" and not r.optional
        ]
    judgeable = not problems
    passed = judgeable and not any(r.status == FAIL for r in results)
    return Verdict(
        passed=passed,
        judgeable=judgeable,
        stage=sr.stage,
        rubric=sr.path,
        run_id=comparison.run_id,
        baseline=comparison.baseline,
        variants=tuple(judged),
        results=tuple(results),
        problems=tuple(dict.fromkeys(problems)),
        notes=tuple(notes),
    )


def _metric_violation(
    rule: MetricRule, variant: str, scenario: str, metric: str, reason: str, *, numbers: dict, evidence: tuple[tuple[str, ...], tuple[str, ...]]
) -> Violation:
    """A metric rule broken on one scenario/metric of a variant: the reason says where, `evidence` is
    (offending cases, their output diffs)."""
    cases, diffs = evidence
    where = f"{scenario}/{metric}"
    return Violation(
        rule=rule.name,
        severity=rule.severity,
        variant=variant,
        scenario=scenario,
        metric=metric,
        reason=f"{where}: {reason}",
        numbers=numbers,
        cases=cases,
        diffs=diffs,
    )


def _judge_metric_rule(
    cmp: Comparison, rule: MetricRule, variant: str, deltas: list[MetricDelta], idx: list[int], adjusted: dict, ri: int, problems: list[str]
) -> RuleResult:
    if not idx:
        where = "any scenario" if "*" in rule.scenarios else "/".join(rule.scenarios)
        present = "*" in rule.scenarios or any(s in cmp.scenarios for s in rule.scenarios)
        note = f"no paired scores of {rule.metric} in {where}" + ("" if present else " (scenario not in this run)")
        if present and unmatched(cmp, rule):  # the rule names no metric the run has: never a silent pass
            note = unmatched_message(cmp, rule)
            if rule.required is False:
                return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=CANNOT_JUDGE, note=f"not checked: {note}", optional=True)
            problems.append(f"rule {rule.name}: {note}")
            return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=note)
        if rule.required and present:
            problems.append(f"rule {rule.name}: {note} for {variant}")
            return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=note)
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note=note)
    violations = []
    for di in idx:
        d = deltas[di]
        noise = cmp.noise_floor(d.scenario, d.metric)
        p_adj = adjusted.get((ri, di)) if rule.severity == "block" else None
        reason = rule.fails(d, noise, p_adj)
        if reason:
            violations.append(_metric_violation(rule, variant, d.scenario, d.metric, reason, numbers=_numbers(d, noise, p_adj), evidence=_evidence(cmp, d)))
    status: RuleStatus = (FAIL if rule.severity == "block" else WARN) if violations else PASS
    checked = ", ".join(f"{deltas[i].scenario}/{deltas[i].metric}" for i in idx)
    return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=status, violations=tuple(violations), note=f"checked {checked}")


def run_metrics(cmp: Comparison, scenarios: tuple[str, ...] = ("*",)) -> list[str]:
    """The metric names the run's scores have in `scenarios` (any variant, paired or not)."""
    return sorted({d.metric for d in cmp.deltas if "*" in scenarios or d.scenario in scenarios})


def scorer_metrics(scenarios: tuple[str, ...]) -> list[str]:
    """The metrics evalsuite's registered scorers produce in `scenarios` (`code.pass@k` as `code.pass@*`)."""
    from ..scoring.run import load_scorers

    return sorted({s.name.replace("@k", "@*") for s in load_scorers() if "*" in scenarios or not s.scenarios or set(s.scenarios) & set(scenarios)})


def unmatched(cmp: Comparison, rule: MetricRule) -> bool:
    """True when the rule names a metric that no score of the run has, in the rule's scenarios that the
    run has, and that no scorer of those scenarios produces either (a typo, an unfiltered lm-eval name).
    A scorer's metric that only this run's cases lack (a smoke run without restricted cases) is not
    checked, and shown as skipped."""
    if not cmp.variants or any(rule.matches(d.scenario, d.metric) for d in cmp.deltas):
        return False
    scen = rule.scenarios if "*" not in rule.scenarios else cmp.scenarios
    return not any(fnmatch.fnmatchcase(m, rule.metric) or fnmatch.fnmatchcase(rule.metric, m) for m in scorer_metrics(scen))


def unmatched_message(cmp: Comparison, rule: MetricRule) -> str:
    """`rubrics/x.yaml:12: rule r: metric citations.recal matches no score of this run (did you mean ...?)`."""
    have = run_metrics(cmp, rule.scenarios)
    where = f"{rule.where}: " if rule.where else ""
    scen = "any scenario" if "*" in rule.scenarios else "/".join(rule.scenarios)
    close = suggest(rule.metric, have, n=3)
    return (
        f"{where}rule {rule.name}: metric {rule.metric} matches no score of this run in {scen}{close}; "
        f"the run's metrics there: {', '.join(have) or 'none'} (a rule that may match nothing says `required: false`)"
    )


def unmatched_rules(cmp: Comparison, sr: StageRubric) -> list[str]:
    """Every metric rule of the stage that names no metric of the run (and does not say `required: false`),
    as a message naming the rubric's file:line and the close matches: a rubric mistake, not a pass."""
    return [
        unmatched_message(cmp, r)
        for r in sr.rules
        if isinstance(r, MetricRule) and r.required is not False and ("*" in r.scenarios or any(s in cmp.scenarios for s in r.scenarios)) and unmatched(cmp, r)
    ]


def _judge_variant_rule(cmp: Comparison, rule: VariantRule, variant: str, problems: list[str]) -> RuleResult:
    perf = cmp.perf_for(variant)
    if perf is None:
        note = "no performance summary (variants.json) for this variant"
        if rule.required:
            problems.append(f"rule {rule.name}: {note}: {variant}")
            return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=note)
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note=note)
    if not rule.applies(perf):
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note="the variant does not change speculative decoding")
    unjudgeable = rule.sandbox_unjudgeable(perf)
    if unjudgeable:
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=CANNOT_JUDGE, note=unjudgeable)
    missing = rule.missing(perf)
    if missing and rule.required:
        problems.append(f"rule {rule.name}: {variant} lacks {', '.join(missing)}")
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=f"lacks {', '.join(missing)}")
    # the noise floor of interleaved timings: reruns with the baseline's own settings (another batch
    # size is slower or faster by design: a noise floor for quality only)
    noise = [p for p in cmp.perf if p.noise and p.same_settings and p.variant != variant]
    # a warn rule never warns on a single sequential pass: speed from one pass is reported as cannot
    # judge, with the reason; a block rule keeps its point ratios (the user's own hardware, by choice)
    points = rule.severity == "block"
    reason = rule.fails(perf, noise=noise, point_ratios=points)
    note = f"not checked (no data): {', '.join(missing)}" if missing else ""
    single = None if points else rule.single_pass(perf)
    if not reason:
        undecided = "; ".join(x for x in (rule.undecided(perf, noise=noise), single) if x)  # neither pass nor fail
        return RuleResult(
            variant=variant,
            rule=rule.name,
            severity=rule.severity,
            status=CANNOT_JUDGE if undecided else PASS,
            note="; ".join(x for x in (undecided, note) if x),
            single_pass=bool(single),
        )
    note = "; ".join(x for x in (note, single) if x)
    cases: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()
    if rule.min_exactness is not None and perf.exactness is not None and perf.exactness < rule.min_exactness:
        d = next((x for x in cmp.deltas_for(variant) if x.metric == "exactness.identical"), None)
        if d is not None:
            cases, diffs = _evidence(cmp, d)
    v = Violation(
        rule=rule.name, severity=rule.severity, variant=variant, scenario=None, metric=None, reason=reason, numbers=perf.to_dict(), cases=cases, diffs=diffs
    )
    return RuleResult(
        variant=variant,
        rule=rule.name,
        severity=rule.severity,
        status=FAIL if rule.severity == "block" else WARN,
        violations=(v,),
        note=note,
        single_pass=bool(single),
    )


def _judge_load_rule(cmp: Comparison, rule: LoadRule, variant: str, problems: list[str]) -> RuleResult:
    """A load rule at every level of the variant under load: fail when a check fails, cannot judge
    when one can neither pass nor fail (and none fails), skip when the variant was not under load."""
    from .load import load_checks

    checks = load_checks(rule, cmp.load, variant) if cmp.load is not None else []
    if not checks:
        note = "the variant was not put under load (no `load:` figures)"
        if rule.required:
            problems.append(f"rule {rule.name}: {note}: {variant}")
            return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=note)
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note=note)
    failed = [c for c in checks if c.status == FAIL]
    if failed:
        level = {lv.level: lv for lv in cmp.load.for_variant(variant)} if cmp.load is not None else {}
        vs = tuple(
            Violation(
                rule=rule.name,
                severity=rule.severity,
                variant=variant,
                scenario=None,
                metric=None,
                reason=c.reason,
                numbers=level[c.level].to_dict() if c.level in level else {},
                cases=tuple(dict.fromkeys(f.case_id for f in level[c.level].flips))[:MAX_CASES_SHOWN]
                if c.field == "max_load_flips" and c.level in level
                else (),
            )
            for c in failed
        )
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=FAIL if rule.severity == "block" else WARN, violations=vs)
    undecided = [c.reason for c in checks if c.status == CANNOT_JUDGE]
    status: RuleStatus = CANNOT_JUDGE if undecided else PASS
    return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=status, note="; ".join(undecided or [c.reason for c in checks]))


# ---------------------------------------------------------------------------------------------
# an adaptive run: its sequential decisions


def _adaptive_gate(comparison: Comparison, sr: StageRubric, adaptive: AdaptiveDecisions, judge_noise: bool) -> Verdict:
    """Metric rules from the run's sequential checks; variant-level rules on the generated cases."""
    problems = list(comparison.problems) + list(adaptive.problems)
    notes = list(adaptive.notes)
    if judge_noise and comparison.noise_runs:
        notes.append("adaptive run: noise runs ran in full as the reference; they are not judged as variants")
    judged = [v for v in comparison.variants if v in adaptive.checks]
    results: list[RuleResult] = []
    for variant in judged:
        by_rule: dict[str, list[CheckResult]] = {}
        for c in adaptive.checks[variant]:
            by_rule.setdefault(c.rule, []).append(c)
        for rule in sr.rules:
            if isinstance(rule, LoadRule):
                results.append(_judge_load_rule(comparison, rule, variant, problems))
            elif isinstance(rule, VariantRule):
                results.append(_judge_variant_rule(comparison, rule, variant, problems))
            elif by_rule.get(rule.name):
                results.append(_sequential_rule(comparison, variant, rule, by_rule[rule.name], adaptive.verdicts.get(variant, "open")))
            else:
                results.append(_no_sequential_check(comparison, variant, rule, problems))
    return _assemble_verdict(comparison, sr, judged, results, problems, notes)


def _no_sequential_check(comparison: Comparison, variant: str, rule: MetricRule, problems: list[str]) -> RuleResult:
    present = "*" in rule.scenarios or any(s in comparison.scenarios for s in rule.scenarios)
    note = f"no baseline scores of {rule.metric} in {'/'.join(rule.scenarios)}"
    if rule.required and present:
        problems.append(f"rule {rule.name}: {note} for {variant}")
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=MISSING, note=note)
    return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note=note)


def _sequential_rule(cmp: Comparison, variant: str, rule: MetricRule, checks: list[CheckResult], verdict: str) -> RuleResult:
    failed = [c for c in checks if c.status == FAIL]
    checked = ", ".join(f"{c.scenario}/{c.metric}: {c.status} ({c.how or 'undecided'}, {c.seen}/{c.population} cases)" for c in checks)
    if failed:
        vs = []
        for c in failed:
            d = cmp.delta(variant, c.scenario, c.metric)
            cases = tuple((d.offending if d is not None else ())[:MAX_CASES_SHOWN])
            diffs = tuple(f"{x}: {short_diff(cmp.output(cmp.baseline, x), cmp.output(variant, x))}" for x in cases[:MAX_DIFFS])
            numbers = {**c.numbers, "decided_at": c.decided_at, "how": c.how}
            vs.append(_metric_violation(rule, variant, c.scenario, c.metric, c.reason, numbers=numbers, evidence=(cases, diffs)))
        return RuleResult(
            variant=variant,
            rule=rule.name,
            severity=rule.severity,
            status=FAIL if rule.severity == "block" else WARN,
            violations=tuple(vs),
            note=f"adaptive: {checked}",
        )
    if all(c.status == PASS for c in checks):
        return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=PASS, note=f"adaptive: {checked}")
    why = "the variant's verdict was decided by another rule first" if verdict != "open" else "undecided"
    return RuleResult(variant=variant, rule=rule.name, severity=rule.severity, status=SKIP, note=f"adaptive: undecided ({why}): {checked}")
