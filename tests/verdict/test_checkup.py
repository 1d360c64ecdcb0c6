"""Issue 38, point 2: `validate` is the promise that `run` and `gate` will start. Every shipped suite
and rubric validates; a planted mistake of each kind is reported with its file:line (no false OK)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _validate(*paths):
    res = runner.invoke(app, ["validate", *map(str, paths)])
    return res.exit_code, " ".join(res.output.split())


@pytest.mark.parametrize("path", sorted((REPO / "suites").glob("*.yaml")) + sorted((REPO / "rubrics").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_suite_and_rubric_validates(path):
    code, out = _validate(path)
    assert code == 0, out
    if path.parent.name == "suites":
        assert f"suite {path}: OK" in out and " cases selected by the suite's case sets: OK" in out  # with its counts
    else:
        assert f"rubric {path}: OK" in out and "problem" not in out  # recognised as a rubric, not a case set


def _plant(tmp_path, name, old, new, rubric=None):
    text = (REPO / "suites" / "fake.yaml").read_text().replace("../casesets", str(REPO / "casesets")).replace("../reports", str(tmp_path))
    assert old in text
    text = text.replace(old, new)
    if rubric:
        (tmp_path / "r.yaml").write_text(rubric)
        text += f"rubric: {tmp_path / 'r.yaml'}\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name, old, new, rubric, expected",
    [
        ("missing-path", "", "", None, "missing-path.yaml:5: path: no such case-set file or directory"),
        ("tag", "tags: [example]", "tags: [exampel]", None, "tag.yaml:5: casesets: selects no case of"),
        ("id", "tags: [example]", "ids: [kb-ex-grounded-0001]", None, "id 'kb-ex-grounded-0001' is no case (did you mean 'kb-ex-grounded-001'?)"),
        ("quant", "method: bnb", "method: bnbb", None, "quant.yaml:16: variant fake-int8: quantization.method: unknown quantization method 'bnbb' (did you mean bnb?)"),
        ("backend", "backend: fake", "backend: fakee", None, "variant baseline: backend: unknown backend 'fakee'"),
        ("rubric-field", "tags: [example]", "tags: [example]", "rules:\n  - {name: a, scenario: kb_qa, metric: citations.recall, min: 0.5, scorer: x}\n",
         "r.yaml:2: rubric: rule #0 (a): scorer: unknown field"),
        ("rubric-metric", "tags: [example]", "tags: [example]", "rules:\n  - name: a\n    scenario: kb_qa\n    metric: citations.recal\n    min: 0.5\n",
         "r.yaml:4: rubric: rule a: metric: no scorer of kb_qa produces 'citations.recal' (did you mean 'citations.recall'?)"),
    ],
)
def test_a_planted_mistake_of_each_kind_is_reported(tmp_path, name, old, new, rubric, expected):
    if name == "missing-path":  # a case-set path that does not exist
        path = tmp_path / f"{name}.yaml"
        path.write_text((REPO / "suites" / "fake.yaml").read_text().replace("../casesets", str(tmp_path / "no-such-casesets")))
    else:
        path = _plant(tmp_path, name, old, new, rubric)
    code, out = _validate(path)
    assert code == 4 and expected in out and "OK" not in out, out


def test_a_rubric_file_with_a_mistake_is_reported_as_a_rubric(tmp_path):
    bad = tmp_path / "rubric.yaml"
    bad.write_text((REPO / "rubrics" / "default.yaml").read_text().replace("max_drop: 0.02\n", "max_dorp: 0.02\n", 1))
    code, out = _validate(bad)
    assert code == 4 and "max_dorp: unknown field" in out and "'cases' is a required property" not in out, out


def test_run_refuses_what_validate_reports_at_the_suites_line(tmp_path):
    """`run` on a suite whose case-set path is missing, or whose tag selects nothing, names the suite's
    file:line as validate does (it used to fail without it, or with "no cases selected")."""
    missing = tmp_path / "missing.yaml"
    missing.write_text((REPO / "suites" / "fake.yaml").read_text().replace("../casesets", str(tmp_path / "no-such-casesets")))
    res = runner.invoke(app, ["run", str(missing), "-q"])
    assert res.exit_code == 4 and f"{missing}:5: path: no such case-set file or directory" in " ".join(res.output.split()), res.output
    tag = _plant(tmp_path, "tag", "tags: [example]", "tags: [exampel]")
    res = runner.invoke(app, ["run", str(tag), "-q"])
    flat = " ".join(res.output.split())
    assert res.exit_code == 4 and f"{tag}:5: casesets: selects no case" in flat and "did you mean 'example'" in flat, res.output
