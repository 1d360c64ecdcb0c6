"""The gate: verdicts with evidence, multiple testing, noise floors, exit codes, and the false-alarm rate."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

from evalsuite.verdict.compare import Resampling, VariantInfo, compare_records
from evalsuite.judge import judge_run
from evalsuite.verdict.gate import adjust_pvalues, gate, short_diff, tarone_k
from evalsuite.verdict.rubric import load_rubric, parse_rubric
from evalsuite.scoring.base import ScoreRecord
from verdict_synth import write_sets, write_suite

INFOS = [VariantInfo("base", baseline=True), VariantInfo("opt"), VariantInfo("rerun", noise=True)]


def rec(variant, case, metric, passed, scenario="kb_qa"):
    return ScoreRecord(variant=variant, case_id=case, sample=0, scenario=scenario, kind="k", metric=metric, value=1.0 if passed else 0.0, passed=passed, higher_is_better=True, details={})


def rubric(rules: list[dict], **top) -> object:
    return parse_rubric({"rules": rules, **top}, "t.yaml")


def flips_records(n: int, flips: int, metric="citations.recall", scenario="kb_qa", back: int = 0, noise_flips: int = 0):
    """The baseline passes all but the last `back` cases; the variant fails the first `flips` and
    passes the last `back`; the noise rerun fails the `noise_flips` cases after the first `flips`."""
    out = []
    for i in range(n):
        c = f"c{i:03d}"
        out.append(rec("base", c, metric, i < n - back, scenario))
        out.append(rec("opt", c, metric, i >= flips, scenario))
        out.append(rec("rerun", c, metric, not (flips <= i < flips + noise_flips) and i < n - back, scenario))
    return out


@pytest.mark.parametrize(
    "n, flips, rule, failed",
    [
        (100, 10, {"max_drop": 0.02, "require_significance": True}, True),  # p = 2^-10
        (100, 4, {"max_drop": 0.02, "require_significance": True}, False),  # p = 1/16: within chance
        (100, 4, {"max_drop": 0.02}, True),  # no significance asked
        (100, 1, {"max_flips": 0}, True),  # zero tolerance
        (100, 3, {"max_flips": 3}, False),
        (100, 10, {"max_drop": 0.15, "require_significance": True}, False),  # significant but small enough
        (20, 3, {"min": 0.9}, True),  # absolute floor: 0.85 < 0.9
    ],
)
def test_gate_table(n, flips, rule, failed):
    cmp = compare_records(flips_records(n, flips), INFOS[:2])
    v = gate(cmp, rubric([{"name": "r", "scenario": "kb_qa", "metric": "citations.recall", **rule}]).for_stage("production"))
    assert v.judgeable and v.passed is (not failed) and v.exit_code == (1 if failed else 0)
    res = v.result("opt", "r")
    assert res.status == ("fail" if failed else "pass")
    if failed:
        viol = v.violations[0]
        assert viol.rule == "r" and viol.variant == "opt" and viol.metric == "citations.recall" and viol.scenario == "kb_qa"
        assert viol.numbers["pass_to_fail"] == flips and viol.numbers["n"] == n
        assert viol.cases == tuple(f"c{i:03d}" for i in range(min(flips, 10)))


def test_above_noise_needs_more_flips_than_the_noise_run():
    r = rubric([{"name": "r", "scenario": "kb_qa", "metric": "citations.recall", "max_flips": 0, "above_noise": True}])
    same = gate(compare_records(flips_records(50, 3, noise_flips=3), INFOS), r.for_stage("production"))
    more = gate(compare_records(flips_records(50, 4, noise_flips=3), INFOS), r.for_stage("production"))
    assert same.passed and not more.passed
    assert more.violations[0].numbers["noise_flips"] == 3 and "above noise floor 3 flip(s)" in more.violations[0].reason


def test_warn_rules_never_fail_and_missing_metrics_skip_or_block():
    cmp = compare_records(flips_records(40, 10), INFOS[:2])
    r = rubric([
        {"name": "w", "scenario": "kb_qa", "metric": "citations.recall", "max_flips": 0, "severity": "warn"},
        {"name": "absent", "scenario": "kb_qa", "metric": "nope.metric", "min": 1, "required": False},  # issue 38: may match nothing only when it says so
        {"name": "other-scenario", "scenario": "code", "metric": "code.pass", "min": 1, "required": True},
    ])
    v = gate(cmp, r.for_stage("production"))
    assert v.passed and v.exit_code == 0 and len(v.warnings) == 1 and not v.violations
    assert v.result("opt", "absent").status == "cannot_judge" and v.result("opt", "other-scenario").status == "skip"
    assert v.skipped == ("absent", "other-scenario")
    req = rubric([{"name": "absent", "scenario": "kb_qa", "metric": "nope.metric", "min": 1, "required": True}])
    v2 = gate(cmp, req.for_stage("production"))
    assert not v2.judgeable and v2.exit_code == 2 and "nope.metric" in v2.problems[0]


@pytest.mark.parametrize(
    "p_min, alpha, k",
    [([1.0, 1.0, 1 / 256], 0.05, 1), ([1 / 256] * 4, 0.05, 4), ([0.25, 0.125, 1 / 64, 1 / 1024], 0.05, 2), ([], 0.05, 1)],
)
def test_tarone_k(p_min, alpha, k):
    assert tarone_k(p_min, alpha) == k


def test_adjusted_pvalues_methods():
    p, pm = [0.004, 0.03, 1.0], [1 / 256, 1 / 64, 1.0]
    assert adjust_pvalues(p, pm, "tarone", 0.05) == pytest.approx([0.008, 0.06, 1.0])
    assert adjust_pvalues(p, pm, "bonferroni", 0.05) == pytest.approx([0.012, 0.09, 1.0])
    assert adjust_pvalues(p, pm, "holm", 0.05) == pytest.approx([0.012, 0.06, 1.0])
    assert adjust_pvalues(p, pm, "none", 0.05) == p


@pytest.mark.parametrize(
    "before, after, expected",
    [
        ("It lasts 12 hours [ex-vpn].", "It lasts 12 hours.", "It lasts 12 [-hours [ex-vpn].-] {+hours.+}"),
        ("same", "same", "(identical text)"),
        ("a  b", "a b", "(whitespace differs only)"),
        (None, "x", "(output not stored)"),
    ],
)
def test_short_diff(before, after, expected):
    assert short_diff(before, after) == expected


def test_false_alarm_rate_of_an_unchanged_variant_stays_below_alpha(repo):
    """200 reruns of a variant equal in distribution to the baseline, with per-case pass noise on
    every statistical metric of the shipped production rubric: the gate may fail at most alpha."""
    r = load_rubric(repo / "rubrics" / "default.yaml")
    alpha = r.for_stage("production").alpha
    rng = np.random.default_rng(2024)
    layout = [("kb_qa", "citations.recall", 70), ("kb_qa", "citations.precision", 70), ("kb_qa", "grounding.false_abstention", 70),
              ("kb_qa", "grounding.abstained", 10), ("kb_qa", "grounding.refused", 20), ("code", "code.pass", 75),
              ("brand", "json.valid", 80), ("brand", "terminology.forbidden", 80), ("brand", "terminology.retention", 80)]
    # heterogeneous cases: most nearly always pass, some are coin flips, some nearly always fail
    probs = {(s, m): rng.choice([0.97, 0.7, 0.5, 0.15], size=n, p=[0.6, 0.2, 0.1, 0.1]) for s, m, n in layout}
    infos = INFOS[:2]
    reruns, alarms, rules_hit = 200, 0, {}
    for _ in range(reruns):
        records = []
        for (s, m), ps in probs.items():
            for variant in ("base", "opt"):
                draws = rng.random(len(ps)) < ps
                records += [rec(variant, f"{s}-{i}", m, bool(x), s) for i, x in enumerate(draws)]
        # the zero-tolerance leak metric is noise-free: a canary cannot appear by chance
        records += [rec(v, f"kb_qa-{i}", "grounding.leak", True) for v in ("base", "opt") for i in range(20)]
        v = gate(compare_records(records, infos, resampling=Resampling(n_resamples=50)), r.for_stage("production"))
        assert v.judgeable, v.problems
        if not v.passed:
            alarms += 1
            for name in v.failed_rules():
                rules_hit[name] = rules_hit.get(name, 0) + 1
    rate = alarms / reruns
    print(f"false-alarm rate {rate:.3f} over {reruns} reruns (alpha {alpha}); rules: {rules_hit}")
    assert rate <= alpha, (rate, rules_hit)


# --------------------------------------------------------------------------- CLI and stored runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    root = tmp_path_factory.mktemp("gate")
    outputs = write_sets(root, n_kb=30)
    suite = write_suite(root, outputs, [
        {"name": "rerun", "noise": True},
        {"name": "clean", "quantization": {"method": "bnb", "bits": 8}},
        {"name": "leaky", "quantization": {"method": "bnb", "bits": 4}, "degrade": {"kind": "leak_canary", "rate": 0.2, "seed": 3}},
    ])
    s = load_suite(suite)
    both = run_suite(s, RunOptions(progress=False)).store
    clean = run_suite(s, RunOptions(progress=False, variants=["clean", "rerun"])).store
    return {"root": root, "both": both, "clean": clean}


def _cli(store, tmp_path, rubric=None, stage="production"):
    """`evalsuite gate RUN --json FILE --rubric R --stage S` as a user types it: exit code, output, JSON."""
    from typer.testing import CliRunner

    from evalsuite.cli import app

    out = tmp_path / "verdict.json"
    out.unlink(missing_ok=True)
    args = ["gate", str(store.dir), "--runs-dir", str(store.dir.parent), "--stage", stage, "--json", str(out), "--verbose"] + (["--rubric", str(rubric)] if rubric else [])
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.output, (json.loads(out.read_text()) if out.exists() else None)


def test_cli_gate_exit_codes_and_json(runs, tmp_path, repo):
    rubric = repo / "rubrics" / "default.yaml"
    code, text, data = _cli(runs["clean"], tmp_path, rubric)
    assert code == 0 and "PASS" in text and data["passed"] and data["exit_code"] == 0
    code, text, data = _cli(runs["both"], tmp_path, rubric)
    assert code == 1 and "REGRESSION" in text and "kb-no-new-leaks" in text and "CANARY-" in text
    viol = [v for v in data["violations"] if v["rule"] == "kb-no-new-leaks"][0]
    assert viol["variant"] == "leaky" and viol["cases"] and viol["diffs"] and viol["numbers"]["pass_to_fail"] == len(viol["cases"])
    assert data["violations"] and all(v["variant"] == "leaky" for v in data["violations"])


def test_cli_gate_cannot_judge(runs, tmp_path, repo, write):
    bad = write("bad.yaml", "rules:\n  - {name: a, metric: json.valid, mni: 1}\n")
    code, text, data = _cli(runs["clean"], tmp_path, bad)
    assert code == 4 and "mni: unknown field" in text and data["exit_code"] == 4  # issue 38: your input is wrong exits 4
    code, text, _ = _cli(runs["clean"], tmp_path, repo / "rubrics" / "default.yaml", stage="staging")
    assert code == 4 and "unknown stage" in text  # issue 38: your input is wrong exits 4
    import shutil

    inc = tmp_path / "incomplete"
    shutil.copytree(runs["clean"].dir, inc)
    from evalsuite.run.store import RunStore

    RunStore(inc).mark_complete(False)
    code, text, data = _cli(RunStore(inc), tmp_path, repo / "rubrics" / "default.yaml")
    assert code == 2 and "incomplete" in text and not data["judgeable"]


def test_baseline_against_its_own_noise_run_passes(runs, repo):
    v = judge_run(runs["clean"], repo / "rubrics" / "default.yaml", "production", judge_noise=True).verdict
    assert "rerun" in v.variants and v.passed and v.exit_code == 0, [x.reason for x in v.violations]


def _code_pass(variant: str, case_id: str, value: float | None, passed: bool | None, details: dict) -> ScoreRecord:
    return ScoreRecord(
        variant=variant, case_id=case_id, sample=0, scenario="code", kind="completion", metric="code.pass",
        value=value, passed=passed, higher_is_better=True, details=details,
    )


def _code_records(errors: int, n: int = 20) -> list:
    """code.pass for every case on both sides; the variant's first `errors` runs were sandbox errors."""
    out = []
    for i in range(n):
        c = f"c{i:03d}"
        out.append(_code_pass("base", c, 1.0, True, {"status": "passed"}))
        if i < errors:
            out.append(_code_pass("opt", c, None, None, {"status": "error", "reason": "sandbox setup failed"}))
        else:
            out.append(_code_pass("opt", c, 1.0, True, {"status": "passed"}))
    return out


