"""Issue 38, point 6: the newcomer's first screen. `evalsuite --help` groups commands by workflow,
help renders extras (`evalsuite[mlflow]`) and flags as flags, and the README opens with what
evalsuite answers and a five-command path."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from evalsuite.cli import WORKFLOW, app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def _help(*args: str) -> str:
    res = runner.invoke(app, [*args, "--help"])
    assert res.exit_code == 0, res.output
    return " ".join(re.sub("[│╭╮╰╯]", " ", res.output).split())  # the text, without the boxes' wrapping


def test_help_groups_commands_by_workflow_in_order():
    out = _help()
    panels = re.findall(r"─ (\d\. [a-z ]+?) ─", out)
    assert panels == list(WORKFLOW) and [p.split(". ")[1] for p in panels][:5] == ["cases", "run", "judge", "review", "releases"]
    assert out.index("─ 3. judge") < out.index(" gate ") < out.index("─ 4. review")


def test_help_keeps_extras_and_shows_flags_as_flags():
    gate = _help("gate")
    assert "pip install 'evalsuite[mlflow]'" in gate
    assert "<bool>" not in gate and "<bool>" not in _help() and "<bool>" not in _help("review", "list")
    annotate = _help("review", "annotate")
    assert "show --blind" not in annotate and "pairwise mode" in annotate


def test_readme_opens_with_what_it_answers_and_five_commands():
    text = (REPO / "README.md").read_text("utf-8")
    first = text[: text.index("From a clone")]
    assert "Did quality regress, where, and is it more than noise?" in first.split("```")[0]
    block = first.split("```bash")[1].split("```")[0]
    steps = [ln.split("#")[0].split()[:2] for ln in block.strip().splitlines()]
    assert [s[1] for s in steps] == ["install", "init", "run", "gate", "review"]
    assert "make " not in first.split("```bash")[0]  # no make targets before the sentence that says what it is
