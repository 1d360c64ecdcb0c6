"""Commands that judge a run: gate, report, demo. Each calls `evalsuite.judge.judge_run` (directly or
through the demo) and renders its Judgment; none assembles a verdict of its own."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import EvalsuiteError
from ..yamlio import atomic_write_text
from ._app import ExitCode, app, console, guarded, print_error, setup_logging

RunArg = typer.Argument(..., help="run id, run directory, or 'last'")
RubricOpt = typer.Option(None, help="rubric file (default: the suite's, else rubrics/default.yaml)")
StageOpt = typer.Option(None, help="dev, pilot or production (default: the suite's stage, else production)")
RunsDir = typer.Option(Path("reports/runs"), help="where runs live")
QueueOpt = typer.Option(None, "--queue", help="review queue (default: reports/review.sqlite beside the runs); its verdicts count")


def write_verdict_json(judgment, path: Path) -> None:
    """The verdict as JSON, with the stage it was judged for and why that one."""
    doc = {**judgment.verdict.to_dict(), "stage_source": judgment.stage_source}
    atomic_write_text(Path(path), json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")


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
) -> None:
    """Judge a run against a rubric: exit 0 pass, 1 regression, 2 cannot judge, 3 needs review."""
    from ..judge import judge_run
    from ..report.terminal import judgment_view
    from ..run.store import RunStore

    try:
        judgment = judge_run(RunStore.find(runs_dir, run), rubric, stage, queue, flag=flag)
    except EvalsuiteError as exc:
        print_error(exc)
        if json_out:  # CI reads the file: it says why, too
            doc = {
                "passed": False,
                "judgeable": False,
                "exit_code": int(ExitCode.CANNOT_JUDGE),
                "status": "cannot judge",
                "stage": stage,
                "problems": [str(exc)],
            }
            atomic_write_text(json_out, json.dumps(doc, indent=2) + "\n")
        raise typer.Exit(int(ExitCode.CANNOT_JUDGE)) from None
    console.print(judgment_view(judgment, verbose=verbose))
    if json_out:
        write_verdict_json(judgment, json_out)
    raise typer.Exit(judgment.exit_code)


@app.command()
@guarded(ExitCode.CANNOT_JUDGE)
def report(
    run: str = RunArg,
    rubric: Path | None = RubricOpt,
    stage: str | None = StageOpt,
    out: Path | None = typer.Option(None, help="output directory (default: reports/<run-id>/)"),
    runs_dir: Path = RunsDir,
    queue: Path | None = QueueOpt,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the gate's full evidence too"),
) -> None:
    """Write reports/<run-id>/report.html (one self-contained page) and report.md for a run."""
    from ..judge import judge_run
    from ..report.api import write_report
    from ..report.terminal import judgment_view
    from ..run.store import RunStore

    judgment = judge_run(RunStore.find(runs_dir, run), rubric, stage, queue)
    res = write_report(judgment, out_dir=out)
    console.print(judgment_view(judgment, scenarios=res.data.scenarios, verbose=verbose))
    console.print(f"report: {res.html}", highlight=False, soft_wrap=True)
    console.print(f"summary: {res.markdown}", highlight=False, soft_wrap=True)


@app.command()
@guarded()
def demo(
    suite: Path = typer.Option(Path("suites/demo.yaml"), help="the demo suite"),
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
