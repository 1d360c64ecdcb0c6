"""Review verdicts in the gate: `acceptable` waives, `regression` fails, too many open items need review."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from evalsuite.verdict.decisions import Decisions
from evalsuite.verdict.compare import VariantInfo, compare_records
from evalsuite.report.terminal import verdict_view
from evalsuite.verdict.gate import gate
from evalsuite.verdict.decisions import REVIEW_RULE, ReviewDecisions
from evalsuite.verdict.waivers import waive_delta
from evalsuite.verdict.rubric import parse_rubric
from evalsuite.scoring.base import ScoreRecord

INFOS = [VariantInfo("base", baseline=True), VariantInfo("opt")]


def rec(variant, case, metric, value, passed=None, hib=True, scenario="kb_qa"):
    return ScoreRecord(variant=variant, case_id=case, sample=0, scenario=scenario, kind="k", metric=metric, value=value, passed=passed, higher_is_better=hib, details={})


def flips(n: int, k: int, metric="citations.recall"):
    """The baseline passes every case; the variant fails the first k."""
    out = []
    for i in range(n):
        out.append(rec("base", f"c{i:02d}", metric, 1.0, True))
        out.append(rec("opt", f"c{i:02d}", metric, 0.0 if i < k else 1.0, i >= k))
    return out


def rubric(**rule):
    return parse_rubric({"rules": [{"name": "r", "scenario": "kb_qa", "metric": "citations.recall", **rule}]}, "t.yaml")


def accept(*cases, variant="opt"):
    return ReviewDecisions(accepted={variant: {c: "item, alice: fine" for c in cases}}, source="q.sqlite")


@pytest.mark.parametrize(
    "k, accepted, rule, passed_after",
    [
        (3, ("c00", "c01", "c02"), {"max_flips": 0}, True),  # every flip accepted: the rule passes
        (3, ("c00", "c01"), {"max_flips": 0}, False),  # one flip left: still fails, with one case
        (3, ("c00",), {"max_flips": 2}, True),  # 2 flips left: within max_flips
        (12, tuple(f"c{i:02d}" for i in range(8)), {"max_drop": 0.02, "require_significance": True}, True),  # 4 flips: p = 1/16, not significant
        (12, tuple(f"c{i:02d}" for i in range(2)), {"max_drop": 0.02, "require_significance": True}, False),  # 10 flips: still significant
    ],
)
def test_acceptable_verdicts_turn_a_failing_gate_into_a_passing_one(k, accepted, rule, passed_after):
    cmp = compare_records(flips(100, k), INFOS)
    r = rubric(**rule)
    before = gate(cmp, r.for_stage("production"))
    assert not before.passed and before.exit_code == 1
    after = gate(cmp, r.for_stage("production"), Decisions(review=accept(*accepted)))
    assert after.passed is passed_after and after.exit_code == (0 if passed_after else 1)
    res = after.result("opt", "r")
    if passed_after:
        assert res.status == "pass" and "waived by review" in res.note and all(c in res.note for c in accepted[:10])
        assert any("passes for opt only because reviewers accepted" in n for n in after.notes)
    else:
        left = [c for c in (f"c{i:02d}" for i in range(k)) if c not in accepted]
        assert res.status == "fail" and set(res.violations[0].cases) == set(left[:10]) and "accepted output(s) left out" in res.note
        assert res.violations[0].numbers["pass_to_fail"] == len(left)
    assert after.review["accepted"] == {"opt": sorted(accepted)}


def test_regression_verdict_turns_a_passing_gate_into_a_failing_one():
    cmp = compare_records(flips(100, 1), INFOS)
    r = rubric(max_flips=2)
    assert gate(cmp, r.for_stage("production")).passed
    reviews = ReviewDecisions(regressions={"opt": {"c50": "item #7, bob: wrong unit"}}, source="q.sqlite")
    v = gate(cmp, r.for_stage("production"), Decisions(review=reviews))
    assert not v.passed and v.exit_code == 1 and v.result("opt", "r").status == "pass"
    hr = v.result("opt", REVIEW_RULE)
    assert hr.status == "fail" and hr.violations[0].cases == ("c50",) and "wrong unit" in hr.violations[0].diffs[0]
    assert v.failed_rules("opt") == [REVIEW_RULE]
    data = v.to_dict()
    assert data["review"]["regressions"] == {"opt": ["c50"]} and data["violations"][0]["rule"] == REVIEW_RULE


def test_an_accepted_case_can_still_be_overruled_by_a_regression_on_another():
    cmp = compare_records(flips(100, 2), INFOS)
    reviews = ReviewDecisions(accepted={"opt": {"c00": "a", "c01": "a"}}, regressions={"opt": {"c01x": "b"}})
    v = gate(cmp, rubric(max_flips=0).for_stage("production"), Decisions(review=reviews))
    assert v.result("opt", "r").status == "pass" and v.result("opt", REVIEW_RULE).status == "fail" and not v.passed


@pytest.mark.parametrize("n_open, max_open, code", [(3, 2, 3), (2, 2, 0), (5, None, 0)])
def test_open_items_above_max_open_need_review_with_exit_code_3(n_open, max_open, code):
    cmp = compare_records(flips(50, 0), INFOS)
    reviews = ReviewDecisions(open_items={"opt": tuple(range(n_open))}, max_open=max_open, source="q.sqlite")
    v = gate(cmp, rubric(max_flips=0).for_stage("production"), Decisions(review=reviews))
    assert v.passed and v.exit_code == code and v.needs_review is (code == 3)
    d = json.loads(json.dumps(v.to_dict()))
    assert d["needs_review"] is (code == 3) and d["exit_code"] == code and d["review"]["open"] == n_open
    buf = io.StringIO()
    Console(file=buf, width=200).print(verdict_view(v, verbose=True))
    assert ("NEEDS REVIEW" in buf.getvalue()) is (code == 3)


def test_needs_review_does_not_hide_a_regression():
    cmp = compare_records(flips(50, 3), INFOS)
    v = gate(cmp, rubric(max_flips=0).for_stage("production"), Decisions(review=ReviewDecisions(open_items={"opt": (1, 2, 3)}, max_open=0)))
    assert v.needs_review and v.exit_code == 1


def test_waiving_a_continuous_metric_recomputes_its_mean_and_worse_cases():
    recs = []
    for i in range(20):
        recs.append(rec("base", f"c{i:02d}", "similarity.score", 0.9))
        recs.append(rec("opt", f"c{i:02d}", "similarity.score", 0.5 if i < 2 else 0.9))
    cmp = compare_records(recs, INFOS)
    d = cmp.delta("opt", "kb_qa", "similarity.score")
    assert d.worse_cases == ("c00", "c01") and d.harm == pytest.approx(0.04)
    nd, waived = waive_delta(d, {"c00": "ok"}, cmp.seed)
    assert waived == ("c00",) and nd.worse_cases == ("c01",) and nd.harm == pytest.approx(0.02) and nd.paired["c00"] == (0.9, 0.9)
    r = parse_rubric({"rules": [{"name": "r", "scenario": "kb_qa", "metric": "similarity.score", "max_drop": 0.03}]}, "t.yaml")
    assert not gate(cmp, r.for_stage("production")).passed
    assert gate(cmp, r.for_stage("production"), Decisions(review=accept("c00"))).passed


def test_noise_runs_and_cases_that_do_not_offend_are_untouched():
    recs = flips(30, 2) + [rec("rerun", f"c{i:02d}", "citations.recall", 0.0 if i < 2 else 1.0, i >= 2) for i in range(30)]
    cmp = compare_records(recs, INFOS + [VariantInfo("rerun", noise=True)])
    d = cmp.delta("opt", "kb_qa", "citations.recall")
    nd, waived = waive_delta(d, {"c10": "passes anyway"}, cmp.seed)
    assert nd is d and waived == ()
    v = gate(cmp, rubric(max_flips=0).for_stage("production"), Decisions(review=ReviewDecisions(accepted={"opt": {"c00": "a", "c01": "a"}, "rerun": {"c00": "a", "c01": "a"}})), judge_noise=True)
    assert v.result("opt", "r").status == "pass" and v.result("rerun", "r").status == "fail"


def test_an_accepted_speculative_mismatch_counts_as_identical_for_min_exactness():
    from dataclasses import replace

    from evalsuite.verdict.compare import PerfDelta

    cmp = compare_records(flips(10, 0), INFOS)
    perf = PerfDelta(variant="opt", generations=10, errors=0, timeouts=0, error_rate=0.0, timeout_rate=0.0, baseline_error_rate=0.0, baseline_timeout_rate=0.0, latency_p95_ratio=None, tokens_per_s_ratio=None, peak_memory_ratio=None, speculative=True, exactness=0.9, exactness_n=10)
    outputs = {("base", f"c{i:02d}"): "same" for i in range(10)} | {("opt", f"c{i:02d}"): ("other" if i == 4 else "same") for i in range(10)}
    cmp = replace(cmp, perf=(perf,), outputs=outputs)
    r = parse_rubric({"rules": [{"name": "exact", "min_exactness": 0.95}]}, "t.yaml")
    assert gate(cmp, r.for_stage("production")).result("opt", "exact").status == "fail"
    v = gate(cmp, r.for_stage("production"), Decisions(review=accept("c04")))
    assert v.passed and "waived by review" in v.result("opt", "exact").note
    assert gate(cmp, r.for_stage("production"), Decisions(review=accept("c05"))).result("opt", "exact").status == "fail"  # identical output: nothing to waive