@pytest.mark.parametrize("errors, judgeable", [(0, True), (1, True), (3, False)])
def test_sandbox_errors_are_counted_never_regressions_and_beyond_the_limit_cannot_be_judged(errors, judgeable):
    """Issue 33: infrastructure is not the answer's fault."""
    r = rubric([{"name": "code", "metric": "code.pass", "max_flips": 0}, {"name": "sandbox", "max_sandbox_error_rate": 0.1}])
    cmp = compare_records(_code_records(errors), INFOS[:2])
    (perf,) = [p for p in cmp.perf if p.variant == "opt"]
    assert (perf.sandbox_runs, perf.sandbox_errors) == (20, errors)
    v = gate(cmp, r.for_stage("production"))
    assert not any(res.status == "fail" for res in v.results)  # an error is never a regression
    assert v.judgeable == judgeable
    assert (v.passed, v.exit_code) == ((True, 0) if judgeable else (False, 2))
    assert any("sandbox errors 3/20" in p for p in v.problems) == (not judgeable)
    assert any(f"{errors} of 20 code runs were sandbox errors" in n for n in v.notes) == bool(errors)


def test_max_sandbox_error_rate_is_a_rate():
    with pytest.raises(Exception, match="max_sandbox_error_rate: must be at most 1"):
        rubric([{"name": "sandbox", "max_sandbox_error_rate": 2}])


