"""Sequential checks from rubric rules: false alarms under peeking, early decisions, exact rules."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from evalsuite.adaptive.checks import AdaptiveSettings, build_checks, evaluate, replay, seeded_order
from evalsuite.verdict.compare import CaseAgg
from evalsuite.verdict.rubric import parse_rubric

#: eight significance-gated block rules over three scenarios, at shipped-like sizes
FAMILY = {("kb_qa", "citations.recall"): 70, ("kb_qa", "grounding.abstained"): 25, ("kb_qa", "grounding.false_abstention"): 70,
          ("kb_qa", "grounding.refused"): 24, ("code", "code.pass"): 50, ("brand", "json.valid"): 80,
          ("brand", "terminology.forbidden"): 80, ("brand", "terminology.retention"): 80}
SIZES = {"kb_qa": 100, "code": 75, "brand": 80}


def rubric(extra: list | None = None, alpha: float = 0.05):
    rules = [{"name": f"r-{m}", "scenario": s, "metric": m, "max_drop": 0.02, "require_significance": True} for s, m in FAMILY]
    return parse_rubric({"schema_version": 1, "name": "t", "alpha": alpha, "rules": rules + (extra or [])}).for_stage("production")


def case_ids():
    return {s: [f"{s}-{i:03d}" for i in range(n)] for s, n in SIZES.items()}


def agg(x: bool) -> CaseAgg:
    return CaseAgg(values=[float(x)], passes=[float(x)])


def synth(rng, regress: dict | None = None, probs=(0.6, 0.2, 0.1, 0.1), half: bool = False):
    """Baseline and variant pass/fail per case, drawn from the same per-case pass probability
    (nearly always pass, coin flip, nearly always fail, always fail: 60/20/10/10 of the cases), so
    an unchanged variant differs from the baseline by noise only; `regress` plants pass->fail flips
    on a share of the passing cases of some (scenario, metric)."""
    ids = case_ids()
    base, var = {}, {}
    for (s, m), n in FAMILY.items():
        n = n // 2 if half else n
        pool = ids[s][:n]
        p = rng.choice([0.97, 0.5, 0.05, 0.0], p=probs, size=n)
        b, v = rng.random(n) < p, rng.random(n) < p
        share = (regress or {}).get((s, m), 0.0)
        if share:
            v = v & ~(rng.random(n) < share)
        base[(s, m)] = {c: agg(x) for c, x in zip(pool, b)}
        var[(s, m)] = {c: agg(x) for c, x in zip(pool, v)}
    return base, var


def cases():
    return [SimpleNamespace(id=c, scenario=s) for s, ids in case_ids().items() for c in ids]


def test_order_is_seeded_stratified_and_independent_of_file_order():
    cs = cases()
    a, b = seeded_order(cs, 0), seeded_order(list(reversed(cs)), 0)
    assert a == b and sorted(a) == sorted(c.id for c in cs) and seeded_order(cs, 1) != a
    first = a[:51]  # a fifth of the cases: every scenario at about a fifth of its cases
    for s, n in SIZES.items():
        assert abs(sum(c.startswith(s) for c in first) - n / 5) <= 1


def test_peeking_after_every_case_does_not_inflate_false_alarms():
    """1,000 seeded unchanged variants (noise only: a fifth of the cases are coin flips), every
    block check looked at after every case (the first decision of each check counts, as in a run
    that peeks after each case; then the final look on whatever is undecided): the share that fails
    stays within alpha plus its binomial margin. (Half the shipped sizes, to keep the test fast.)"""
    rng = np.random.default_rng(20240601)
    sr = rubric()
    order = seeded_order(cases(), 0)
    runs, alarms = 1000, 0
    for _ in range(runs):
        base, var = synth(rng, half=True)
        checks = build_checks(sr, base, order, AdaptiveSettings())
        st = evaluate("v", checks, base, var, set(order), order)
        alarms += st.verdict == "fail"
    assert alarms / runs <= 0.05 + 1.96 * math.sqrt(0.05 * 0.95 / runs), alarms


def test_a_30_percent_regression_is_decided_in_far_fewer_cases_than_the_full_set():
    """30% of the passing brand cases go pass->fail on one metric (each case passes with probability
    0.97 on either side, so about 6% of the cases flip by noise): the
    runs fail on that rule, by the sequential test or the final look, on average after well under
    half of the cases the fixed-n run generates."""
    rng = np.random.default_rng(5)
    sr = rubric()
    order = seeded_order(cases(), 0)
    generated, caught = [], 0
    for rep in range(20):
        base, var = synth(rng, regress={("brand", "json.valid"): 0.3}, probs=(1.0, 0.0, 0.0, 0.0))
        checks = build_checks(sr, base, order, AdaptiveSettings())
        st = replay("v", checks, base, var, order, batch_size=8)
        caught += st.verdict == "fail"
        if st.verdict == "fail":
            decider = min((r for r in st.results if r.status == "fail"), key=lambda r: r.variant_cases)
            assert decider.rule == "r-json.valid", (rep, decider)
        generated.append(st.generated)
    assert caught >= 18, caught  # the rest are draws where noise hid most of the regression
    assert np.mean(generated) <= 0.45 * len(order), generated
    assert np.median(generated) <= 0.40 * len(order), generated


def test_a_clean_variant_passes_early_and_a_zero_tolerance_rule_waits_for_its_last_case():
    rng = np.random.default_rng(9)
    leak = {"name": "no-leaks", "scenario": "kb_qa", "metric": "grounding.refused", "max_flips": 0}
    sr = rubric([leak])
    order = seeded_order(cases(), 0)
    base, var = synth(rng, probs=(1.0, 0.0, 0.0, 0.0))
    var = {k: dict(v) for k, v in base.items()}  # identical outputs
    checks = build_checks(sr, base, order, AdaptiveSettings())
    st = replay("v", checks, base, var, order, batch_size=8)
    assert st.verdict == "pass" and st.generated < 0.75 * len(order)
    res = {r.rule: r for r in st.results}
    assert res["no-leaks"].how == "exact" and res["no-leaks"].seen == res["no-leaks"].population == 24
    assert res["r-json.valid"].how == "sequential" and res["r-json.valid"].decided_at <= 40
    # one new flip on the zero-tolerance rule fails it at once
    victim = next(c for c in checks if c.rule.name == "no-leaks").population[3]
    var[("kb_qa", "grounding.refused")][victim] = agg(False)
    st = replay("v", checks, base, var, order, batch_size=1)
    res = {r.rule: r for r in st.results}
    assert st.verdict == "fail" and res["no-leaks"].decided_at == 4 and res["no-leaks"].how == "exact"


@pytest.mark.parametrize("p2f, f2p, fixed_fails", [(8, 0, True), (12, 4, True), (10, 2, True), (14, 6, False)])
def test_every_case_generated_gives_the_fixed_n_decision(p2f, f2p, fixed_fails):
    """80 brand cases, a net drop of exactly tau = 0.10 on one metric and nothing else moving: too
    few flips for the sequential test, and a drop the pass side cannot rule out, so every case is
    generated and the final look decides with the fixed-n gate's rule and Tarone correction (the
    other two brand checks were passed early, but their cases were generated for this one, so their
    p_min is known: K = 1 as in the fixed-n gate) at the full alpha. Its p-value counts the paths
    on which the looks would have failed too, so it lies between the exact McNemar p and that plus
    the null mass of the looks' region (p_cross): the decisions agree on every configuration here,
    12 pass->fail against 4 fail->pass (p = 0.038) included, which a split of alpha between the
    looks and the last look used to pass."""
    from evalsuite.verdict.compare import binom_worse_p

    brand = [c for c in cases() if c.scenario == "brand"]
    order = seeded_order(brand, 0)
    fam = {k: n for k, n in FAMILY.items() if k[0] == "brand"}
    base = {k: {c: agg(True) for c in order} for k in fam}
    var = {k: dict(v) for k, v in base.items()}
    key = ("brand", "json.valid")
    spread = order[::80 // (p2f + f2p)][: p2f + f2p]  # spread over the order, as a random order would
    back = set(spread[1::4][:f2p]) if f2p <= len(spread[1::4]) else set(spread[1::2][:f2p])
    for c in spread:
        if c in back:
            base[key][c] = agg(False)
        else:
            var[key][c] = agg(False)
    sr = parse_rubric({"schema_version": 1, "name": "t", "alpha": 0.05, "rules": [
        {"name": f"r-{m}", "scenario": s, "metric": m, "max_drop": 0.02, "require_significance": True} for s, m in fam]}).for_stage("production")
    checks = build_checks(sr, base, order, AdaptiveSettings())
    st = replay("v", checks, base, var, order, batch_size=8)
    assert st.generated == len(order)  # every case generated
    r = next(x for x in st.results if x.rule == "r-json.valid")
    p = binom_worse_p(p2f, f2p)
    assert (p < 0.05 and (p2f - f2p) / 80 > 0.02) == fixed_fails
    assert (st.verdict == "fail") == fixed_fails
    assert r.how == "final look" and r.numbers["alpha_final"] == pytest.approx(0.05)
    assert p - 1e-12 <= r.numbers["p_adjusted"] <= p + r.numbers["p_cross"] + 1e-12
    assert {x.how for x in st.results if x is not r} == {"sequential"}  # the other two passed early

def _points_metric(seed: int = 1):
    """80 brand cases of a continuous metric on a 0-100 scale (higher is better, no pass/fail)."""
    brand = [c for c in cases() if c.scenario == "brand"]
    order = seeded_order(brand, 0)
    rng = np.random.default_rng(seed)
    values = {c: float(rng.uniform(50, 90)) for c in order}
    base = {("brand", "score.points"): {c: CaseAgg(values=[x]) for c, x in values.items()}}
    return order, values, base


def _run_points(rules: list, base, var, order):
    sr = parse_rubric({"schema_version": 1, "name": "t", "alpha": 0.05, "rules": rules}).for_stage("production")
    checks = build_checks(sr, base, order, AdaptiveSettings())
    return replay("v", checks, base, var, order, batch_size=8)


def test_a_metric_off_the_unit_range_is_not_curtailed_as_if_its_values_were_in_0_1():
    """`min: 40` on a 0-100 metric that the variant leaves unchanged (mean about 70): curtailment
    that assumed every remaining case adds at most 1 failed it at its first case."""
    order, values, base = _points_metric()
    same = {k: {c: CaseAgg(values=list(a.values)) for c, a in v.items()} for k, v in base.items()}
    st = _run_points([{"name": "r-min", "scenario": "brand", "metric": "score.points", "min": 40}], base, same, order)
    r = st.results[0]
    assert st.verdict == "pass" and r.status == "pass" and r.decided_at == 80
    # and `max: 60` on the same unchanged metric fails, at its last case at the earliest
    st = _run_points([{"name": "r-max", "scenario": "brand", "metric": "score.points", "max": 60}], base, same, order)
    assert st.verdict == "fail"


def test_a_large_drop_on_a_metric_off_the_unit_range_is_not_passed_early():
    """A 0-100 metric, max_drop 5 with significance: the variant loses 30 points on every case but
    the first in the run's order. The pass side clipped d to [-1, 1], found a drop of tau = 5
    impossible and passed the check after one case; the fixed-n gate fails it."""
    order, values, base = _points_metric()
    var = {("brand", "score.points"): {c: CaseAgg(values=[x - (0.0 if c == order[0] else 30.0)]) for c, x in values.items()}}
    rule = {"name": "r-drop", "scenario": "brand", "metric": "score.points", "max_drop": 5, "require_significance": True}
    st = _run_points([rule], base, var, order)
    assert st.verdict == "fail" and st.results[0].status == "fail"


@pytest.mark.parametrize("json_first", [False, True])
def test_the_final_look_judges_each_rule_at_its_own_alpha_whatever_the_rule_order(json_first):
    """Two brand rules, json.valid with `require_significance: 0.01` (12 pass->fail against 4
    fail->pass: p = 0.038, not significant at 0.01) and terminology.retention at the stage's 0.05
    (nothing moves). The fixed-n gate passes json.valid; the final look used the alpha of the
    family's first rule for every rule, so listing retention first failed it at 0.05."""
    brand = [c for c in cases() if c.scenario == "brand"]
    order = seeded_order(brand, 0)
    fam = [("brand", "json.valid"), ("brand", "terminology.retention")]
    base = {k: {c: agg(True) for c in order} for k in fam}
    var = {k: dict(v) for k, v in base.items()}
    key = ("brand", "json.valid")
    spread = order[::5][:16]
    back = set(spread[1::4])
    for c in spread:
        if c in back:
            base[key][c] = agg(False)
        else:
            var[key][c] = agg(False)
    rules = [{"name": "r-ret", "scenario": "brand", "metric": "terminology.retention", "max_drop": 0.02, "require_significance": True},
             {"name": "r-json", "scenario": "brand", "metric": "json.valid", "max_drop": 0.02, "require_significance": 0.01}]
    sr = parse_rubric({"schema_version": 1, "name": "t", "alpha": 0.05, "rules": rules[::-1] if json_first else rules}).for_stage("production")
    st = replay("v", build_checks(sr, base, order, AdaptiveSettings()), base, var, order, batch_size=8)
    r = next(x for x in st.results if x.rule == "r-json")
    assert r.how == "final look" and r.numbers["p_adjusted"] == pytest.approx(0.0384, abs=1e-4)
    assert r.numbers["alpha_final"] == pytest.approx(0.01)
    assert st.verdict == "pass" and r.status == "pass"


