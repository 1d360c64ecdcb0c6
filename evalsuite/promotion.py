"""Promotion and rollback: moving a variant up a stage, or a stage back to the variant it ran before.

`promote` judges through the one judging path (evalsuite.judge.judge_run) and records through the
release ledger (evalsuite.releases); `rollback` judges nothing: it reads the ledger against the
rubrics and review verdicts of now, checks the target's files and records the rollback. Both return
data; the commands (evalsuite.cli.releases) print it.

What each writes to the ledger (docs/formats.md):
- a promotion refused because the variant is not cleared for the stage below: nothing;
- a promotion judged: one `decisions` row (kind `promote`: the variant's verdict at the stage), and,
  when it passed, one `deployments` row (action `promote`) in the same transaction;
- a rollback: one `deployments` row (action `rollback`); a refused one (no target, changed files): nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases.options import STAGES
from .errors import EvalsuiteError, UnknownNameError
from .judge import Judgment, judge_run
from .releases import api as rel
from .releases.clearance import Clearance, deployment_stack
from .releases.identity import IdentityCheck, check_identity
from .releases.ledger import Decision, Deployment, LedgerError, ReleaseLedger
from .report.releases import ledger_status
from .review.api import default_queue_path
from .run.partial import full_run_command, partial_reasons
from .run.store import RunStore
from .verdict.rubric import Rubric

__all__ = ["PromoteRequest", "PromoteResult", "ModelRegistry", "RollbackResult", "ledger_status", "promote", "rollback", "stage_below"]


def stage_below(stage: str) -> str | None:
    """The stage a variant must be cleared for before it is promoted to `stage` (None for the first)."""
    if stage not in STAGES:
        raise UnknownNameError("stage", stage, list(STAGES))
    i = STAGES.index(stage)
    return STAGES[i - 1] if i else None


@dataclass(frozen=True)
class ModelRegistry:
    """An MLflow registered model whose alias a promotion (or a rollback) moves."""

    model: str = ""  #: the registered model's name ("" on rollback: the target's recorded one)
    version: str | None = None  #: None: the version tagged evalsuite.fingerprint=<the variant's fingerprint>
    alias: str | None = None  #: None: the stage's name
    uri: str | None = None  #: tracking/registry URI (None: MLflow's own default, $MLFLOW_TRACKING_URI)


@dataclass(frozen=True, kw_only=True)
class PromoteRequest:
    """What `evalsuite promote` asks for."""

    variant: str
    stage: str
    run: str = "last"
    runs_dir: Path = Path("reports/runs")
    rubric: str | Path | None = None
    queue: Path | None = None
    ledger: Path | None = None
    registry: ModelRegistry | None = None
    actor: str | None = None


@dataclass(frozen=True, kw_only=True)
class PromoteResult:
    """What a promotion did, or why it was refused."""

    promoted: bool
    variant: str
    fingerprint: str
    stage: str
    run_id: str
    reason: str  #: why it was refused ("" when promoted)
    lower: Clearance | None = None  #: its clearance for the stage below
    decision: Decision | None = None  #: the decision recorded (None: refused before judging)
    deployment: Deployment | None = None
    judgment: Any = None
    registry: dict | None = None  #: the MLflow alias moved: {model, version, alias, previous}


def _variant(store: RunStore, name: str) -> str:
    fps = (store.signature or {}).get("variants") or {}
    suite = store.suite or {}
    judged = [v["name"] for v in suite.get("variants") or [] if not v.get("baseline") and not v.get("noise")]
    if name not in judged:
        raise EvalsuiteError(f"variant {name!r} is not a judged variant of run {store.run_id} (its variants: {', '.join(judged) or 'none'})")
    if name not in fps:
        raise EvalsuiteError(f"run {store.run_id}: no fingerprint for {name!r} in its signature")
    return fps[name]


def _refused(
    req: PromoteRequest,
    store: RunStore,
    fp: str,
    why: str,
    *,
    lower: Clearance | None = None,
    decision: Decision | None = None,
    judgment: Judgment | None = None,
) -> PromoteResult:
    """A promotion of `req` refused, and why; with what was found before the refusal (the clearance
    for the stage below, the decision recorded, the judgment)."""
    return PromoteResult(
        promoted=False, variant=req.variant, fingerprint=fp, stage=req.stage, run_id=store.run_id, reason=why, lower=lower, decision=decision, judgment=judgment
    )


def _refused_lower(req: PromoteRequest, store: RunStore, fp: str, below: str, c: Clearance | None) -> PromoteResult:
    why = c.reason if c is not None else f"no {below} decision is recorded for this build (evalsuite gate RUN --stage {below})"
    return _refused(req, store, fp, f"{req.variant} ({fp[:12]}) is not cleared for {below}: {why}", lower=c)


def _refused_partial(req: PromoteRequest, store: RunStore, fp: str) -> PromoteResult | None:
    """A smoke run (--limit, --scenarios, --variants) never clears a variant for a stage: refused, naming the full run's command."""
    partial = partial_reasons(store.signature, store.suite)
    if not partial:
        return None
    reason = f"run {store.run_id} is partial ({'; '.join(partial)}): promote from a full run: {full_run_command(store.suite)}"
    return _refused(req, store, fp, reason)


def _registry_move(reg: ModelRegistry, stage: str, decision: Decision) -> dict:
    from .releases.tracking import set_alias

    tags = {"evalsuite.run_id": decision.run_id, "evalsuite.stage": stage, "evalsuite.variant": decision.variant}
    return set_alias(reg.model, reg.alias or stage, uri=reg.uri, version=reg.version, fingerprint=decision.fingerprint, tags=tags)


