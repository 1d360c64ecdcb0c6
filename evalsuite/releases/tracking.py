"""MLflow: a judged run logged where ML teams already track their runs, and the registry alias that a
promotion (or a rollback) moves. Imported only when asked (`gate --mlflow`, `promote --mlflow-model`):
`pip install 'evalsuite[mlflow]'` (the client, and SQLAlchemy for `sqlite:///` tracking stores).

What a gate logs to one MLflow run (experiment `evalsuite` unless named):
- params: the run signature (suite, case-set digest, generation settings, library versions,
  hardware, each variant's fingerprint), the stage, the rubric and its digest for that stage;
- metrics: per variant and scenario and metric, `<variant>/<scenario>/<metric>/{variant,baseline,delta,
  ci_low,ci_high,p_worse,flips}`; per variant `<variant>/{passed,failed_rules,quality_delta,error_rate,
  tokens_per_s_ratio,latency_p95_ratio,peak_memory_ratio,exactness}`; and `verdict/{passed,exit_code,
  violations,warnings}`;
- tags: `evalsuite.run_id`, `evalsuite.stage`, `evalsuite.verdict`;
- artifacts: report.html, report.md, verdict.json and the run's signature.json.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import EvalsuiteError, MissingExtraError

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from ..verdict.outcome import Judgment

T = TypeVar("T")

EXPERIMENT = "evalsuite"
_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")
_PERF = ("error_rate", "tokens_per_s_ratio", "latency_p95_ratio", "peak_memory_ratio", "exactness")
_DELTA = (("variant", "variant_mean"), ("baseline", "baseline_mean"), ("delta", "delta"), ("ci_low", "ci_low"), ("ci_high", "ci_high"), ("p_worse", "p_worse"))


def _client(uri: str | None):
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise MissingExtraError("MLflow logging", "mlflow", "mlflow-skinny") from exc
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


@contextmanager
def mlflow_errors(what: str, uri: str | None) -> Iterator[None]:
    """MLflow's own failures (a refused request, an unknown model or version) as one EvalsuiteError
    line naming what was attempted and where."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except MlflowException as exc:
        raise EvalsuiteError(f"MLflow ({uri or 'default tracking URI'}): {what}: {exc.message}") from exc


def key(*parts: object) -> str:
    """An MLflow param or metric key (letters, digits, `_-. /` only; at most 250 characters)."""
    return _KEY_BAD.sub("_", "/".join(str(p) for p in parts))[:250]


