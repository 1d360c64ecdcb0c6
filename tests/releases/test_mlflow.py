"""MLflow, for real: a local tracking and registry store (SQLite backend, created by the test, the same
SQLAlchemy store an `mlflow server --backend-store-uri sqlite:///...` serves) receives `gate --mlflow`'s
params, metrics and artifacts, and `promote --mlflow-model` / `rollback --mlflow` move a registered
model's alias. Nothing is mocked."""

from __future__ import annotations

import pytest

pytest.importorskip("mlflow", reason="MLflow tests need the mlflow extra: pip install 'evalsuite[mlflow]'")
pytest.importorskip("sqlalchemy", reason="a sqlite:/// tracking store needs SQLAlchemy (the mlflow extra)")

from mlflow import MlflowClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from evalsuite.cli import app  # noqa: E402
from evalsuite.releases import ReleaseLedger  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """A fresh tracking store (its tables are created once: the slow part) and a client on it."""
    import os

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cwd = os.getcwd()
    os.chdir(root)  # the store resolves its artifact root (./mlruns) once, when it is first opened: here, not in the checkout
    try:
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.search_experiments()  # creates the tables
    finally:
        os.chdir(cwd)
    return {"uri": uri, "client": client, "root": root}


def invoke(args, run, tmp_path):
    res = runner.invoke(app, [*args, "--ledger", str(tmp_path / "releases.sqlite"), "--runs-dir", str(run["runs_dir"])])
    return res


def test_gate_logs_the_signature_metrics_verdict_and_report(release_run, tracking, tmp_path):
    store, client = release_run["store"], tracking["client"]
    res = invoke(["gate", store.run_id, "--stage", "pilot", "--mlflow", "--mlflow-uri", tracking["uri"], "--mlflow-experiment", "rel-gates"], release_run, tmp_path)
    assert res.exit_code == 1, res.output  # bad regresses at pilot
    assert "mlflow: run " in res.output and "in experiment 'rel-gates'" in res.output
    exp = client.get_experiment_by_name("rel-gates")
    (run,) = client.search_runs([exp.experiment_id])
    fps = store.signature["variants"]
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert params["case_digest"] == store.signature["case_digest"] and params["stage"] == "pilot" and params["run_id"] == store.run_id
    assert params["fingerprint/good-a"] == fps["good-a"] and params["generation.batch_size"] == "8" and len(params["rubric_digest"]) == 64
    recall = "kb_qa/citations.recall"
    assert metrics[f"bad/{recall}/delta"] == pytest.approx(-1 / 7) and metrics[f"bad/{recall}/flips"] == 1.0  # 7 grounded cases, one lost its citation
    assert metrics[f"bad/{recall}/ci_low"] < metrics[f"bad/{recall}/delta"] <= metrics[f"bad/{recall}/ci_high"]
    assert metrics[f"good-a/{recall}/delta"] == 0.0 and metrics[f"good-a/{recall}/variant"] == metrics[f"good-a/{recall}/baseline"] == 1.0
    assert (metrics["good-a/passed"], metrics["bad/passed"], metrics["bad/failed_rules"]) == (1.0, 0.0, 1.0)
    assert (metrics["verdict/passed"], metrics["verdict/exit_code"]) == (0.0, 1.0)
    assert (tags["evalsuite.verdict"], tags["evalsuite.stage"], run.info.status) == ("regression", "pilot", "FINISHED")
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert arts == {"report.html", "report.md", "verdict.json", "signature.json"}
    md = client.download_artifacts(run.info.run_id, "report.md", str(tmp_path / "dl"))
    assert open(md, encoding="utf-8").read() == (release_run["root"] / "out" / store.run_id / "report.md").read_text("utf-8")


def _register(client, name, fps):
    client.create_registered_model(name)
    for variant in ("good-a", "good-b"):
        mv = client.create_model_version(name, source=f"file:///models/{variant}")
        client.set_model_version_tag(name, mv.version, "evalsuite.fingerprint", fps[variant])


def test_promote_moves_the_alias_and_rollback_moves_it_back(release_run, tracking, tmp_path):
    store, client, uri = release_run["store"], tracking["client"], tracking["uri"]
    _register(client, "rel-model", store.signature["variants"])
    assert invoke(["gate", store.run_id, "--stage", "dev"], release_run, tmp_path).exit_code == 0
    mlflow = ["--mlflow-model", "rel-model", "--mlflow-uri", uri]
    for variant, stage, version, was in (("good-a", "pilot", "1", "unset"), ("good-a", "production", "1", "unset"), ("good-b", "pilot", "2", "1"), ("good-b", "production", "2", "1")):
        res = invoke(["promote", variant, "--to", stage, "--run", store.run_id, *mlflow], release_run, tmp_path)
        assert res.exit_code == 0, res.output
        assert f"mlflow: model 'rel-model' alias '{stage}' -> version {version} (was {was})" in res.output
        mv = client.get_model_version_by_alias("rel-model", stage)
        assert str(mv.version) == version and mv.tags["evalsuite.run_id"] == store.run_id and mv.tags["evalsuite.stage"] == stage
    with ReleaseLedger(tmp_path / "releases.sqlite") as led:
        assert led.deployments(stage="production")[-1].registry == {"model": "rel-model", "version": "2", "alias": "production", "previous": "1"}
    res = invoke(["rollback", "--stage", "production", "--mlflow", "--mlflow-uri", uri], release_run, tmp_path)
    assert res.exit_code == 0, res.output
    assert "mlflow: model 'rel-model' alias 'production' -> version 1 (was 2)" in res.output
    assert str(client.get_model_version_by_alias("rel-model", "production").version) == "1"
    assert str(client.get_model_version_by_alias("rel-model", "pilot").version) == "2"  # another stage's alias stays


def test_promote_with_no_matching_model_version_fails_and_records_nothing(release_run, tracking, tmp_path):
    store, client = release_run["store"], tracking["client"]
    client.create_registered_model("rel-empty")
    assert invoke(["gate", store.run_id, "--stage", "dev"], release_run, tmp_path).exit_code == 0
    res = invoke(["promote", "good-a", "--to", "pilot", "--run", store.run_id, "--mlflow-model", "rel-empty", "--mlflow-uri", tracking["uri"]], release_run, tmp_path)
    assert res.exit_code == 4 and "no version is tagged evalsuite.fingerprint=" in res.output  # issue 38: your input is wrong exits 4
    with ReleaseLedger(tmp_path / "releases.sqlite") as led:
        assert led.deployments() == [] and [d.kind for d in led.decisions()] == ["gate"] * 4
