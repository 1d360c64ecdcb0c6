"""Commands that judge a run: gate, report, demo. Each calls `evalsuite.judge.judge_run` (directly or
through the demo) and renders its Judgment; none assembles a verdict of its own."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import EvalsuiteError
from ..states import CANNOT_JUDGE_WORD
from ._app import ExitCode, app, console, guarded, print_error, setup_logging

RunArg = typer.Argument(..., help="run id, run directory, or 'last'")
RubricOpt = typer.Option(None, help="rubric file (default: the suite's, else rubrics/default.yaml)")
StageOpt = typer.Option(None, help="dev, pilot or production (default: the suite's stage, else production)")
RunsDir = typer.Option(Path("reports/runs"), help="where runs live")
QueueOpt = typer.Option(None, "--queue", help="review queue (default: reports/review.sqlite beside the runs); its verdicts count")


def write_verdict_json(judgment, path: Path) -> None:
    """The verdict as JSON, with the stage it was judged for and why that one."""
    from ..yamlio import atomic_write_text

    doc = {**judgment.verdict.to_dict(), "stage_source": judgment.stage_source}
    atomic_write_text(Path(path), json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")


LedgerOpt = typer.Option(None, "--ledger", help="release ledger (default: $EVALSUITE_RELEASE_LEDGER, else reports/releases.sqlite beside the runs)")
SummaryOpt = typer.Option(
    None, "--summary", envvar="GITHUB_STEP_SUMMARY", help="append report.md to this file: a CI job summary (default: $GITHUB_STEP_SUMMARY when set)"
)
MlflowOpt = typer.Option(False, "--mlflow", help="log the run, its verdict and its report to MLflow (pip install 'evalsuite[mlflow]')")
MlflowUriOpt = typer.Option(
    None, "--mlflow-uri", envvar="MLFLOW_TRACKING_URI", help="MLflow tracking URI for --mlflow (default: $MLFLOW_TRACKING_URI, else MLflow's own)"
)
MlflowExpOpt = typer.Option("evalsuite", "--mlflow-experiment", help="MLflow experiment for --mlflow")


def _cannot_judge(exc: EvalsuiteError, stage: str | None, json_out: Path | None) -> typer.Exit:
    """The gate could not start: the input is wrong (a missing run, a bad rubric or stage): ExitCode.USAGE,
    never the 2 of a run that cannot be judged."""
    print_error(exc)
    if json_out:  # CI reads the file: it says why, too
        from ..yamlio import atomic_write_text

        doc = {
            "passed": False,
            "judgeable": False,
            "exit_code": int(ExitCode.USAGE),
            "status": CANNOT_JUDGE_WORD,
            "input_error": True,
            "stage": stage,
            "problems": [str(exc)],
        }
        atomic_write_text(json_out, json.dumps(doc, indent=2) + "\n")
    return typer.Exit(int(ExitCode.USAGE))


def _record(judgment, ledger: Path | None, force: bool = False) -> None:
    """The gate's decisions into the release ledger, one line about it; a partial run's only with `force`."""
    from ..releases import default_ledger_path, record_gate
    from ..run.partial import full_run_command

    if judgment.partial and not force:
        console.print(
            f"ledger: nothing recorded: a partial run ({'; '.join(judgment.partial)}) clears no variant; "
            f"judge a full run ({full_run_command(judgment.store.suite)}) or add --record",
            highlight=False,
            soft_wrap=True,
        )
        return

    path = ledger or default_ledger_path(judgment.store)
    rows = record_gate(judgment, path)
    counts = ", ".join(f"{d.variant} {d.status}" for d in rows) or "no judged variant"
    console.print(f"ledger: {judgment.stage} decision(s) recorded in {path}: {counts}", highlight=False, soft_wrap=True)


def _publish(judgment, ledger: Path | None, summary: Path | None, mlflow: bool, mlflow_uri: str | None, experiment: str) -> None:
    """Where people look: report.md appended to the CI job summary, and the run logged to MLflow."""
    from ..report.api import write_report

    res = write_report(judgment, ledger=ledger)
    if summary:
        summary = Path(summary)
        summary.parent.mkdir(parents=True, exist_ok=True)
        with summary.open("a", encoding="utf-8") as fh:
            fh.write(res.markdown.read_text("utf-8") + "\n")
        console.print(f"summary: {res.markdown} appended to {summary}", highlight=False, soft_wrap=True)
    if mlflow:
        from ..releases.tracking import log_gate

        logged = log_gate(judgment, [res.html, res.markdown], uri=mlflow_uri, experiment=experiment)
        console.print(
            f"mlflow: run {logged.run_id} in experiment {experiment!r} at {logged.tracking_uri} ({logged.params} params, {logged.metrics} metrics)",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def gate(
    run: str = RunArg,
    rubric: Path | None = RubricOpt,
    stage: str | None = StageOpt,
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict as JSON here"),
    runs_dir: Path = RunsDir,
    flag: bool = typer.Option(False, "--flag", help="first flag the run's differences into the review queue"),
    queue: Path | None = QueueOpt,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="every violation with its numbers, cases and diffs (default: one line per rule)"),
    ledger: Path | None = LedgerOpt,
    summary: Path | None = SummaryOpt,
    mlflow: bool = MlflowOpt,
    mlflow_uri: str | None = MlflowUriOpt,
    mlflow_experiment: str = MlflowExpOpt,
    record: bool = typer.Option(False, "--record", help="record a partial run's decisions in the ledger too (a partial run clears nothing by default)"),
) -> None:
    """Judge a run against a rubric: exit 0 pass, 1 regression, 2 cannot judge, 3 needs review, 4 bad
    input (a missing run, a bad rubric or stage). Each judged variant's decision is recorded in the
    release ledger, unless the run is partial (--limit, --scenarios, --variants)."""
    from ..judge import judge_run
    from ..report.terminal import judgment_view
    from ..run.store import RunStore

    try:
        judgment = judge_run(RunStore.find(runs_dir, run), rubric, stage, queue, flag=flag)
    except EvalsuiteError as exc:
        raise _cannot_judge(exc, stage, json_out) from None
    console.print(judgment_view(judgment, verbose=verbose))
    if json_out:
        write_verdict_json(judgment, json_out)
    try:
        _record(judgment, ledger, record)
        if summary or mlflow:
            _publish(judgment, ledger, summary, mlflow, mlflow_uri, mlflow_experiment)
    except EvalsuiteError as exc:  # the verdict stands, but CI must not take an unrecorded one for a pass
        print_error(exc)
        raise typer.Exit(int(ExitCode.CANNOT_JUDGE)) from None
    raise typer.Exit(judgment.exit_code)


@app.command()
@guarded()
def report(
    run: str = RunArg,
    rubric: Path | None = RubricOpt,
    stage: str | None = StageOpt,
    out: Path | None = typer.Option(None, help="output directory (default: reports/<run-id>/)"),
    runs_dir: Path = RunsDir,
    queue: Path | None = QueueOpt,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the gate's full evidence too"),
    ledger: Path | None = LedgerOpt,
) -> None:
    """Write reports/<run-id>/report.html (one self-contained page) and report.md for a run."""
    from ..judge import judge_run
    from ..report.api import write_report
    from ..report.terminal import judgment_view
    from ..run.store import RunStore

    judgment = judge_run(RunStore.find(runs_dir, run), rubric, stage, queue)
    res = write_report(judgment, out_dir=out, ledger=ledger)
    console.print(judgment_view(judgment, scenarios=res.data.scenarios, verbose=verbose))
    console.print(f"report: {res.html}", highlight=False, soft_wrap=True)
    console.print(f"summary: {res.markdown}", highlight=False, soft_wrap=True)


@app.command()
@guarded()
def demo(
    suite: Path | None = typer.Option(None, help="the demo suite (default: suites/demo.yaml here, else the one shipped with evalsuite)"),
    profile: str = typer.Option("quick", help="quick (a few cases per scenario) or full"),
    variants: str | None = typer.Option(None, help="comma-separated variant names"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the gate's full evidence (numbers, cases, diffs)"),
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict as JSON here"),
) -> None:
    """Run the demo suite on the embedded default model, print the verdict and write the HTML report."""
    from ..demo import DemoOptions, run_demo

    setup_logging(False)
    opts = DemoOptions(profile=profile, variants=variants.split(",") if variants else None, verbose=verbose)
    judgment = run_demo(suite, opts, console=console)
    if judgment is not None and json_out:
        write_verdict_json(judgment, json_out)
    raise typer.Exit(int(ExitCode.CANNOT_JUDGE) if judgment is None else judgment.exit_code)
