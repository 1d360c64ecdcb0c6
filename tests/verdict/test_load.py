"""Stability under load as figures and rules (evalsuite.verdict.load), on synthetic windows."""

from __future__ import annotations

import pytest

from evalsuite.perf.stats import RatioCI
from evalsuite.run.load import LoadWindow
from evalsuite.verdict.load import LoadFlip, LoadLevel, LoadSummary, load_checks, summarize_load
from evalsuite.verdict.rubric import LoadRule, RubricError, parse_rubric


def window(variant: str, level: int, rnd: int, ttft: list[float], *, errors: int = 0, timeouts: int = 0, wall: float = 1.0, tokens: int = 10) -> LoadWindow:
    return LoadWindow(
        variant=variant,
        level=level,
        round=rnd,
        requests=len(ttft) + errors + timeouts,
        errors=errors,
        timeouts=timeouts,
        wall_s=wall,
        new_tokens=tokens,
        ttft_s=tuple(ttft),
        itl_s=(0.01, 0.02),
        e2e_s=tuple(t + 0.5 for t in ttft),
        tokens_per_s=(5.0,) * len(ttft),
    )


def doc(*windows: LoadWindow) -> dict:
    return {"settings": {"levels": [4]}, "windows": [w.to_dict() for w in windows]}


def test_levels_pool_their_rounds_and_pair_ttft_with_the_baseline_by_round():
    d = doc(
        window("base", 4, 0, [0.1, 0.2]),
        window("base", 4, 1, [0.1, 0.3]),
        window("cand", 4, 0, [0.2, 0.4], wall=2.0),
        window("cand", 4, 1, [0.2, 0.6], wall=2.0),
        window("cand", 0, 0, [0.1]),
    )
    s = summarize_load(d, "base")
    [four] = s.for_variant("cand")
    assert (four.rounds, four.requests, four.errors) == (2, 4, 0)
    assert four.ttft_s["p50"] == pytest.approx(0.3) and four.ttft_s["p99"] == pytest.approx(0.6 - 0.2 * 0.03)
    assert four.tokens_per_s == pytest.approx(20 / 4.0) and four.tokens_per_s_request == 5.0
    assert four.queue_wait_s is None and four.queue_wait_source == "not exposed by the server"
    ci = four.ttft_p95_ratio
    assert ci is not None and ci.n == 2 and ci.ratio == pytest.approx((0.39 / 0.195 * 0.58 / 0.29) ** 0.5)
    assert s.rest("cand") is not None and s.rest("base") is None
    assert s.for_variant("base")[0].ttft_p95_ratio is None  # the baseline has nothing to be compared with
    assert summarize_load(None, "base") is None


def test_without_the_baseline_under_load_the_ttft_ratio_is_unknown():
    s = summarize_load(doc(window("cand", 4, 0, [0.2]), window("cand", 4, 1, [0.3])), "base")
    assert s.for_variant("cand")[0].ttft_p95_ratio is None


def test_a_load_flip_is_a_record_carried_as_data_and_formatted_where_shown():
    """Issue 41: a flip is a LoadFlip (scenario, metric, case), not text parsed back: a case id with
    ": " in it is counted and shown as itself."""
    from evalsuite.report.stability import load_rows
    from evalsuite.scoring.base import ScoreRecord
    from evalsuite.scoring.run import LOAD_MARK

    class Flipped:  # a paired comparison in which two cases went pass->fail
        pass_fail = True
        pass_to_fail = ("b: 1", "a: 1")
        fail_to_pass = ()

    def rec(variant: str, metric: str) -> ScoreRecord:
        return ScoreRecord(variant=variant, case_id="a: 1", sample=0, scenario="kb_qa", kind="k", metric=metric, value=None, passed=True, higher_is_better=True, details={})

    def per_case(records):
        return {(r.variant, r.scenario, r.metric): {r.case_id: r} for r in records}

    load_records = [rec(f"cand{LOAD_MARK}4", "m2"), rec(f"cand{LOAD_MARK}4", "m1")]
    s = summarize_load(doc(window("cand", 4, 0, [0.1])), "base", load_records=load_records, pairing=(per_case, lambda *a: Flipped()))
    [four] = s.for_variant("cand")
    assert four.flips[:2] == (LoadFlip(scenario="kb_qa", metric="m1", case_id="a: 1"), LoadFlip(scenario="kb_qa", metric="m1", case_id="b: 1"))
    assert len(four.flips) == 4 and four.flipped_cases == 2 and four.baseline_pass_to_fail == 4
    assert four.to_dict()["flips"] == ("kb_qa/m1: a: 1", "kb_qa/m1: b: 1", "kb_qa/m2: a: 1", "kb_qa/m2: b: 1")
    assert load_rows(s)[0]["flip_cases"] == "kb_qa/m1: a: 1, kb_qa/m1: b: 1, kb_qa/m2: a: 1, kb_qa/m2: b: 1"


def level(n: int = 4, *, flips=(), scored=True, errors=0, timeouts=0, requests=10, ci=None) -> LoadLevel:
    none = {"p50": None, "p95": None, "p99": None}
    return LoadLevel(
        variant="cand",
        level=n,
        rounds=2,
        requests=requests,
        not_sent=0,
        errors=errors,
        timeouts=timeouts,
        ttft_s=none,
        itl_s=none,
        e2e_s=none,
        tokens_per_s=None,
        tokens_per_s_request=None,
        queue_wait_s=None,
        queue_wait_source="x",
        ttft_p95_ratio=ci,
        flips=tuple(flips),
        scored=scored,
    )


