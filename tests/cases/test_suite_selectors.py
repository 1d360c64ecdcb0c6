"""Issue 41: `Suite.load_cases` is the one reader of a suite's case-set selectors. Asked for its
problems, it reports what `evalsuite validate` reports (a path that does not exist, a selector that
selects nothing, with close matches) at the suite file's line, and keeps the other selectors' cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite.cases.suite import load_suite
from evalsuite.errors import Problem, ValidationError

REPO = Path(__file__).resolve().parents[2]


def _suite(tmp_path: Path, selectors: str) -> Path:
    text = (REPO / "suites" / "fake.yaml").read_text().replace("../reports", str(tmp_path))
    head, _, rest = text.partition("casesets:\n  - path: ../casesets\n    tags: [example]\n")
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "suite.yaml"
    path.write_text(head + "casesets:\n" + selectors.replace("CASESETS", str(REPO / "casesets")) + rest)
    return path


def test_selector_problems_are_collected_at_the_suites_lines_and_the_other_selectors_still_load(tmp_path):
    path = _suite(
        tmp_path,
        "  - path: CASESETS\n    tags: [example]\n"  # lines 5-6: selects cases
        "  - path: CASESETS/no-such-dir\n"  # line 7: no such path
        "  - path: CASESETS\n    tags: [exampel]\n",  # lines 8-9: selects nothing
    )
    suite = load_suite(path)
    problems: list[Problem] = []
    cases = suite.load_cases(problems=problems)
    assert cases and [c.id for c in cases] == [c.id for c in load_suite(_suite(tmp_path / "one", "  - path: CASESETS\n    tags: [example]\n")).load_cases()]
    assert [(p.file, p.line, p.field) for p in problems] == [(str(path), 7, "path"), (str(path), 8, "casesets")]
    assert problems[0].message == f"no such case-set file or directory: {REPO / 'casesets' / 'no-such-dir'}"
    assert problems[1].message.startswith("selects no case of ") and "tag 'exampel' is on no case (did you mean 'example'?)" in problems[1].message


def test_without_a_problem_list_nothing_selected_is_no_error_and_a_bad_case_set_raises(tmp_path):
    suite = load_suite(_suite(tmp_path, "  - path: CASESETS\n    tags: [exampel]\n"))
    assert suite.load_cases() == []
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "set.yaml").write_text("schema_version: 1\ncases:\n  - {id: x}\n")
    suite = load_suite(_suite(tmp_path / "b", f"  - path: {bad}\n"))
    with pytest.raises(ValidationError):
        suite.load_cases()
    problems: list[Problem] = []
    assert suite.load_cases(problems=problems) == [] and problems and all(p.file.endswith("set.yaml") for p in problems)
