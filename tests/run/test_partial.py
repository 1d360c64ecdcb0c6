"""Issue 38, point 4: only a full run clears a variant. A run made with --limit, --scenarios or
--variants is recorded as partial; the gate judges it and says so, the ledger records no clearance
from it unless `gate --record`, `promote` refuses it naming the full run's command; `last` in
`run --resume last` is the newest run of the suite named."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.run.partial import partial_reasons
from evalsuite.run.store import RunStore

runner = CliRunner()


def _suite(repo, tmp_path, name="fake"):
    text = (repo / "suites" / "fake.yaml").read_text().replace("../casesets", str(repo / "casesets"))
    text = text.replace("output_dir: ../reports", f"output_dir: {tmp_path}\ncache: {tmp_path}/cache.sqlite").replace("name: fake", f"name: {name}")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _cli(*args, code=0):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == code, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize(
    "options, reason",
    [(["--limit", "2"], "--limit 2"), (["--scenarios", "kb_qa"], "--scenarios kb_qa"), (["--variants", "baseline"], "--variants (without fake-int8)")],
)
def test_a_narrowed_run_is_partial_judged_but_clears_nothing(repo, tmp_path, monkeypatch, options, reason):
    monkeypatch.chdir(tmp_path)
    suite = _suite(repo, tmp_path)
    _cli("run", suite, "-q", *options)
    store = RunStore.find(tmp_path / "runs", "last")
    assert partial_reasons(store.signature, store.suite) == (reason,)
    ledger = tmp_path / "l.sqlite"
    out = _cli("gate", "last", "--runs-dir", tmp_path / "runs", "--ledger", ledger, "--json", tmp_path / "v.json")
    assert f"note: partial run ({reason}): judged, but it clears no variant; a full run: evalsuite run {suite.resolve()}" in out
    assert "ledger: nothing recorded: a partial run" in out
    assert any("partial run" in n for n in json.loads((tmp_path / "v.json").read_text())["notes"])
    rel = _cli("releases", "--runs-dir", tmp_path / "runs", "--ledger", ledger)
    assert "cleared" not in rel or "fake-int8" not in rel


def test_gate_record_and_promote_on_a_partial_run(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = _suite(repo, tmp_path)
    _cli("run", suite, "-q", "--limit", "2")
    runs, ledger = tmp_path / "runs", tmp_path / "l.sqlite"
    out = _cli("promote", "fake-int8", "--to", "dev", "--runs-dir", runs, "--ledger", ledger, code=1)
    assert "refused: run" in out and "is partial (--limit 2): promote from a full run: evalsuite run" in out and "(nothing recorded)" in out
    out = _cli("gate", "last", "--runs-dir", runs, "--ledger", ledger, "--stage", "dev", "--record")
    assert "ledger: dev decision(s) recorded" in out and "fake-int8 pass" in out
    _cli("run", suite, "-q")  # the full run: recorded without asking, and promote takes it
    out = _cli("gate", "last", "--runs-dir", runs, "--ledger", ledger, "--stage", "dev")
    assert "partial run" not in out and "ledger: dev decision(s) recorded" in out
    assert "promoted fake-int8" in _cli("promote", "fake-int8", "--to", "dev", "--runs-dir", runs, "--ledger", ledger)


def test_resume_last_is_the_newest_run_of_the_suite_named(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake, other = _suite(repo, tmp_path), _suite(repo, tmp_path, "other")
    _cli("run", fake, "-q", "--variants", "baseline")
    first = RunStore.find(tmp_path / "runs", "last")
    _cli("run", other, "-q", "--limit", "1")  # another suite's run is now the newest of all
    out = _cli("run", fake, "-q", "--resume", "last")
    assert f"run directory: {first.dir}" in out
    assert partial_reasons(RunStore(first.dir).signature, RunStore(first.dir).suite) == ()  # it has every variant now: full
