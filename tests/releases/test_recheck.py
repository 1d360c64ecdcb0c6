"""Issue 42, item 3: a clearance remembers the environment it was made in; `evalsuite releases` marks it
stale when that changes, and `evalsuite recheck` judges it again: kept (renewed), or revoked (exit 1,
the rollback target named). The fake backend stands in for the engine: `EVALSUITE_FAKE_ENVIRONMENT`
changes the library version it reports, `EVALSUITE_FAKE_OUTPUTS` what the "upgraded" engine answers."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.judge import judge_run
from evalsuite.releases import ReleaseLedger, decision_for
from evalsuite.report.markdown import release_lines
from evalsuite.report.releases import ledger_status, release_history
from evalsuite.run.store import RunStore

from .conftest import BAD_CASE, make_suite, run_suite_at
from .test_promotion import gate, to_production

runner = CliRunner()
ENV_VAR, OUTPUTS_VAR = "EVALSUITE_FAKE_ENVIRONMENT", "EVALSUITE_FAKE_OUTPUTS"
CLEARED = json.dumps({"libraries": {"transformers": "5.24.0"}})
UPGRADED = json.dumps({"libraries": {"transformers": "5.25.0"}})
CHANGE = "transformers 5.24.0 → 5.25.0"


@pytest.fixture(scope="module")
def env_run(tmp_path_factory):
    """The release tests' run, made while the fake reported transformers 5.24.0 (its own folder: reruns land beside it)."""
    root = tmp_path_factory.mktemp("recheck")
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = CLEARED
    try:
        store = run_suite_at(make_suite(root))
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old
    return {"root": root, "store": store, "runs_dir": store.dir.parent}


@pytest.fixture(autouse=True)
def cleared_environment(monkeypatch):
    """Each test starts in the environment the run was made in, with the scripted outputs."""
    monkeypatch.setenv(ENV_VAR, CLEARED)
    monkeypatch.delenv(OUTPUTS_VAR, raising=False)


def cli(run, paths, *args):
    return runner.invoke(app, [*args, "--ledger", str(paths["ledger"]), "--queue", str(paths["queue"]), "--runs-dir", str(run["runs_dir"])])


def runs(run) -> set[str]:
    return {p.name for p in run["runs_dir"].iterdir() if p.is_dir()}


def clearance(paths, variant, stage):
    status = ledger_status(paths["ledger"], paths["queue"], environments=True)
    return next(c for c in status.clearances if c.variant == variant and c.stage == stage)


def test_the_run_records_each_variants_environment(env_run):
    envs = env_run["store"].signature["environments"]
    assert set(envs) == {"baseline", "good-a", "good-b", "tweak", "bad"}
    assert all(e["libraries"]["transformers"] == "5.24.0" and e["python"] and e["device"] for e in envs.values())


