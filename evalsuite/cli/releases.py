"""`evalsuite releases`, `promote`, `rollback` and `recheck`: thin commands over evalsuite.promotion,
evalsuite.recheck and the release ledger (evalsuite.releases)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..states import CANNOT_JUDGE_WORD
from ._app import ExitCode, app, console, guarded, new_table, print_error, setup_logging
from .judging import LedgerOpt, QueueOpt, RubricOpt, RunsDir

if TYPE_CHECKING:
    from rich.table import Table

    from ..recheck import RecheckOutcome, RecheckResult
    from ..releases.clearance import Clearance, ReleaseStatus

MlflowUriOpt = typer.Option(
    None, "--mlflow-uri", envvar="MLFLOW_TRACKING_URI", help="MLflow tracking/registry URI (default: $MLFLOW_TRACKING_URI, else MLflow's own)"
)
JsonOpt = typer.Option(None, "--json", help="also write what happened as JSON here")


def _ledger(ledger: Path | None, runs_dir: Path) -> Path:
    from ..releases import default_ledger_path

    return ledger or default_ledger_path(runs_dir=runs_dir)


def _write_json(path: Path | None, doc: object) -> None:
    if path:
        from ..yamlio import atomic_write_text

        atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")


def _when(ts: str | None) -> str:
    return (ts or "-").replace("T", " ")[:19]


def _clearance_table(status: ReleaseStatus, stage: str | None, show_all: bool) -> Table:
    rows = [c for c in status.clearances if (stage is None or c.stage == stage) and (show_all or c.cleared)]
    t = new_table(f"{sum(c.cleared for c in rows)} cleared" + (f" for {stage}" if stage else ""), title_justify="left")
    for col in ("stage", "variant", "fingerprint", "cleared since", "latest decision", "waivers") + (("why not",) if show_all else ()):
        t.add_column(col, overflow="fold")
    for c in rows:
        d = c.decision
        latest = f"#{d.id} {d.kind} {d.status}, run {d.run_id}, {_when(d.created)} by {d.actor}" if d is not None else "-"
        cells = [c.stage, c.variant, c.fingerprint[:12], _since(c), latest, str(len(d.waivers) if d else 0)]
        t.add_row(*cells, *((c.reason or "-",) if show_all else ()))
    return t


def _since(c: Clearance) -> str:
    """The cleared-since cell, marked stale or with its environment unknown (the lines below the table say more)."""
    if not c.cleared:
        return "not cleared"
    state = c.environment.state if c.environment is not None else "fresh"
    return _when(c.since) + {"fresh": "", "stale": " (stale)", "unknown": " (environment unknown)"}[state]


def _environment_lines(status: ReleaseStatus, stage: str | None) -> list[str]:
    """The stale clearances with what changed, and those whose environment is unknown, with why."""
    lines = []
    stale = status.stale(stage)
    if stale:
        names = "; ".join(f"{c.variant} ({c.stage}: {', '.join(c.environment.changes)})" for c in stale if c.environment is not None)
        again = "evalsuite recheck" + (f" --stage {stage}" if stage else "")
        lines.append(f"{len(stale)} cleared variant(s) stale, their environment changed since: {names}; `{again}` judges them again")
    unknown = [(c, c.environment) for c in status.cleared(stage) if c.environment is not None and c.environment.state == "unknown"]
    if unknown:
        names = "; ".join(f"{c.variant} ({c.stage}: {env.reason})" for c, env in unknown)
        lines.append(f"{len(unknown)} cleared variant(s) with an environment unknown, neither stale nor fresh: {names}")
    return lines


def _deployment_lines(status: ReleaseStatus, stage: str | None) -> list[str]:
    lines = []
    for s, sd in status.deployments.items():
        if stage is not None and s != stage:
            continue
        cur = sd.current
        if cur is None:
            continue
        lines.append(f"{s} runs {cur.variant} ({cur.fingerprint[:12]}) since {_when(cur.created)} ({cur.action} by {cur.actor}, deployment #{cur.id})")
        if sd.target is not None and sd.target_clearance is not None:
            t, c = sd.target, sd.target_clearance
            lines.append(
                f"  rollback target: {t.variant} ({t.fingerprint[:12]}), cleared for {s} since {_when(c.since)} on run {c.decision.run_id if c.decision else '-'}"
            )
        else:
            lines.append(f"  rollback target: none: {sd.why_no_target}")
    return lines


@app.command()
@guarded()
def releases(
    stage: str | None = typer.Option(None, help="only this stage (dev, pilot, production)"),
    show_all: bool = typer.Option(False, "--all", help="also the variants not cleared, and why"),
    ledger: Path | None = LedgerOpt,
    queue: Path | None = QueueOpt,
    rubric: Path | None = typer.Option(None, help="judge every decision against this rubric (default: the file each decision names)"),
    runs_dir: Path = RunsDir,
    json_out: Path | None = JsonOpt,
) -> None:
    """What is cleared for which stage, and since when, and whether its environment changed since (stale);
    what each stage runs and its rollback target."""
    from ..report.releases import ledger_status
    from ..verdict.rubric import load_rubric

    if stage is not None:
        from ..promotion import stage_below

        stage_below(stage)  # a known stage, or exit 4 with the close match ("0 cleared for prod" was a silent typo)
    path = _ledger(ledger, runs_dir)
    status = ledger_status(path, queue, rubric=load_rubric(rubric) if rubric else None, runs_dir=runs_dir, environments=True)
    if not path.is_file():
        console.print(f"no release ledger at {path} yet: `evalsuite gate RUN` records each decision there", highlight=False)
    else:
        console.print(_clearance_table(status, stage, show_all))
        for line in _deployment_lines(status, stage):
            console.print(line, highlight=False, soft_wrap=True)
        for line in _environment_lines(status, stage):
            console.print(line, highlight=False, soft_wrap=True)
    _write_json(
        json_out,
        {"ledger": str(path), "clearances": [asdict(c) for c in status.clearances], "deployments": {s: asdict(d) for s, d in status.deployments.items()}},
    )


@app.command()
@guarded()
def promote(
    variant: str = typer.Argument(..., help="the variant's name in the run"),
    to: str = typer.Option(..., "--to", help="the stage to promote it to: dev, pilot or production"),
    run: str = typer.Option("last", help="the run whose verdict decides (id, directory, or 'last')"),
    rubric: Path | None = RubricOpt,
    runs_dir: Path = RunsDir,
    queue: Path | None = QueueOpt,
    ledger: Path | None = LedgerOpt,
    mlflow_model: str | None = typer.Option(None, "--mlflow-model", help="MLflow registered model whose alias moves to this variant's version"),
    mlflow_version: str | None = typer.Option(None, "--mlflow-version", help="its version (default: the one tagged evalsuite.fingerprint=<fingerprint>)"),
    mlflow_alias: str | None = typer.Option(None, "--mlflow-alias", help="the alias to move (default: the stage's name)"),
    mlflow_uri: str | None = MlflowUriOpt,
    json_out: Path | None = JsonOpt,
) -> None:
    """Promote a variant to a stage: refused, with the reason (exit 1), unless it is cleared for the
    stage below and passes this stage's gate on the run."""
    from ..promotion import ModelRegistry, PromoteRequest
    from ..promotion import promote as do_promote

    reg = ModelRegistry(model=mlflow_model, version=mlflow_version, alias=mlflow_alias, uri=mlflow_uri) if mlflow_model else None
    res = do_promote(PromoteRequest(variant=variant, stage=to, run=run, runs_dir=runs_dir, rubric=rubric, queue=queue, ledger=ledger, registry=reg))
    _write_json(json_out, {k: v for k, v in asdict(res).items() if k != "judgment"})
    if not res.promoted:
        recorded = f" (decision #{res.decision.id} recorded)" if res.decision is not None else " (nothing recorded)"
        console.print(f"[red]refused[/red]: {res.reason}{recorded}", highlight=False, soft_wrap=True)
        raise typer.Exit(int(ExitCode.FAILED))
    dep = res.deployment
    assert dep is not None and res.decision is not None
    replaces = f"; replaces {dep.replaces[:12]}" if dep.replaces else ""
    console.print(f"promoted {res.variant} ({res.fingerprint[:12]}) to {res.stage} on run {res.run_id}{replaces}", highlight=False)
    console.print(f"ledger: decision #{res.decision.id}, deployment #{dep.id}", highlight=False)
    if res.registry:
        r = res.registry
        console.print(f"mlflow: model {r['model']!r} alias {r['alias']!r} -> version {r['version']} (was {r['previous'] or 'unset'})", highlight=False)