def _flat(prefix: str, obj: object) -> dict[str, str]:
    if isinstance(obj, Mapping):
        out: dict[str, str] = {}
        for k, v in obj.items():
            out.update(_flat(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {key(prefix): str(obj)[:6000]}


def params_of(judgment: Judgment) -> dict[str, str]:
    """The run signature and what it was judged by, as MLflow params."""
    sig = dict(judgment.store.signature or {})
    fps = sig.pop("variants", {}) or {}
    out = _flat("", sig)
    out.update({key("fingerprint", v): str(fp) for v, fp in fps.items()})
    out.update(
        {
            "run_id": judgment.store.run_id,
            "stage": judgment.stage,
            "stage_source": judgment.stage_source,
            "rubric": str(judgment.rubric.path),
            "rubric_digest": judgment.rubric.digest(judgment.stage),
            "baseline": judgment.comparison.baseline,
        }
    )
    return out


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def metrics_of(judgment: Judgment) -> dict[str, float]:
    """Per-variant and per-scenario metrics with their deltas and 95% intervals, and the verdict."""
    cmp, verdict = judgment.comparison, judgment.verdict
    out: dict[str, float | None] = {}
    for d in cmp.deltas:
        if d.noise or not d.n:
            continue
        for name, attr in _DELTA:
            out[key(d.variant, d.scenario, d.metric, name)] = _num(getattr(d, attr))
        out[key(d.variant, d.scenario, d.metric, "flips")] = float(len(d.pass_to_fail)) if d.pass_fail else None
    for v in cmp.variants:
        out[key(v, "passed")] = float(verdict.variant_status(v) == "pass")
        out[key(v, "failed_rules")] = float(len(verdict.failed_rules(v)))
        pf = [d.delta for d in cmp.deltas_for(v) if d.pass_fail and d.n and not d.noise and _num(d.delta) is not None]
        out[key(v, "quality_delta")] = sum(pf) / len(pf) if pf else None
        perf = cmp.perf_for(v)
        for name in _PERF if perf is not None else ():
            out[key(v, name)] = _num(getattr(perf, name))
    out.update(
        {
            "verdict/passed": float(verdict.passed),
            "verdict/exit_code": float(verdict.exit_code),
            "verdict/violations": float(len(verdict.violations)),
            "verdict/warnings": float(len(verdict.warnings)),
        }
    )
    return {k: v for k, v in out.items() if v is not None}


def _chunks(items: Sequence[T], n: int) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


@dataclass(frozen=True)
class LoggedRun:
    """Where a gate was logged in MLflow."""

    run_id: str
    experiment_id: str
    tracking_uri: str
    artifact_uri: str
    params: int
    metrics: int


def _experiment_id(client: MlflowClient, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp is not None else client.create_experiment(name)


def log_gate(judgment: Judgment, files: Sequence[str | Path] = (), *, uri: str | None = None, experiment: str = EXPERIMENT) -> LoggedRun:
    """Log a judged run (evalsuite.judge.judge_run's Judgment) as one MLflow run: params, metrics, tags
    and `files` (report.html, report.md) plus verdict.json and signature.json as artifacts."""
    client = _client(uri)
    with mlflow_errors(f"logging run {judgment.store.run_id}", uri):
        return _log(client, judgment, files, experiment)


def _log(client: MlflowClient, judgment: Judgment, files: Sequence[str | Path], experiment: str) -> LoggedRun:
    import time

    from mlflow.entities import Metric, Param

    verdict = judgment.verdict
    tags = {"evalsuite.run_id": judgment.store.run_id, "evalsuite.stage": judgment.stage, "evalsuite.verdict": verdict.status}
    run = client.create_run(_experiment_id(client, experiment), run_name=f"{judgment.store.run_id} ({judgment.stage})", tags=tags)
    rid = run.info.run_id
    try:
        params, metrics, now = params_of(judgment), metrics_of(judgment), int(time.time() * 1000)
        for chunk in _chunks([Param(k, v) for k, v in params.items()], 100):
            client.log_batch(rid, params=list(chunk))
        for batch in _chunks([Metric(k, v, now, 0) for k, v in metrics.items()], 1000):
            client.log_batch(rid, metrics=list(batch))
        with tempfile.TemporaryDirectory() as tmp:
            extra = Path(tmp) / "verdict.json"
            extra.write_text(json.dumps({**verdict.to_dict(), "stage_source": judgment.stage_source}, indent=2, default=str) + "\n", "utf-8")
            sig = Path(judgment.store.dir) / "signature.json"
            for f in [*map(Path, files), extra, *([sig] if sig.is_file() else [])]:
                client.log_artifact(rid, str(f))
        client.set_terminated(rid, "FINISHED")
    except BaseException:
        client.set_terminated(rid, "FAILED")
        raise
    return LoggedRun(rid, run.info.experiment_id, client.tracking_uri, client.get_run(rid).info.artifact_uri, len(params), len(metrics))


def find_version(client: MlflowClient, model: str, fingerprint: str) -> str:
    """The registered model version tagged with this variant build (`evalsuite.fingerprint`)."""
    found = [mv for mv in client.search_model_versions(f"name='{model}'") if (mv.tags or {}).get("evalsuite.fingerprint") == fingerprint]
    if not found:
        raise EvalsuiteError(
            f"MLflow model {model!r}: no version is tagged evalsuite.fingerprint={fingerprint[:16]}...; name the version (--mlflow-version N) "
            "or tag the one registered for this variant"
        )
    return str(max(int(mv.version) for mv in found))


def set_alias(
    model: str, alias: str, *, uri: str | None = None, version: str | None = None, fingerprint: str = "", tags: Mapping[str, str] | None = None
) -> dict:
    """Point a registered model's alias (e.g. `production`) at a version and tag that version; returns
    {model, version, alias, previous} (previous: the version the alias pointed at, or None)."""
    client = _client(uri)
    from mlflow.exceptions import MlflowException

    try:
        previous = client.get_model_version_by_alias(model, alias).version
    except MlflowException:  # the alias is not set yet
        previous = None
    with mlflow_errors(f"setting alias {alias!r} of model {model!r}", uri):
        ver = str(version) if version else find_version(client, model, fingerprint)
        client.get_model_version(model, ver)  # a clear error when there is no such version
        client.set_registered_model_alias(model, alias, ver)
        for k, v in {**(tags or {}), **({"evalsuite.fingerprint": fingerprint} if fingerprint else {})}.items():
            client.set_model_version_tag(model, ver, k, str(v))
    return {"model": model, "version": ver, "alias": alias, "previous": None if previous is None else str(previous)}
