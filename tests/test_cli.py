"""The command line: every command listed, and the fake suite end to end."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalsuite.cli import app

runner = CliRunner()

COMMANDS = ["validate", "run", "score", "compare", "gate", "summary", "demo", "import", "export", "list", "releases", "promote", "rollback"]


def test_help_lists_every_command_with_one_line():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in COMMANDS:
        assert f"│ {cmd} " in result.output, cmd


def test_run_then_score_on_the_fake_suite(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        (repo / "suites" / "fake.yaml").read_text().replace("../casesets", str(repo / "casesets")).replace("output_dir: ../reports", f"output_dir: {tmp_path}\ncache: {tmp_path}/cache.sqlite")
    )
    result = runner.invoke(app, ["run", str(suite), "-q"])
    assert result.exit_code == 0, result.output
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1
    lines = (runs[0] / "generations.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 10
    assert (runs[0] / "cases.jsonl").is_file()  # the run keeps its own copy of the cases
    first = (runs[0] / "scores.parquet").read_bytes()
    (runs[0] / "scores.parquet").unlink()
    result = runner.invoke(app, ["score", str(runs[0])])
    assert result.exit_code == 0, result.output
    assert (runs[0] / "scores.parquet").read_bytes() == first
    assert json.loads((runs[0] / "status.json").read_text())["complete"] is True
    # the fake baseline always abstains: ungrounded passes, everything that needs an answer fails
    result = runner.invoke(app, ["summary", str(runs[0]), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| kb_qa | ungrounded | `grounding.abstained` | 1 | 1 | 100% |" in result.output
    assert "| code | completion | `code.pass` | 1 | 0 | 0% |" in result.output


def test_unknown_variant_is_a_clear_error(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", str(repo / "suites" / "fake.yaml"), "--variants", "fake-int9", "-q"])
    assert result.exit_code == 4  # issue 38: your input is wrong exits 4
    assert "unknown variant 'fake-int9'" in result.output and "fake-int8" in result.output


def test_logging_keeps_http_request_lines_out_unless_verbose():
    import logging

    from evalsuite.cli._app import setup_logging as _setup_logging

    _setup_logging(False)
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    _setup_logging(True)
    assert logging.getLogger("httpx").isEnabledFor(logging.INFO)
    _setup_logging(False)


def test_run_reads_the_case_sets_once(repo, tmp_path, monkeypatch):
    """`evalsuite run` checks the suite's selectors and runs the cases that check read: each case-set
    selector is loaded once (it was loaded twice, the larger part of a warm re-run's time)."""
    import evalsuite.cases.caseset as caseset
    import evalsuite.cases.suite as suite_mod

    calls: list[list] = []
    real = caseset.load_cases

    def counting(paths):
        calls.append(list(paths))
        return real(paths)

    monkeypatch.setattr(suite_mod, "load_cases", counting)
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        (repo / "suites" / "fake.yaml").read_text().replace("../casesets", str(repo / "casesets")).replace("output_dir: ../reports", f"output_dir: {tmp_path}\ncache: {tmp_path}/cache.sqlite")
    )
    result = runner.invoke(app, ["run", str(suite), "-q", "--limit", "2"])
    assert result.exit_code == 0, result.output
    selectors = len(suite_mod.load_suite(suite).casesets)
    assert len(calls) == selectors, calls
    lines = (next((tmp_path / "runs").iterdir()) / "generations.jsonl").read_text().splitlines()
    assert len(lines) == 2 * len({json.loads(x)["case_id"] for x in lines})  # the limit still applies: 2 variants
