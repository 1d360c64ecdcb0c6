"""Test-writing cases: the model's tests in an interpreter of their own (`isolation="tests"`) against
the path before (`isolation="process"`: the tests in the verdict's interpreter, issue 33 item 2).

The jobs are what `code.tests_pass_reference` and `code.mutants_caught` run: each test-writing case
of the shipped code case sets, its reference and every mutant, against tests standing in for a
model's (the case's own `expect.tests`, with the scorer's `tests_prelude`). Both sides run the same
jobs through `sandbox.run_tests_many` (its worker pool; the in-process cache emptied before every
round), alternately (ABBA), and must agree on every job's status. Target: time per program within
x1.5 of the path before (the issue's bound for its other isolation change).
"""

from __future__ import annotations

import sys

from common import REPO, Row, judge, median, paired, ratio


def jobs() -> list[tuple[str, str, str]]:
    from evalsuite.cases.caseset import all_cases, load_cases
    from evalsuite.scoring.code import tests_prelude

    out = []
    for c in all_cases(load_cases([REPO / "casesets" / "code"])):
        ex = c.expect
        if c.kind != "tests" or not (ex.tests and ex.reference and ex.entry_point):
            continue
        for prog in (ex.reference, *ex.mutants):
            out.append((prog, tests_prelude(ex.tests) + ex.tests, ex.entry_point))
    return out


def run(quick: bool = False) -> list[Row]:
    from evalsuite import sandbox
    from evalsuite.scoring.code import LIMITS

    work = jobs()
    work = work[:16] if quick else work
    rounds = 2 if quick else 5
    statuses: dict = {}

    def side(isolation: str):
        def go():
            sandbox.clear_cache()
            statuses[isolation] = [r.status for r in sandbox.run_tests_many(work, isolation=isolation, **LIMITS)]

        return go

    print(f"test writing: {len(work)} programs, {rounds} rounds, {sandbox.pool.POOL_SIZE} workers", flush=True)
    tn, to, _, _ = paired(side("tests"), side("process"), rounds, "untrusted tests vs tests in the verdict's interpreter")
    ci = ratio(tn, to)
    same = sum(a == b for a, b in zip(statuses["tests"], statuses["process"]))
    passed = statuses["tests"].count("passed")
    return [
        Row(
            "test writing: the tests in their own interpreter",
            "time per program (issue 33 item 2)",
            f"tests isolated {1000 * median(tn) / len(work):.0f} ms, before {1000 * median(to) / len(work):.0f} ms",
            ci,
            "<= 1.5 (time)",
            judge(ci, 1.5),
        ),
        Row(
            "test writing: the tests in their own interpreter",
            "identical statuses",
            f"{same}/{len(work)} agree ({passed} pass)",
            None,
            f"{len(work)}/{len(work)}",
            "met" if same == len(work) else "NOT met",
        ),
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
