"""Performance rules on paired intervals: pass, fail, cannot judge (evalsuite/perf/verdict.py),
and their place in the gate (a distinct 'cannot judge' result, exit 2 unless something failed)."""

from __future__ import annotations

import math

import pytest

from evalsuite.verdict.compare import VariantInfo, compare_records
from evalsuite.verdict.gate import gate
from evalsuite.perf.stats import RatioCI
from evalsuite.perf.verdict import judge_ratio
from evalsuite.verdict.rubric import parse_rubric
from evalsuite.scoring.base import ScoreRecord


@pytest.mark.parametrize(
    "low, high, limit, kind, noise, status",
    [
        (1.6, 2.4, 1.5, "max", None, "fail"),  # all of it beyond the limit
        (1.6, 2.4, 1.5, "max", 1.2, "fail"),  # ... and beyond what noise reruns show
        (1.6, 2.4, 1.5, "max", 1.8, "cannot_judge"),  # beyond the limit, but noise reaches as far
        (0.9, 1.2, 1.5, "max", None, "pass"),  # all of it within
        (1.0, 1.5, 1.5, "max", None, "pass"),  # the limit itself is allowed
        (1.2, 1.8, 1.5, "max", None, "cannot_judge"),  # straddles
        (0.3, 0.6, 0.67, "min", None, "fail"),
        (0.3, 0.6, 0.67, "min", 0.5, "cannot_judge"),
        (0.8, 1.1, 0.67, "min", None, "pass"),
        (0.6, 0.9, 0.67, "min", None, "cannot_judge"),
    ],
)
def test_judge_ratio_table(low, high, limit, kind, noise, status):
    ci = RatioCI(math.sqrt(low * high), low, high, 8)
    check = judge_ratio(ci, limit, kind, noise, "latency", "max_latency_p95_ratio")
    assert check.status == status
    assert "latency x" in check.reason and f"{limit:g}" in check.reason


def test_one_round_cannot_be_judged():
    assert judge_ratio(RatioCI(3.0, 0.0, math.inf, 1), 1.5, "max").status == "cannot_judge"


def timing_doc(rounds: dict[str, list[float]], tokens: int = 10) -> dict:
    """A timing.json document: per variant, block wall times by round (p95 latency = wall / 2)."""
    blocks = [
        {"round": r, "position": 0, "variant": v, "wall_s": w, "requests": 2, "errors": 0, "new_tokens": tokens, "latency_p95_s": w / 2}
        for v, walls in rounds.items() for r, w in enumerate(walls)
    ]
    return {"schema_version": 1, "mode": "interleaved", "settings": {"level": 0.95}, "baseline": "base", "variants": list(rounds), "blocks": blocks}


INFOS = [VariantInfo("base", baseline=True), VariantInfo("opt"), VariantInfo("rerun", noise=True)]
RECORDS = [ScoreRecord(variant=v, case_id=f"c{i}", sample=0, scenario="kb_qa", kind="k", metric="m.pass", value=1.0, passed=True, higher_is_better=True, details={}) for v in ("base", "opt", "rerun") for i in range(3)]
SUMMARY = {v: {"generations": 3, "errors": 0, "timeouts": 0, "latency_p95_s": 1.0, "tokens_per_s_median": 10.0} for v in ("base", "opt", "rerun")}


def judge(opt_walls: list[float], severity: str = "block", rerun_walls: list[float] | None = None):
    base = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    doc = timing_doc({"base": base, "opt": opt_walls, "rerun": rerun_walls or [b * f for b, f in zip(base, (1.02, 0.98, 1.01, 0.99, 1.0, 1.0))]})
    cmp = compare_records(RECORDS, INFOS, perf=SUMMARY, timing=doc)
    rub = parse_rubric({"rules": [{"name": "speed", "max_latency_p95_ratio": 1.5, "min_tokens_per_s_ratio": 0.67, "severity": severity}]}, "t.yaml")
    return cmp, gate(cmp, rub.for_stage("production"))


def test_comparison_carries_interleaved_ratios_with_intervals():
    cmp, _ = judge([2.0, 2.2, 1.8, 2.0, 2.1, 1.9])
    p = cmp.perf_for("opt")
    assert p.timing == "interleaved"
    assert p.latency_p95_ratio == pytest.approx(2.0) and p.tokens_per_s_ratio == pytest.approx(0.5)
    assert p.latency_p95_ratio_ci[:3] == pytest.approx((2.0, 2.0, 6))