# --------------------------------------------------------------------------- issue 38: no silent rules


def test_a_rule_that_matches_no_score_is_a_rubric_mistake_not_a_pass(write):
    from evalsuite.verdict.gate import unmatched_rules

    cmp = compare_records(flips_records(40, 0), INFOS[:2])
    path = write("r.yaml", "rules:\n  - name: typo\n    scenario: kb_qa\n    metric: citations.recal\n    min: 0.5\n")
    sr = load_rubric(path).for_stage("production")
    (msg,) = unmatched_rules(cmp, sr)
    assert msg.startswith(f"{path}:4: rule typo: metric citations.recal matches no score") and "did you mean 'citations.recall'" in msg
    v = gate(cmp, sr)  # called directly, the gate never passes it either
    assert not v.judgeable and v.result("opt", "typo").status == "missing" and "citations.recal" in v.problems[0]
    optional = load_rubric(write("o.yaml", "rules:\n  - {name: typo, scenario: kb_qa, metric: citations.recal, min: 0.5, required: false}\n"))
    assert unmatched_rules(cmp, optional.for_stage("production")) == []
    v2 = gate(cmp, optional.for_stage("production"))
    assert v2.passed and v2.judgeable and v2.skipped == ("typo",) and v2.result("opt", "typo").note.startswith("not checked: ")
    assert v2.result("opt", "typo").status == "cannot_judge" and v2.result("opt", "typo").optional  # cannot judge, and the verdict does not wait on it


def test_gate_cli_refuses_a_rubric_rule_that_matches_nothing_and_shows_optional_ones(runs, tmp_path, write):
    typo = write("typo.yaml", "rules:\n  - name: recall\n    scenario: kb_qa\n    metric: citations.recal\n    max_drop: 0.1\n")
    code, text, data = _cli(runs["clean"], tmp_path, typo)
    flat = " ".join(text.split())
    assert code == 4 and f"{typo}:4: rule recall: metric citations.recal matches no score" in flat and "did you mean 'citations.recall'" in flat
    assert data["exit_code"] == 4 and not data["passed"]
    optional = write("opt.yaml", "rules:\n  - {name: recall, scenario: kb_qa, metric: citations.recal, max_drop: 0.1, required: false}\n")
    from typer.testing import CliRunner

    from evalsuite.cli import app

    res = CliRunner().invoke(app, ["gate", str(runs["clean"].dir), "--rubric", str(optional), "--ledger", str(tmp_path / "l.sqlite")])
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 rule(s) skipped" in flat and "cannot judge (required: false): recall: " in flat and "rule recall: metric citations.recal matches no score" in flat, res.output
