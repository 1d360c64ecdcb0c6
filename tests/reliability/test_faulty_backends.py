"""Faulty backends: raises, out of memory, hangs past the timeout, garbage. The run finishes, each
fault is recorded against its case, nothing bad is cached or scored as an output, and the gate
reports the error rate and fails when it exceeds the rubric."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from evalsuite.verdict.compare import compare_run
from evalsuite.verdict.gate import gate
from evalsuite.verdict.rubric import load_rubric
from evalsuite.run.runner import RunOptions
from evalsuite.scoring.pipeline import run_suite
from evalsuite.run.store import GenerationCache
from evalsuite.cases.suite import load_suite

from .helpers import cli, cli_env, one_per_key, write_suite

#: case -> (fault kind, what its recorded error says, recorded as a timeout)
FAULTS = {
    "q000": ("raise", "RuntimeError: injected fault for q000", False),
    "q001": ("oom", "MemoryError: injected out of memory", False),
    "q002": ("none_text", "backend returned garbage: text of type NoneType, not str", False),
    "q003": ("hang", "did not return within", True),
    "q004": ("wrong_count", "returned 0 generations for 1 requests", False),
    "q005": ("cuda_oom", "SimulatedCudaOOM: CUDA out of memory", False),
    "q006": ("non_str", "backend returned garbage: text of type int, not str", False),
    "q007": ("not_generation", "backend returned garbage: a dict, not a Generation", False),
    "q008": ("other_case", "backend returned garbage: the answer of case 'q008-other'", False),
}
N_CASES = 12  # q009..q011 are clean; batches of two pair q008 with q009 and the hang with a garbage answer


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """One run: a clean baseline and a variant whose backend commits every kind of fault."""
    root = tmp_path_factory.mktemp("faulty")
    faulty = {"name": "faulty", "options": {"default": "It lasts 12 hours [d1] ({case_id}, sample {sample}).",
                                            "faults": {cid: kind for cid, (kind, _, _) in FAULTS.items()}}}
    suite = write_suite(root, n_cases=N_CASES, batch_size=2, variants=[faulty], generation={"timeout_s": 0.2})
    res = run_suite(load_suite(suite), RunOptions(progress=False))
    return root, suite, res


def test_run_finishes_with_one_record_per_case(faulty_run):
    _, _, res = faulty_run
    assert res.store.read_json("status.json")["complete"] is True
    keys = one_per_key(res.run_dir)
    assert len(keys) == 2 * N_CASES and set(keys.values()) == {1}


@pytest.mark.parametrize("case_id", sorted(FAULTS))
def test_each_fault_is_recorded_against_its_case(faulty_run, case_id):
    _, _, res = faulty_run
    kind, message, timeout = FAULTS[case_id]
    g = {(x.variant, x.case_id): x for x in res.store.generations()}[("faulty", case_id)]
    assert not g.ok and message in g.error, (kind, g.error)
    assert g.timeout is timeout and g.finish_reason == ("timeout" if timeout else "error")
    assert g.text == "" and g.fingerprint  # stamped like any generation, so resume and compare see it


def test_clean_cases_next_to_faults_are_unharmed(faulty_run):
    _, _, res = faulty_run
    gens = {(g.variant, g.case_id): g for g in res.store.generations()}
    for i in range(N_CASES):
        cid = f"q{i:03d}"
        assert gens[("base", cid)].ok
        if cid not in FAULTS:
            assert gens[("faulty", cid)].ok and gens[("faulty", cid)].text == f"It lasts 12 hours [d1] ({cid}, sample 0)."


def test_nothing_faulty_is_cached_and_a_resume_retries_only_the_faults(faulty_run):
    root, suite, res = faulty_run
    cache = GenerationCache(root / "out" / "cache.sqlite")
    try:
        assert cache.count() == sum(1 for g in res.store.generations() if g.ok) == 2 * N_CASES - len(FAULTS)
    finally:
        cache.close()
    again = run_suite(load_suite(suite), RunOptions(progress=False, score=False, resume=str(res.run_dir)))
    assert again.skipped == 2 * N_CASES - len(FAULTS) and again.generated == len(FAULTS) and again.errors == len(FAULTS)
    keys = one_per_key(res.run_dir)  # errors are appended again on a retry; the view keeps one per key
    assert {k: n for k, n in keys.items() if n > 1} == {("faulty", cid, 0): 2 for cid in FAULTS}
    assert len(res.store.generations()) == 2 * N_CASES


def test_variant_summary_counts_errors_and_timeouts(faulty_run):
    _, _, res = faulty_run
    summary = res.store.read_json("variants.json")
    assert summary["faulty"]["generations"] == N_CASES
    assert summary["faulty"]["errors"] == len(FAULTS) - 1 and summary["faulty"]["timeouts"] == 1
    assert summary["base"]["errors"] == 0 and summary["base"]["timeouts"] == 0


def test_faulty_outputs_score_as_failures_not_scorer_errors(faulty_run):
    _, _, res = faulty_run
    scores = [r for r in res.store.scores() if r.variant == "faulty"]
    assert not [r for r in scores if r.metric.endswith(".scorer_error")]
    recall = {r.case_id: r.passed for r in scores if r.metric == "citations.recall" and r.sample == 0}
    assert all(recall[cid] is False for cid in FAULTS) and recall["q010"] is True


def _rubric(path: Path, max_error_rate: float, max_timeout_rate: float) -> Path:
    path.write_text(yaml.safe_dump({"schema_version": 1, "name": "reliability", "rules": [
        {"name": "reliability", "max_error_rate": max_error_rate, "max_timeout_rate": max_timeout_rate}]}), "utf-8")
    return path


@pytest.mark.parametrize(
    "max_error_rate,max_timeout_rate,passed,reasons",
    [
        (0.7, 0.1, True, []),
        (0.7, 0.05, False, ["timeout rate 0.083 (1/12) > max_timeout_rate 0.05"]),
        (0.1, 0.5, False, ["error rate 0.667 (8/12) > max_error_rate 0.1"]),
    ],
)
def test_gate_reports_error_rate_and_fails_past_the_rubric(faulty_run, tmp_path, max_error_rate, max_timeout_rate, passed, reasons):
    _, _, res = faulty_run
    verdict = gate(compare_run(res.store), load_rubric(_rubric(tmp_path / "rubric.yaml", max_error_rate, max_timeout_rate)).for_stage("production"))
    assert verdict.judgeable and verdict.passed is passed
    assert [v.reason for v in verdict.violations if v.variant == "faulty"] == reasons
    perf = compare_run(res.store).perf_for("faulty")
    assert (perf.errors, perf.timeouts, perf.generations) == (8, 1, 12)


def test_gate_command_exits_1_and_prints_the_error_rate(faulty_run, tmp_path):
    root, _, res = faulty_run
    rubric = _rubric(tmp_path / "rubric.yaml", 0.1, 0.5)
    out = tmp_path / "verdict.json"
    proc = subprocess.run(cli("gate", str(res.run_dir), "--rubric", str(rubric), "--stage", "production", "--json", str(out)),
                          cwd=root, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error rate 0.667 (8/12) > max_error_rate 0.1" in " ".join(proc.stdout.split())
    assert "error rate 0.667 (8/12)" in out.read_text("utf-8")