def promote(req: PromoteRequest) -> PromoteResult:
    """Promote a variant of a run to `req.stage`: refused, with the reason, unless it is cleared for
    the stage below and passes this stage's gate (judged by judge_run); then the MLflow alias moves
    (when asked) and the promotion is recorded."""
    store = RunStore.find(req.runs_dir, req.run)
    fp = _variant(store, req.variant)
    below = stage_below(req.stage)
    partial = _refused_partial(req, store, fp)
    if partial is not None:
        return partial
    ledger = req.ledger or rel.default_ledger_path(store)
    lower = None
    if below is not None:
        lower = ledger_status(ledger, req.queue or default_queue_path(store), fingerprints=[fp]).of(fp, below)
        if lower is None or not lower.cleared:
            return _refused_lower(req, store, fp, below, lower)
    judgment = judge_run(store, req.rubric, req.stage, req.queue)
    decision = rel.decision_for(judgment, req.variant, kind="promote", actor=req.actor)
    with ReleaseLedger(ledger) as led:
        if not decision.passed:
            stored = led.record([decision])[0][0]
            rules = f" ({', '.join(decision.failed_rules)})" if decision.failed_rules else ""
            reason = f"{req.variant} ({fp[:12]}) does not pass the {req.stage} gate on run {store.run_id}: {decision.status}{rules}"
            return _refused(req, store, fp, reason, lower=lower, decision=stored, judgment=judgment)
        stack = deployment_stack(led.deployments(stage=req.stage))
        after = led.db.execute("SELECT MAX(id) FROM deployments WHERE stage=?", (req.stage,)).fetchone()[0] or 0
        moved = _registry_move(req.registry, req.stage, decision) if req.registry is not None else {}
        dep = Deployment(
            action="promote",
            stage=req.stage,
            variant=req.variant,
            fingerprint=fp,
            identity=decision.identity,
            spec=decision.spec,
            decision_id=0,
            replaces=stack[-1].fingerprint if stack else "",
            registry=moved,
            actor=decision.actor,
            origin=decision.origin,
        )
        rows, dep_row = led.record([decision], dep, after=after)
    return PromoteResult(
        promoted=True,
        variant=req.variant,
        fingerprint=fp,
        stage=req.stage,
        run_id=store.run_id,
        reason="",
        lower=lower,
        decision=rows[0],
        deployment=dep_row,
        judgment=judgment,
        registry=moved or None,
    )


@dataclass(frozen=True)
class RollbackResult:
    """A recorded rollback: what the stage ran, what it runs now, and the checked identity."""

    stage: str
    previous: Deployment  #: what the stage ran before
    deployment: Deployment  #: the rollback row recorded (its variant: what to deploy)
    clearance: Clearance  #: the target's clearance for the stage
    identity: IdentityCheck
    registry: dict | None = None


def rollback(
    stage: str = "production",
    *,
    ledger: str | Path,
    queue: str | Path | None = None,
    registry: ModelRegistry | None = None,
    actor: str | None = None,
    rubric: Rubric | None = None,
) -> RollbackResult:
    """Roll `stage` back to the previous variant still cleared for it, after checking that its files
    are those it was cleared with. Raises LedgerError (nothing recorded) when there is no such variant
    or its files changed. `registry`: move the MLflow alias back to the version its promotion moved."""
    stage_below(stage)  # a known stage
    path = Path(ledger)
    if not path.is_file():
        raise LedgerError(f"rollback {stage}: no release ledger at {path} (nothing was promoted)")
    status = ledger_status(path, queue, rubric=rubric)
    sd = status.deployments.get(stage)
    if sd is None or sd.target is None or sd.target_clearance is None:
        why = sd.why_no_target if sd is not None else f"nothing was promoted to {stage} yet (evalsuite promote VARIANT --to {stage})"
        raise LedgerError(f"rollback {stage}: {why}")
    target, cleared = sd.target, sd.target_clearance
    decision = cleared.decision
    assert decision is not None and sd.current is not None
    check = check_identity(decision.identity, decision.spec, target.fingerprint)
    if not check.ok:
        lines = "\n".join(f"  - {p}" for p in check.problems)
        raise LedgerError(f"rollback {stage} to {target.variant} ({target.fingerprint[:12]}) refused: its files are not those it was cleared with:\n{lines}")
    moved = None
    if registry is not None and target.registry.get("model"):
        from .releases.tracking import set_alias

        rec = target.registry
        moved = set_alias(rec["model"], registry.alias or rec.get("alias") or stage, uri=registry.uri, version=rec["version"], fingerprint=target.fingerprint)
    note = f"rolled back from {sd.current.variant} ({sd.current.fingerprint[:12]})"
    dep = Deployment(
        action="rollback",
        stage=stage,
        variant=target.variant,
        fingerprint=target.fingerprint,
        identity=check.current,
        spec=decision.spec,
        decision_id=decision.id,
        replaces=sd.current.fingerprint,
        registry=moved or {},
        actor=actor or rel.default_actor(),
        origin=rel.ci_origin(),
        note=note,
    )
    with ReleaseLedger(path) as led:
        _, row = led.record((), dep, after=sd.history[-1].id)
    assert row is not None
    return RollbackResult(stage, sd.current, row, cleared, check, moved)