@app.command()
@guarded()
def rollback(
    stage: str = typer.Option("production", help="the stage to roll back"),
    ledger: Path | None = LedgerOpt,
    queue: Path | None = QueueOpt,
    runs_dir: Path = RunsDir,
    mlflow: bool = typer.Option(False, "--mlflow", help="move the MLflow alias back to the version the target's promotion set"),
    mlflow_uri: str | None = MlflowUriOpt,
    json_out: Path | None = JsonOpt,
) -> None:
    """Roll a stage back to the previous variant still cleared for it: checks that its files are those
    it was cleared with, prints what to deploy, and records the rollback (exit 1, nothing recorded, when it cannot)."""
    from ..promotion import ModelRegistry, stage_below
    from ..promotion import rollback as do_rollback
    from ..releases.ledger import LedgerError

    stage_below(stage)  # a known stage (else exit 4, your input)
    try:
        res = do_rollback(stage, ledger=_ledger(ledger, runs_dir), queue=queue, registry=ModelRegistry(uri=mlflow_uri) if mlflow else None)
    except LedgerError as exc:  # refused: nothing to roll back to, or its files changed
        print_error(exc)
        raise typer.Exit(int(ExitCode.FAILED)) from None
    dep, prev, c = res.deployment, res.previous, res.clearance
    console.print(f"rollback {stage}: deploy {dep.variant} ({dep.fingerprint[:12]}) instead of {prev.variant} ({prev.fingerprint[:12]})", highlight=False)
    run = c.decision.run_id if c.decision else "-"
    console.print(f"  cleared for {stage} since {_when(c.since)} on run {run} (decision #{dep.decision_id})", highlight=False)
    console.print(f"  identity unchanged: {res.identity.summary()}", highlight=False, soft_wrap=True)
    console.print("  deploy this variant:", highlight=False)
    from ..yamlio import dump_yaml

    console.print(dump_yaml({"fingerprint": dep.fingerprint, **dict(dep.spec)}).rstrip(), highlight=False, soft_wrap=True)
    if res.registry:
        r = res.registry
        console.print(f"mlflow: model {r['model']!r} alias {r['alias']!r} -> version {r['version']} (was {r['previous'] or 'unset'})", highlight=False)
    console.print(f"ledger: deployment #{dep.id} (rollback) recorded", highlight=False)
    _write_json(json_out, asdict(res))


