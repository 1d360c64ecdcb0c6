"""`evalsuite gate` records its decisions and writes the CI summary; `releases`, `promote` and `rollback`
as a person types them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.releases import ReleaseLedger

runner = CliRunner()


def invoke(run, tmp_path, *args, env=None):
    return runner.invoke(app, [*args, "--ledger", str(tmp_path / "releases.sqlite"), "--runs-dir", str(run["runs_dir"])], env=env)


def test_gate_records_each_variants_decision_and_says_so(release_run, tmp_path):
    res = invoke(release_run, tmp_path, "gate", release_run["store"].run_id, "--stage", "pilot")
    assert res.exit_code == 1, res.output
    assert "ledger: pilot decision(s) recorded in" in res.output and "good-a pass, good-b pass, tweak pass, bad regression" in res.output
    with ReleaseLedger(tmp_path / "releases.sqlite") as led:
        rows = led.decisions()
    assert [(d.kind, d.stage, d.variant, d.status, d.failed_rules) for d in rows] == [
        ("gate", "pilot", "good-a", "pass", ()),
        ("gate", "pilot", "good-b", "pass", ()),
        ("gate", "pilot", "tweak", "pass", ()),
        ("gate", "pilot", "bad", "regression", ("kb-citation-recall",)),
    ]
    assert rows[0].fingerprint == release_run["store"].signature["variants"]["good-a"] and rows[0].run_id == release_run["store"].run_id


def test_gate_appends_the_report_to_the_ci_job_summary(release_run, tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", "utf-8")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    for _ in range(2):
        res = invoke(release_run, tmp_path, "gate", release_run["store"].run_id, "--stage", "dev", env=env)
        assert res.exit_code == 0, res.output
    text = summary.read_text("utf-8")
    assert text.startswith("earlier step\n## evalsuite: ✅ **PASS**") and text.count("## evalsuite:") == 2  # appended, never overwritten
    assert "### Releases" in text and "| `good-a` `" in text
    other = tmp_path / "summary.md"
    res = invoke(release_run, tmp_path, "gate", release_run["store"].run_id, "--stage", "dev", "--summary", str(other), env=env)
    assert res.exit_code == 0 and other.read_text("utf-8").count("## evalsuite:") == 1 and summary.read_text("utf-8") == text  # FILE wins over the variable


def test_gate_that_cannot_record_its_decision_exits_2(release_run, tmp_path):
    (tmp_path / "releases.sqlite").mkdir()  # a directory where the ledger should be
    res = invoke(release_run, tmp_path, "gate", release_run["store"].run_id, "--stage", "dev")
    assert res.exit_code == 2 and "error:" in res.output


def test_releases_promote_and_rollback_as_a_person_types_them(release_run, tmp_path):
    run = release_run["store"].run_id
    res = invoke(release_run, tmp_path, "promote", "good-a", "--to", "pilot", "--run", run)
    assert res.exit_code == 1 and "refused: good-a (" in res.output and "is not cleared for dev" in res.output and "(nothing recorded)" in res.output
    assert invoke(release_run, tmp_path, "gate", run, "--stage", "dev").exit_code == 0
    for variant in ("good-a", "good-b"):
        for stage in ("pilot", "production"):
            res = invoke(release_run, tmp_path, "promote", variant, "--to", stage, "--run", run)
            assert res.exit_code == 0 and f"promoted {variant} (" in res.output, res.output
    res = invoke(release_run, tmp_path, "promote", "bad", "--to", "pilot", "--run", run)
    assert res.exit_code == 1 and "does not pass the pilot gate" in res.output and "decision #" in res.output
    res = invoke(release_run, tmp_path, "releases", "--all", "--json", str(tmp_path / "releases.json"))
    assert res.exit_code == 0, res.output
    assert "production runs good-b" in res.output and "rollback target: good-a" in res.output and "not cleared" in res.output
    doc = json.loads((tmp_path / "releases.json").read_text("utf-8"))
    assert {(c["variant"], c["stage"]) for c in doc["clearances"] if c["cleared"]} >= {("good-a", "production"), ("good-b", "production"), ("bad", "dev")}
    res = invoke(release_run, tmp_path, "releases", "--stage", "pilot")
    assert "pilot runs good-b" in res.output and "production runs" not in res.output
    res = invoke(release_run, tmp_path, "rollback", "--json", str(tmp_path / "rollback.json"))
    assert res.exit_code == 0, res.output
    assert "rollback production: deploy good-a (" in res.output and "instead of good-b (" in res.output
    assert "identity unchanged: model " in res.output and f"model: {release_run['root'] / 'models' / 'a'}" in res.output.replace("\n", " ").replace("  ", " ")
    assert json.loads((tmp_path / "rollback.json").read_text("utf-8"))["deployment"]["action"] == "rollback"
    res = invoke(release_run, tmp_path, "rollback")
    # issue 38: good-b, rolled back from and still cleared, is the stage's rollback target now
    assert res.exit_code == 0 and "rollback production: deploy good-b" in res.output, res.output
