"""The gate of an adaptive run: the sequential decisions, not a fixed-n test on a peeked sample.

A fixed-n test on the cases an adaptive run happened to stop at would be biased (the run stopped
*because* of what those cases showed). So `evalsuite gate` on a run with `adaptive.json` re-evaluates
the sequential checks (evalsuite.adaptive.verdict) on the generated prefix, in the recorded order,
and turns them into the usual Verdict. For the stage the run was made for, this reproduces the
recorded decision (a difference means the scores or the rubric changed since, and is reported);
for another stage it is still valid, because the e-processes hold at any stopping time, but a rule
of that stage may stay undecided (the run stopped for the other stage's rules): the run is then
not judgeable for it. Variant-level rules (reliability, speed, memory, exactness) are judged on the
generated cases as the fixed-n gate does.
"""

from __future__ import annotations

from ..verdict.compare import compare_run
from ..verdict.gate import RuleResult, Verdict, Violation, _judge_variant_rule, short_diff
from ..verdict.rubric import MetricRule, Rubric, StageRubric
from .driver import _checks_for, load_state
from .verdict import CheckResult, evaluate


def adaptive_gate(store, rubric: Rubric | StageRubric, stage: str = "production", *, judge_noise: bool = False) -> Verdict:
    """The verdict of an adaptive run for `stage`, from its sequential decisions."""
    state = load_state(store)
    sr = rubric if isinstance(rubric, StageRubric) else rubric.for_stage(stage)
    cmp = compare_run(store, n_resamples=99)
    problems = list(cmp.problems)
    notes: list[str] = []
    sr_used, checks, base, others = _checks_for(store, state, stage=sr.stage, rubric_path=sr.path)
    recorded_stage = state["settings"].get("stage")
    if judge_noise and cmp.noise_runs:
        notes.append("adaptive run: noise runs ran in full as the reference; they are not judged as variants")
    results: list[RuleResult] = []
    judged = [v for v in cmp.variants if v in state.get("variants", {})]
    for variant in judged:
        entry = state["variants"][variant]
        sequence = [c for b in entry.get("batches", []) for c in b]
        st = evaluate(
            variant,
            checks,
            base,
            others.get(variant, {}),
            set(sequence),
            state["order"],
            method=sr.multiple_testing,
            noise_floor=cmp.noise_floor,
            bounds=True,
            sequence=sequence,
        )
        recorded = (entry.get("state") or {}).get("verdict")
        if sr.stage == recorded_stage and recorded and recorded != st.verdict:
            problems.append(
                f"{variant}: the recorded adaptive decision ({recorded}) differs from the one recomputed now ({st.verdict}): the scores or the rubric changed since the run"
            )
        if not entry.get("stopped"):
            problems.append(f"{variant}: the adaptive run did not finish for this variant (resume it)")
        elif st.verdict == "open":
            problems.append(
                f"{variant}: stage {sr.stage} is not decided by the cases this adaptive run generated (it stopped for stage {recorded_stage}); run it adaptively for {sr.stage}"
            )
        decider = _decider(st)
        notes.append(
            f"{variant}: adaptive verdict {st.verdict} after {st.decided_after if st.decided_after is not None else st.generated} of {len(state['order'])} cases"
            f" ({st.generated} generated){'; decided by ' + decider if decider else ''}"
        )
        by_rule: dict[str, list[CheckResult]] = {}
        for r in st.results:
            by_rule.setdefault(r.rule, []).append(r)
        for rule in sr.rules:
            if not isinstance(rule, MetricRule):
                results.append(_judge_variant_rule(cmp, rule, variant, problems))
                continue
            rs = by_rule.get(rule.name, [])
            if not rs:
                present = "*" in rule.scenarios or any(s in cmp.scenarios for s in rule.scenarios)
                note = f"no baseline scores of {rule.metric} in {'/'.join(rule.scenarios)}"
                if rule.required and present:
                    problems.append(f"rule {rule.name}: {note} for {variant}")
                    results.append(RuleResult(variant, rule.name, rule.severity, "missing", note=note))
                else:
                    results.append(RuleResult(variant, rule.name, rule.severity, "skip", note=note))
                continue
            results.append(_rule_result(cmp, variant, rule, rs, st.verdict))
    judgeable = not problems
    passed = judgeable and not any(r.status == "fail" for r in results)
    return Verdict(passed, judgeable, sr.stage, sr.path, cmp.run_id, cmp.baseline, tuple(judged), tuple(results), tuple(dict.fromkeys(problems)), tuple(notes))


def _decider(st) -> str:
    if st.verdict == "fail":
        first = min((r for r in st.results if r.severity == "block" and r.status == "fail"), key=lambda r: r.variant_cases or 0)
        return f"{first.rule} ({first.scenario}/{first.metric}, {first.how}, after {first.decided_at} of its {first.population} cases)"
    if st.verdict == "pass":
        block = [r for r in st.results if r.severity == "block"]
        if block:
            last = max(block, key=lambda r: r.variant_cases or 0)
            return (
                f"the last block rule to pass: {last.rule} ({last.scenario}/{last.metric}, {last.how}, after {last.decided_at} of its {last.population} cases)"
            )
    return ""


def _rule_result(cmp, variant: str, rule: MetricRule, rs: list[CheckResult], verdict: str) -> RuleResult:
    failed = [r for r in rs if r.status == "fail"]
    checked = ", ".join(f"{r.scenario}/{r.metric}: {r.status} ({r.how or 'undecided'}, {r.seen}/{r.population} cases)" for r in rs)
    if failed:
        vs = []
        for r in failed:
            d = cmp.delta(variant, r.scenario, r.metric)
            cases = tuple((d.offending if d is not None else ())[:10])
            diffs = tuple(f"{c}: {short_diff(cmp.output(cmp.baseline, c), cmp.output(variant, c))}" for c in cases[:3])
            vs.append(
                Violation(
                    rule.name,
                    rule.severity,
                    variant,
                    r.scenario,
                    r.metric,
                    f"{r.scenario}/{r.metric}: {r.reason}",
                    {**r.numbers, "decided_at": r.decided_at, "how": r.how},
                    cases,
                    diffs,
                )
            )
        return RuleResult(variant, rule.name, rule.severity, "fail" if rule.severity == "block" else "warn", tuple(vs), note=f"adaptive: {checked}")
    if all(r.status == "pass" for r in rs):
        return RuleResult(variant, rule.name, rule.severity, "pass", note=f"adaptive: {checked}")
    why = "the variant's verdict was decided by another rule first" if verdict != "open" else "undecided"
    return RuleResult(variant, rule.name, rule.severity, "skip", note=f"adaptive: undecided ({why}): {checked}")
