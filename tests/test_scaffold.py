"""`evalsuite init` (evalsuite.run.scaffold): one variant per kind, a suite that validates, offline-aware
model checks, close matches for unknown kinds, and the CLI wrapper."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hubcache import add_snapshot, fake_commit  # noqa: E402

from evalsuite.cases.suite import load_suite  # noqa: E402
from evalsuite.errors import EvalsuiteError, UnknownNameError  # noqa: E402
from evalsuite.run.scaffold import InitRequest, scaffold, variant_for  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ALL = (
    "gptq",
    "awq",
    "bnb-int8",
    "bnb-nf4",
    "compressed-tensors:Org/M-W8A8@v2",
    "llm-compressor:W4A16",
    "llm-compressor",
    "torchao-int8",
    "torchao:int8_dynamic",
    "hqq:3",
    "speculative:prompt-lookup",
    "speculative:draft:Org/Small",
    "served:http://127.0.0.1:8000/v1",
    "gptq:Org/M-GPTQ",
    "awq:Org/M-AWQ",
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "casesets").symlink_to(REPO / "casesets")
    (tmp_path / "rubrics").symlink_to(REPO / "rubrics")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _model(root: Path) -> Path:
    d = root / "src"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama", "hidden_size": 576}')
    (d / "model.safetensors").write_bytes(b"w")
    return d


def test_every_kind_is_one_variable_and_the_suite_validates(project):
    add_snapshot(project / "hub", "Org/M", _model(project), fake_commit("m"))
    res = scaffold(InitRequest(model="Org/M", revision="main", variants=ALL))
    out = project / "suites" / "mine.yaml"
    out.parent.mkdir(exist_ok=True)
    out.write_text(res.text)
    suite = load_suite(out)
    assert not suite.warnings, suite.warnings
    names = [v.name for v in suite.variants]
    assert names[:2] == ["baseline", "baseline-rerun"] and len(names) == 2 + len(ALL)
    for v in suite.variants[2:]:
        assert len(v.changes) == 1, (v.name, v.changes)
    by = {v.name: v for v in suite.variants}
    assert by["baseline"].model == "Org/M" and by["baseline"].revision == "main"
    assert by["gptq-4bit"].quantization["group_size"] == 64, "the group size divides the model's hidden size (576)"
    assert by["compressed-tensors-m-w8a8"].quantization == {"method": "compressed-tensors", "checkpoint": "Org/M-W8A8", "revision": "v2"}
    assert by["served"].backend == "http" and by["served"].options["base_url"] == "http://127.0.0.1:8000/v1"
    assert by["gptq-4bit"].quantization["calibration"] == str(project / "casesets")
    assert "# the baseline again, in batches of 4" in res.text and "stage: pilot" in res.text
    assert res.next_commands == ["evalsuite run suites/mine.yaml", "evalsuite gate last"]
    raw = yaml.safe_load(res.text)
    assert raw["rubric"] == "../rubrics/default.yaml" and raw["casesets"] == ["../casesets"] and raw["output_dir"] == "../reports"


def test_models_are_checked_offline_with_the_fetch_command(project):
    add_snapshot(project / "hub", "Org/M", _model(project), fake_commit("m"))
    res = scaffold(InitRequest(model="Org/M", variants=("compressed-tensors:Org/Absent", "speculative:prompt-lookup")))
    by = {(r["variant"], r["field"]): r for r in res.resolutions}
    assert by[("baseline", "model")]["ok"] and by[("baseline", "model")]["where"] == "cache"
    miss = by[("compressed-tensors-absent", "quantization.checkpoint")]
    assert not miss["ok"] and "hf download Org/Absent" in miss["message"]
    assert any("Org/Absent" in w and "hf download" in w for w in res.warnings)


def test_unknown_kinds_get_close_matches():
    with pytest.raises(UnknownNameError, match=r"'llm-compresor'.*Did you mean 'llm-compressor'"):
        variant_for("llm-compresor:W8A8", {"casesets": "../casesets"})
    with pytest.raises(EvalsuiteError, match="names the checkpoint"):
        variant_for("compressed-tensors", {"casesets": "x"})
    with pytest.raises(EvalsuiteError, match="did you mean prompt-lookup"):
        variant_for("speculative:prompt-lokup", {"casesets": "x"})
    with pytest.raises(EvalsuiteError, match="API root"):
        variant_for("served:localhost:8000", {"casesets": "x"})


def test_cli_writes_prints_next_commands_and_keeps_an_existing_file(project):
    from typer.testing import CliRunner

    from evalsuite.cli import app

    add_snapshot(project / "hub", "Org/M", _model(project), fake_commit("m"))
    runner = CliRunner()
    res = runner.invoke(app, ["init", "--model", "Org/M", "--variants", "bnb-nf4,torchao-int8", "--out", "suites/x.yaml"])
    assert res.exit_code == 0, res.output
    assert "evalsuite run suites/x.yaml" in res.output and "evalsuite gate last" in res.output and "ok baseline" in res.output
    again = runner.invoke(app, ["init", "--model", "Org/M", "--out", "suites/x.yaml"])
    assert again.exit_code == 4 and "--force" in again.output  # issue 38: your input is wrong exits 4
    bad = runner.invoke(app, ["init", "--model", "Org/M", "--variants", "bnb-nf5", "--out", "suites/y.yaml", "--force"])
    assert bad.exit_code == 4 and "bnb-nf4" in bad.output  # issue 38: your input is wrong exits 4


def test_the_formats_suite_validates_one_variable_each():
    suite = load_suite(REPO / "suites" / "formats.yaml")
    assert not suite.warnings
    assert all(len(v.changes) == 1 for v in suite.variants if not v.baseline and not v.noise)