@pytest.mark.parametrize(
    "opt, status, exit_code",
    [
        ([2.0, 2.2, 1.8, 2.0, 2.1, 1.9], "fail", 1),  # 2x slower in every round
        ([1.0, 1.1, 0.9, 1.0, 1.05, 0.95], "pass", 0),  # unchanged
        ([1.0, 2.5, 0.9, 2.0, 1.05, 1.9], "cannot_judge", 2),  # slower in some rounds only: too wide
    ],
)
def test_gate_fails_passes_or_cannot_judge(opt, status, exit_code):
    _, verdict = judge(opt)
    res = verdict.result("opt", "speed")
    assert res.status == status
    assert verdict.exit_code == exit_code
    if status == "fail":
        assert "whole interval > max_latency_p95_ratio 1.5" in res.violations[0].reason
        assert res.violations[0].numbers["latency_p95_ratio_ci"][0] > 1.5
    if status == "cannot_judge":
        assert "straddles" in res.note and any("cannot judge" in p for p in verdict.problems)


def test_slowdown_within_the_noise_floor_cannot_be_judged():
    """The noise rerun itself looked 2-2.5x slower: a 2x slower variant is not beyond noise."""
    _, verdict = judge([2.0, 2.2, 1.8, 2.0, 2.1, 1.9], rerun_walls=[2.5, 2.6, 2.4, 2.5, 2.6, 2.3])
    res = verdict.result("opt", "speed")
    assert res.status == "cannot_judge" and "noise floor" in res.note


def test_warn_rule_that_cannot_judge_does_not_make_the_run_unjudgeable():
    _, verdict = judge([1.0, 2.5, 0.9, 2.0, 1.05, 1.9], severity="warn")
    assert verdict.result("opt", "speed").status == "cannot_judge"
    assert verdict.judgeable and verdict.exit_code == 0


def test_sequential_runs_keep_point_ratios():
    """Without timing.json the rule compares the run's own point ratios, as before."""
    summary = dict(SUMMARY, opt={**SUMMARY["opt"], "latency_p95_s": 2.0})
    cmp = compare_records(RECORDS, INFOS, perf=summary)
    rub = parse_rubric({"rules": [{"name": "speed", "max_latency_p95_ratio": 1.5}]}, "t.yaml")
    verdict = gate(cmp, rub.for_stage("production"))
    assert cmp.perf_for("opt").timing == "sequential"
    assert verdict.result("opt", "speed").status == "fail"


def test_cannot_judge_is_shown_in_the_verdict_and_ratios_with_intervals_in_the_comparison():
    import io

    from rich.console import Console

    from evalsuite.report.terminal import verdict_view
    from evalsuite.perf.verdict import ratio_cell

    cmp, verdict = judge([1.0, 2.5, 0.9, 2.0, 1.05, 1.9])
    buf = io.StringIO()
    Console(file=buf, width=300).print(verdict_view(verdict, verbose=True))
    text = buf.getvalue()
    assert "CANNOT JUDGE" in text and "cannot judge" in text and "straddles max_latency_p95_ratio 1.5" in text
    assert [r["status"] for r in verdict.to_dict()["results"] if r["variant"] == "opt"] == ["cannot_judge"]
    slow, _ = judge([2.0, 2.2, 1.8, 2.0, 2.1, 1.9])
    assert ratio_cell(slow.perf_for("opt"), "latency_p95_ratio") == "2.00 [2.00, 2.00]"
    seq = compare_records(RECORDS, INFOS, perf=SUMMARY)
    assert ratio_cell(seq.perf_for("opt"), "latency_p95_ratio") == "1.00"


@pytest.mark.parametrize("severity, latency, single, status", [("warn", 2.0, True, "cannot_judge"), ("block", 2.0, False, "fail"), ("warn", 1.0, True, "cannot_judge")])
def test_single_pass_is_a_typed_field_of_the_rule_result(severity, latency, single, status):
    """A warn rule on one sequential pass says so in `single_pass` (the gate's one note reads the
    field, not the note's text); a block rule keeps its point ratios and is not single-pass."""
    from dataclasses import replace

    from evalsuite.verdict import gate as gate_mod

    summary = dict(SUMMARY, opt={**SUMMARY["opt"], "latency_p95_s": latency})
    cmp = compare_records(RECORDS, INFOS, perf=summary)
    rub = parse_rubric({"rules": [{"name": "speed", "max_latency_p95_ratio": 1.5, "severity": severity}]}, "t.yaml")
    verdict = gate(cmp, rub.for_stage("production"))
    res = verdict.result("opt", "speed")
    assert (res.single_pass, res.status) == (single, status)
    assert any("speed (latency, tokens/s) is not judged" in n for n in verdict.notes) is single
    assert res.to_dict()["single_pass"] is single
    # the note's wording no longer decides: the same result with another note still counts
    reworded = [replace(r, note="reworded") if r.rule == "speed" else r for r in verdict.results]
    again = gate_mod._assemble_verdict(cmp, rub.for_stage("production"), list(verdict.variants), reworded, [], [])
    assert any("is not judged" in n for n in again.notes) is single