def test_an_upgrade_makes_a_clearance_stale_and_a_recheck_that_passes_renews_it(env_run, paths, tmp_path, monkeypatch):
    gate(env_run, "dev", paths)
    to_production(env_run, "good-a", paths)
    cleared = clearance(paths, "good-a", "production")
    assert cleared.cleared and cleared.environment.state == "fresh" and cleared.decision.environment["libraries"]["transformers"] == "5.24.0"

    monkeypatch.setenv(ENV_VAR, UPGRADED)
    res = cli(env_run, paths, "releases", "--stage", "production", "--json", str(tmp_path / "releases.json"))
    assert res.exit_code == 0, res.output
    assert f"1 cleared variant(s) stale, their environment changed since: good-a (production: {CHANGE})" in res.output
    assert "`evalsuite recheck --stage production` judges them again" in res.output
    (doc,) = [c for c in json.loads((tmp_path / "releases.json").read_text())["clearances"] if c["variant"] == "good-a" and c["stage"] == "production"]
    assert doc["cleared"] and doc["environment"]["state"] == "stale" and doc["environment"]["changes"] == [CHANGE]

    before = runs(env_run)
    res = cli(env_run, paths, "recheck", "--stage", "production", "--dry-run")
    assert res.exit_code == 0 and "1 stale clearance(s)" in res.output, res.output
    assert f"would rerun run {env_run['store'].run_id}: good-a with baseline baseline again on its 10 case(s) (good-a for production: {CHANGE})" in res.output
    assert runs(env_run) == before  # a dry run runs nothing

    res = cli(env_run, paths, "recheck", "--stage", "production", "-q", "--json", str(tmp_path / "recheck.json"))
    assert res.exit_code == 0, res.output
    assert f"kept good-a ({cleared.fingerprint[:12]}) for production: pass on run" in res.output and "clearance renewed with the new environment" in res.output
    assert "same outputs; 0 case(s) from pass to fail against the cleared run" in res.output
    (new_run,) = runs(env_run) - before
    rerun = RunStore(env_run["runs_dir"] / new_run)
    assert rerun.signature["recheck"] == {"of_run": env_run["store"].run_id, "variants": ["good-a"]}
    assert rerun.signature["environments"]["good-a"]["libraries"]["transformers"] == "5.25.0"
    gens = rerun.generations()
    assert {g.variant for g in gens} == {"baseline", "good-a"} and len(gens) == 20 and not any(g.cached for g in gens)  # generated afresh

    with ReleaseLedger(paths["ledger"]) as led:
        last = led.decisions()[-1]
    assert (last.kind, last.stage, last.variant, last.status, last.run_id) == ("recheck", "production", "good-a", "pass", new_run)
    assert last.fingerprint == cleared.fingerprint and last.environment["libraries"]["transformers"] == "5.25.0"
    assert last.recheck["of"] == cleared.decision.id and last.recheck["changes"] == [CHANGE] and last.recheck["against_cleared"]["good-a"]["changed"] == 0
    assert json.loads((tmp_path / "recheck.json").read_text())["outcomes"][0]["outcome"] == "kept"

    renewed = clearance(paths, "good-a", "production")
    assert renewed.cleared and renewed.environment.state == "fresh" and not renewed.stale
    assert clearance(paths, "good-a", "pilot").stale  # only production was rechecked
    res = cli(env_run, paths, "recheck", "--stage", "production")
    assert res.exit_code == 0 and "nothing stale for production" in res.output, res.output


def test_a_recheck_that_finds_regressions_revokes_the_clearance_and_names_the_rollback(env_run, paths, monkeypatch):
    gate(env_run, "dev", paths)
    for v in ("good-a", "good-b"):
        to_production(env_run, v, paths)  # production runs good-b; its rollback target is good-a
    monkeypatch.setenv(ENV_VAR, UPGRADED)
    monkeypatch.setenv(OUTPUTS_VAR, json.dumps({"good-b": {BAD_CASE: "Service 4 restarts every 6 hours."}}))  # the upgrade drops a citation
    res = cli(env_run, paths, "recheck", "--stage", "production", "-q")
    assert res.exit_code == 1, res.output
    fp_b = clearance(paths, "good-b", "production").fingerprint
    assert f"revoked good-b ({fp_b[:12]}) for production: regression (kb-citation-recall)" in res.output and "clearance revoked" in res.output
    assert "1 of 10 outputs changed; 1 case(s) from pass to fail against the cleared run (" in res.output
    assert f"kb_qa/citations.recall: {BAD_CASE}" in res.output
    assert "its baseline baseline against the cleared run: same outputs; 0 case(s) from pass to fail" in res.output
    assert "kept good-a (" in res.output
    assert f"production runs good-b ({fp_b[:12]}), no longer cleared: `evalsuite rollback --stage production` deploys good-a (" in res.output

    lost = clearance(paths, "good-b", "production")
    assert not lost.cleared and "was regression: kb-citation-recall" in lost.reason and lost.decision.kind == "recheck"
    assert lost.decision.recheck["against_cleared"]["good-b"]["pass_to_fail"]["kb_qa/citations.recall"] == [BAD_CASE]
    assert lost.decision.recheck["against_cleared"]["baseline"]["pass_to_fail"] == {}
    res = cli(env_run, paths, "rollback")
    assert res.exit_code == 0 and "rollback production: deploy good-a (" in res.output and "instead of good-b (" in res.output, res.output


