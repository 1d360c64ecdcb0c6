"""`evalsuite report RUN [--rubric FILE --stage STAGE]`."""

from __future__ import annotations

from typer.testing import CliRunner

from evalsuite.cli import app

runner = CliRunner()


def test_report_command_writes_html_and_markdown(report_run, tmp_path):
    store, rubric = report_run
    res = runner.invoke(app, ["report", store.run_id, "--runs-dir", str(store.dir.parent), "--rubric", str(rubric), "--stage", "production", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    html, md = tmp_path / "r" / "report.html", tmp_path / "r" / "report.md"
    assert html.is_file() and md.is_file()
    out = " ".join(res.output.split())
    assert f"report: {html}" in out and "REGRESSION" in out and "FAIL kb-citations" in out


def test_report_command_errors_are_clear(report_run, tmp_path):
    store, _ = report_run
    res = runner.invoke(app, ["report", "no-such-run", "--runs-dir", str(store.dir.parent)])
    assert res.exit_code == 4 and "run 'no-such-run' not found" in res.output  # issue 38: your input is wrong exits 4
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: a, metric: json.valid, mni: 1}\n")
    res = runner.invoke(app, ["report", str(store.dir), "--rubric", str(bad), "--out", str(tmp_path / "x")])
    assert res.exit_code == 4 and "mni" in res.output and not (tmp_path / "x" / "report.html").exists()  # issue 38: your input is wrong exits 4
    res = runner.invoke(app, ["report", str(store.dir), "--stage", "staging", "--out", str(tmp_path / "y")])
    assert res.exit_code == 4 and "staging" in res.output  # issue 38: your input is wrong exits 4