def _recheck_plan_lines(res: RecheckResult, dry_run: bool) -> list[str]:
    lines = []
    for r in res.plan:
        stages = "; ".join(f"{c.variant} for {c.stage}: {', '.join(c.environment.changes)}" for c in r.clearances if c.environment is not None)
        if r.problem:
            lines.append(f"  cannot run again: {r.problem} ({stages})")
        else:
            verb = "would rerun" if dry_run else "rerun"
            lines.append(f"  {verb} run {r.run_id}: {', '.join(r.variants)} with baseline {r.baseline} again on its {r.cases} case(s) ({stages})")
    return lines


def _recheck_outcome_lines(o: RecheckOutcome) -> list[str]:
    c = o.clearance
    head = f"{c.variant} ({c.fingerprint[:12]}) for {c.stage}"
    where = f" on run {o.run_id}" if o.run_id else ""
    if o.outcome == CANNOT_JUDGE_WORD:
        return [f"[yellow]cannot judge[/yellow] {head}{where}: {o.reason} (nothing recorded: still cleared, still stale)"]
    d = o.decision
    rules = f" ({o.reason})" if o.reason else ""
    said = {"kept": "[green]kept[/green]", "revoked": "[red]revoked[/red]", "suspended": "[yellow]suspended[/yellow]"}[o.outcome]
    what = {
        "kept": "clearance renewed with the new environment",
        "revoked": "clearance revoked",
        "suspended": "clearance suspended until its flagged outputs are reviewed and a gate records a pass",
    }[o.outcome]
    lines = [f"{said} {head}: {o.status}{rules}{where}; {what} (decision #{d.id if d else '-'})"]
    if o.drift is not None:
        lines.append(f"  against the cleared run {c.decision.run_id if c.decision else '-'}: {o.drift.summary()}")
    if o.baseline_drift is not None:
        lines.append(f"  its baseline {o.baseline_drift.variant} against the cleared run: {o.baseline_drift.summary()}")
    if o.rollback:
        lines.append(f"  {o.rollback}")
    return lines


@app.command()
@guarded()
def recheck(
    stage: str | None = typer.Option(None, help="only the clearances for this stage (dev, pilot, production)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="say what is stale and what would run again; run nothing"),
    ledger: Path | None = LedgerOpt,
    queue: Path | None = QueueOpt,
    runs_dir: Path = RunsDir,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    json_out: Path | None = JsonOpt,
) -> None:
    """Run the stale clearances again (their environment changed since they were cleared) on the suite
    and cases they were cleared with, and judge them: exit 0 all kept (or nothing stale), 1 a clearance
    revoked, 2 cannot judge, 3 one suspended for review, 4 bad input."""
    from ..recheck import RecheckRequest, plan_recheck
    from ..recheck import recheck as do_recheck

    setup_logging()
    req = RecheckRequest(ledger=_ledger(ledger, runs_dir), stage=stage, dry_run=dry_run, queue=queue, runs_dir=runs_dir, progress=not quiet)
    planned = plan_recheck(req)
    unknown = f"; {len(planned.unknown)} cleared with an unknown environment (not rechecked)" if planned.unknown else ""
    if not planned.stale:
        _write_json(json_out, {"ledger": str(req.ledger), "exit_code": int(planned.exit_code), **asdict(planned)})
        console.print(f"nothing stale{' for ' + stage if stage else ''} in {req.ledger}{unknown}", highlight=False, soft_wrap=True)
        return
    console.print(f"{len(planned.stale)} stale clearance(s){unknown}:", highlight=False, soft_wrap=True)
    for line in _recheck_plan_lines(planned, dry_run):
        console.print(line, highlight=False, soft_wrap=True)
    res = do_recheck(req, planned=planned, notify=lambda line: console.print(line, highlight=False, soft_wrap=True))
    _write_json(json_out, {"ledger": str(req.ledger), "exit_code": int(res.exit_code), **asdict(res)})
    if dry_run:
        return
    for o in res.outcomes:
        for line in _recheck_outcome_lines(o):
            console.print(line, highlight=False, soft_wrap=True)
    if any(o.rollback for o in res.outcomes):
        console.print("a stage runs a variant that lost its clearance: roll it back (the line above names what `evalsuite rollback` deploys)", highlight=False)
    raise typer.Exit(int(res.exit_code))