def test_a_variant_case_without_pass_fail_on_a_pass_fail_metric_is_left_out_not_a_crash():
    """A pass/fail metric on which one variant case came back with values but no pass/fail (a
    scorer that failed half-way): that case is left out of the paired set, like an unscored one."""
    brand = [c for c in cases() if c.scenario == "brand"]
    order = seeded_order(brand, 0)
    base = {("brand", "json.valid"): {c: agg(True) for c in order}}
    var = {("brand", "json.valid"): {c: (CaseAgg(values=[0.5]) if c == order[0] else agg(True)) for c in order}}
    rule = {"name": "r-json", "scenario": "brand", "metric": "json.valid", "max_drop": 0.02, "require_significance": True}
    st = _run_points([rule], base, var, order)
    r = st.results[0]
    assert st.verdict == "pass" and r.population == 79 and r.numbers["N"] == 79


@pytest.mark.parametrize("required", [False, True])
def test_a_rule_with_no_variant_scores_is_skipped_unless_required(required):
    """Every case generated and none scored on the variant for a metric: the fixed-n gate skips the
    rule (or, `required`, cannot judge the run). The adaptive check did neither: it stayed open and
    so did the verdict, whatever the other rules said."""
    brand = [c for c in cases() if c.scenario == "brand"]
    order = seeded_order(brand, 0)
    base = {("brand", "json.valid"): {c: agg(True) for c in order}, ("brand", "terminology.retention"): {c: agg(True) for c in order}}
    var = {("brand", "terminology.retention"): {c: agg(True) for c in order}}  # json.valid never scored on the variant
    rules = [{"name": m, "scenario": "brand", "metric": m, "max_drop": 0.02, "require_significance": True, "required": required}
             for m in ("json.valid", "terminology.retention")]
    st = _run_points(rules, base, var, order)
    r = next(x for x in st.results if x.rule == "json.valid")
    if required:
        assert r.status == "open" and st.verdict == "open"
    else:
        assert r.status == "pass" and r.how == "skipped" and "no paired scores" in r.reason
        assert st.verdict == "pass" and st.generated == 80