def test_a_clearance_made_before_environments_were_recorded_is_unknown_not_stale(env_run, paths, monkeypatch):
    judgment = judge_run(env_run["store"], None, "dev", paths["queue"])
    with ReleaseLedger(paths["ledger"]) as led:  # as a gate before issue 42 recorded it
        led.record([replace(decision_for(judgment, "good-a"), environment=None)])
    monkeypatch.setenv(ENV_VAR, UPGRADED)
    c = clearance(paths, "good-a", "dev")
    assert c.cleared and not c.stale and c.environment.state == "unknown"
    assert c.environment.summary() == "environment unknown: cleared before evalsuite recorded environments (a gate of a new run records one)"
    res = cli(env_run, paths, "releases")
    assert res.exit_code == 0 and "(stale)" not in res.output and "variant(s) stale" not in res.output, res.output
    assert (
        "1 cleared variant(s) with an environment unknown, neither stale nor fresh: good-a (dev: cleared before evalsuite recorded environments" in res.output
    )
    res = cli(env_run, paths, "recheck")
    assert res.exit_code == 0 and "nothing stale in" in res.output and "1 cleared with an unknown environment (not rechecked)" in res.output, res.output


def test_a_recheck_whose_cleared_run_is_gone_cannot_judge_and_records_nothing(env_run, paths, tmp_path, monkeypatch):
    copy = tmp_path / "runs" / env_run["store"].run_id
    shutil.copytree(env_run["store"].dir, copy)
    with ReleaseLedger(paths["ledger"]) as led:
        led.record([decision_for(judge_run(RunStore(copy), None, "dev", paths["queue"]), "good-a")])
    shutil.rmtree(copy)
    monkeypatch.setenv(ENV_VAR, UPGRADED)
    res = cli(env_run, paths, "recheck")
    assert res.exit_code == 2, res.output
    assert (
        "cannot run again: run " in res.output
        and "cannot judge good-a (" in res.output
        and "is gone" in res.output
        and "nothing recorded: still cleared, still stale" in res.output
    )
    with ReleaseLedger(paths["ledger"]) as led:
        assert led.counts()["decisions"] == 1
    assert clearance(paths, "good-a", "dev").stale


def test_the_report_marks_a_stale_clearance_with_what_changed(env_run, paths, monkeypatch):
    gate(env_run, "dev", paths)
    monkeypatch.setenv(ENV_VAR, UPGRADED)
    history = release_history(judge_run(env_run["store"], None, "dev", paths["queue"]), paths["ledger"], paths["queue"])
    rows = {v["variant"]: v for v in history.variants}
    assert rows["good-a"]["stages"]["dev"]["environment"]["changes"] == [CHANGE] and rows["good-a"]["stages"]["pilot"]["environment"] is None
    (line,) = [ln for ln in release_lines(history) if ln.startswith("| `good-a`")]
    assert f"⚠️ stale: {CHANGE}" in line
    monkeypatch.setenv(ENV_VAR, CLEARED)
    history = release_history(judge_run(env_run["store"], None, "dev", paths["queue"]), paths["ledger"], paths["queue"])
    assert "stale" not in next(ln for ln in release_lines(history) if ln.startswith("| `good-a`"))


def test_the_suite_a_run_saved_rebuilds_its_variants_as_they_ran(env_run):
    """A recheck reruns the suite as the cleared run saved it: each variant rebuilt from that block has
    the fingerprint the run recorded (the suite file is not read again)."""
    from evalsuite.backends.base import make_backend
    from evalsuite.cases.suite import suite_from_resolved

    store = env_run["store"]
    suite = suite_from_resolved(store.suite)
    assert [v.name for v in suite.variants] == ["baseline", "good-a", "good-b", "tweak", "bad"] and suite.baseline.name == "baseline"
    assert {v.name: make_backend(v).fingerprint() for v in suite.variants} == store.signature["variants"]
    assert suite.resolved()["variants"] == store.suite["variants"] and [c.path for c in suite.casesets] == [c["path"] for c in store.suite["casesets"]]