@pytest.mark.parametrize(
    "rest_flips, load_flips, allowed, status",
    [
        ((), (), 0, "pass"),
        ((), (LoadFlip(scenario="kb_qa", metric="exactness.identical", case_id="q1"),), 0, "fail"),
        ((LoadFlip(scenario="kb_qa", metric="exactness.identical", case_id="q2"),), (LoadFlip(scenario="kb_qa", metric="exactness.identical", case_id="q1"),), 0, "pass"),  # within the at-rest rerun's noise
        ((), (LoadFlip(scenario="a", metric="m", case_id="q1"), LoadFlip(scenario="a", metric="m", case_id="q2")), 1, "fail"),
        ((), (LoadFlip(scenario="a", metric="m", case_id="q1"), LoadFlip(scenario="a", metric="m", case_id="q2")), 2, "pass"),
    ],
)
def test_batch_invariance_counts_flips_beyond_the_at_rest_noise_floor(rest_flips, load_flips, allowed, status):
    s = LoadSummary(baseline="base", levels=(level(0, flips=rest_flips), level(4, flips=load_flips)))
    [check] = load_checks(LoadRule(name="bi", max_load_flips=allowed), s, "cand")
    assert (check.level, check.status) == (4, status)


def test_unscored_answers_or_no_rest_rerun_cannot_be_judged():
    rule = LoadRule(name="bi", max_load_flips=0)
    assert load_checks(rule, LoadSummary(levels=(level(0), level(4, scored=False))), "cand")[0].status == "cannot_judge"
    assert load_checks(rule, LoadSummary(levels=(level(4),)), "cand")[0].status == "cannot_judge"
    assert load_checks(rule, LoadSummary(levels=(level(4),)), "other") == []


@pytest.mark.parametrize(
    "ci, status",
    [
        (RatioCI(2.0, 1.6, 2.5, 4), "fail"),  # the whole interval above the limit
        (RatioCI(1.1, 1.0, 1.2, 4), "pass"),
        (RatioCI(1.4, 1.1, 1.9, 4), "cannot_judge"),  # straddles 1.5
        (RatioCI(2.0, 0.0, float("inf"), 1), "cannot_judge"),  # one round: no interval
        (None, "cannot_judge"),  # the baseline's server was not under load
    ],
)
def test_ttft_ratio_is_judged_on_its_interval(ci, status):
    s = LoadSummary(baseline="base", levels=(level(4, ci=ci),))
    [check] = load_checks(LoadRule(name="lat", max_load_ttft_p95_ratio=1.5), s, "cand")
    assert check.status == status
    if ci is None:
        assert "'base' was not put under load" in check.reason


@pytest.mark.parametrize(
    "errors, timeouts, requests, statuses",
    [(0, 0, 10, ["pass", "pass"]), (2, 0, 10, ["fail", "pass"]), (0, 1, 10, ["pass", "fail"]), (0, 0, 0, ["cannot_judge", "cannot_judge"])],
)
def test_error_and_timeout_rates_per_level(errors, timeouts, requests, statuses):
    s = LoadSummary(levels=(level(4, errors=errors, timeouts=timeouts, requests=requests),))
    checks = load_checks(LoadRule(name="rel", max_load_error_rate=0.1, max_load_timeout_rate=0.0), s, "cand")
    assert [c.status for c in checks] == statuses


def test_load_rules_parse_and_refuse_mixing_or_bad_values():
    r = parse_rubric({"rules": [{"name": "bi", "max_load_flips": 1, "max_load_ttft_p95_ratio": 2, "severity": "warn"}]}).for_stage("production")
    assert r.rules == (LoadRule(name="bi", max_load_flips=1, max_load_ttft_p95_ratio=2.0, severity="warn"),)
    with pytest.raises(RubricError, match="max_error_rate: load fields"):
        parse_rubric({"rules": [{"name": "x", "max_load_flips": 1, "max_error_rate": 0.1}]})
    with pytest.raises(RubricError, match="max_load_flips: expected an integer"):
        parse_rubric({"rules": [{"name": "x", "max_load_flips": 0.5}]})
    with pytest.raises(RubricError, match="max_load_error_rate: must be at most 1"):
        parse_rubric({"rules": [{"name": "x", "max_load_error_rate": 2}]})


def test_the_gate_skips_a_load_rule_without_load_figures_and_misses_a_required_one():
    from dataclasses import replace

    from evalsuite.scoring.base import ScoreRecord
    from evalsuite.verdict.compare import VariantInfo, compare_records
    from evalsuite.verdict.gate import gate

    recs = [
        ScoreRecord(variant=v, case_id="c1", sample=0, scenario="kb_qa", kind="k", metric="m", value=1.0, passed=True, higher_is_better=True, details={})
        for v in ("base", "cand")
    ]
    cmp = compare_records(recs, [VariantInfo("base", baseline=True), VariantInfo("cand")])
    sr = parse_rubric({"rules": [{"name": "bi", "max_load_flips": 0}, {"name": "req", "max_load_error_rate": 0, "required": True}]}).for_stage("production")
    v = gate(cmp, sr)
    by = {r.rule: r for r in v.results}
    assert by["bi"].status == "skip" and by["req"].status == "missing" and not v.judgeable
    # with figures: a flip beyond the at-rest rerun fails, with the flipped case as evidence
    loaded = replace(cmp, load=LoadSummary(baseline="base", levels=(level(0), level(4, flips=[LoadFlip(scenario="kb_qa", metric="m", case_id="c1")]))))
    v = gate(loaded, sr)
    by = {r.rule: r for r in v.results}
    assert by["bi"].status == "fail" and by["bi"].violations[0].cases == ("c1",) and by["req"].status == "pass"
    assert v.status == "regression"
