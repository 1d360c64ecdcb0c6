"""Three CLI defects found while trying it (issue 28, point 8): each a one-line error that names the
right thing, with the exit code of a bad option value."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.errors import ValidationError

runner = CliRunner()


def _fake_suite(repo, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        (repo / "suites" / "fake.yaml").read_text().replace("../casesets", str(repo / "casesets")).replace("output_dir: ../reports", f"output_dir: {tmp_path}\ncache: {tmp_path}/cache.sqlite")
    )
    return suite


def test_summary_of_an_unknown_variant_is_a_one_line_error_with_close_matches(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = _fake_suite(repo, tmp_path)
    assert runner.invoke(app, ["run", str(suite), "-q", "--limit", "1"]).exit_code == 0
    run_dir = next((tmp_path / "runs").iterdir())
    res = runner.invoke(app, ["summary", str(run_dir), "--variant", "fake-int9"])
    assert res.exit_code == 4, res.output  # issue 38: your input is wrong exits 4
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert "unknown variant 'fake-int9'" in lines[0] and "Did you mean 'fake-int8'" in lines[0], lines[0]
    assert "pass rates" not in res.output  # no empty table
    ok = runner.invoke(app, ["summary", str(run_dir), "--variant", "fake-int8", "--markdown"])
    assert ok.exit_code == 0 and "| kb_qa |" in ok.output, ok.output


def test_a_variant_with_an_unknown_backend_is_reported_as_a_variant(write):
    from evalsuite.cases.suite import load_suite

    path = write("s.yaml", "casesets: [sets]\nvariants:\n  - {name: base, baseline: true, backend: fake}\n  - {name: b, backend: fakee}\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 4, res.output  # issue 38: your input is wrong exits 4
    assert "variant b: backend: unknown backend 'fakee' (did you mean fake?)" in res.output, res.output
    assert "case b:" not in res.output
    with pytest.raises(ValidationError) as info:
        load_suite(path)
    (p,) = [p for p in info.value.problems if p.field == "backend"]
    assert (p.case_id, p.subject, p.line) == ("b", "variant", 4)


def test_a_negative_limit_is_a_bad_option_value(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["run", str(_fake_suite(repo, tmp_path)), "-q", "--limit", "-1"])
    assert res.exit_code == 4, res.output  # issue 38: your input is wrong exits 4
    assert "Invalid value for '--limit'" in res.output and "greater than or equal to 0" in res.output, res.output
    assert "no cases selected" not in res.output
    assert not (tmp_path / "runs").exists()  # nothing was started
