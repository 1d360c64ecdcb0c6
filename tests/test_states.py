"""One spelling per state (issue 28, point 2): statuses, review states and exit codes are defined once
in evalsuite/states.py, and the code and the JSON `gate --json` writes use those spellings.

Two vocabularies stay, each spelled one way: a rule result's status is a token (`cannot_judge`, as
in the `results` of `gate --json`), a verdict's status is a word for people and the release ledger
(`cannot judge`); `states.word()` derives the word from the token."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

import pytest

from evalsuite import states

ROOT = Path(__file__).resolve().parents[1]
#: every spelling a state had before the states module
SPELLINGS = {"cannot judge", "cannot_judge", "needs review"}  # (`needs_review` is a JSON key of a boolean, not a state)


def _state_literals(path: Path, root: Path = ROOT) -> list[str]:
    """String constants (not docstrings, not f-string text) that spell a state, with their line."""
    tree = ast.parse(path.read_text("utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)}
    joined = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    return [
        f"{path.relative_to(root)}:{n.lineno}: {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in SPELLINGS and id(n) not in docs and id(n) not in joined
    ]


def test_states_are_spelled_only_in_the_states_module():
    found = [hit for p in sorted((ROOT / "evalsuite").rglob("*.py")) if p.name != "states.py" for hit in _state_literals(p)]
    assert found == [], "\n".join(found)


def test_the_scan_sees_a_planted_spelling(tmp_path):
    p = tmp_path / "planted.py"
    p.write_text('"""cannot judge"""\nX = f"cannot judge: {1}"\nY = "cannot_judge"\nZ = {"needs review": 3}\n')
    assert _state_literals(p, tmp_path) == ["planted.py:3: 'cannot_judge'", "planted.py:4: 'needs review'"]


def test_the_verdict_word_is_the_rule_token_displayed():
    assert states.word(states.CANNOT_JUDGE) == states.CANNOT_JUDGE_WORD
    assert states.CANNOT_JUDGE in get_args(states.RuleStatus)
    assert states.CANNOT_JUDGE_WORD in states.VERDICT_STATUSES
    assert {states.word(s) for s in get_args(states.RuleStatus)} >= {states.PASS, states.CANNOT_JUDGE_WORD}


def test_exit_codes_are_one_enum():
    from evalsuite.cli import _app

    assert _app.ExitCode is states.ExitCode
    assert (states.ExitCode.OK, states.ExitCode.FAILED, states.ExitCode.CANNOT_JUDGE, states.ExitCode.NEEDS_REVIEW) == (0, 1, 2, 3)


@pytest.mark.parametrize("judgeable,passed,needs_review,status,code", [(False, False, False, "cannot judge", 2), (True, False, False, "regression", 1), (True, True, True, "needs review", 3), (True, True, False, "pass", 0)])
def test_verdict_status_and_exit_code_come_from_the_states(judgeable, passed, needs_review, status, code):
    from evalsuite.verdict.outcome import Verdict

    v = Verdict(passed=passed, judgeable=judgeable, stage="s", rubric="r", run_id="x", baseline="b", variants=("v",), results=(), needs_review=needs_review)
    assert v.status == status and v.status in states.VERDICT_STATUSES
    assert v.exit_code == code and states.ExitCode(v.exit_code) == code
    doc = json.loads(json.dumps(v.to_dict()))
    assert doc["status"] in states.VERDICT_STATUSES and doc["exit_code"] == code


def test_review_states_are_the_queues():
    from evalsuite.review import settle

    assert settle.STATES == states.REVIEW_STATES and settle.DECISIVE == states.DECISIVE
    assert set(states.REVIEW_VERDICTS) <= set(states.REVIEW_STATES)
