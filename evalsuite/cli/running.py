"""Commands that make and read runs: run (fixed-n or adaptive), score, compare, summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer
from rich.markup import escape

from ..errors import UnknownNameError
from ._app import ExitCode, app, console, guarded, new_table, print_error, setup_logging

RunsDir = typer.Option(Path("reports/runs"), help="where runs live")


@app.command()
@guarded()
def run(
    suite: Path = typer.Argument(..., help="suite file"),
    variants: str | None = typer.Option(None, help="comma-separated variant names (the baseline always runs)"),
    scenarios: str | None = typer.Option(None, help="comma-separated scenarios: kb_qa, code, brand"),
    limit: int | None = typer.Option(None, min=0, help="at most N cases per scenario"),
    resume: str | None = typer.Option(None, help="run id, run directory, or 'last': continue that run"),
    no_score: bool = typer.Option(False, "--no-score", help="generate only; score later with `evalsuite score`"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    adaptive: bool = typer.Option(False, "--adaptive", help="stop each variant once its gate verdict is statistically decided (docs/thresholds.md)"),
    stage: str | None = typer.Option(
        None, "--stage", help="with --adaptive: the rubric stage whose block rules decide (default: the suite's stage, else production)"
    ),
    seed: int = typer.Option(0, "--seed", help="with --adaptive: seeds the case order"),
    until: str = typer.Option(
        "verdict", "--until", help="with --adaptive: stop a variant once its verdict is decided (verdict) or once every block rule is (rules)"
    ),
    tolerance: float = typer.Option(
        0.10,
        "--tolerance",
        help="with --adaptive: an early pass rules out a drop of max(rule threshold, this) over a check's cases; "
        "lower catches smaller drops and costs more cases (docs/thresholds.md)",
    ),
) -> None:
    """Generate (or resume) a run of a suite, then score it."""
    from ..cases.suite import load_suite
    from ..run.runner import RunOptions, select_cases
    from ..verdict.checkup import check_cases

    setup_logging(verbose)
    s = load_suite(suite)
    checked = check_cases(s)  # a missing case-set path or a selector that selects nothing, at the suite's file:line
    opts = RunOptions(
        variants=variants.split(",") if variants else None,
        scenarios=scenarios.split(",") if scenarios else None,
        limit=limit,
        resume=resume,
        progress=not quiet,
        score=not no_score,
    )
    if adaptive:
        res = _run_adaptive(s, opts, stage, seed, until, tolerance)
    else:
        from dataclasses import replace

        from ..scoring.pipeline import run_suite

        # the cases the check just read are the run's: the case sets are read once (a warm re-run's cost)
        res = run_suite(s, replace(opts, cases=select_cases(s, opts.scenarios, opts.limit, loaded=checked)))
    print_variant_table(res.variants, title=f"run {res.store.run_id}", engines=run_engines(res.store))
    console.print(f"generated {res.generated}, from cache {res.cached}, already in run {res.skipped}, errors {res.errors}")
    console.print(f"run directory: {res.run_dir}")


def _run_adaptive(suite, opts, stage: str | None, seed: int, until: str, tolerance: float):
    """`run --adaptive`: where each variant stopped, then the run's verdict through the one judging path."""
    from ..adaptive.checks import AdaptiveSettings
    from ..adaptive.driver import STATE_FILE, adaptive_summary, run_adaptive
    from ..cases.options import STAGES
    from ..judge import judge_run
    from ..report.terminal import judgment_view
    from ..verdict.rubric import resolve_stage

    stage_name, _ = resolve_stage(stage, {"stage": suite.stage})
    if stage_name not in STAGES:  # before any generation: a typo leaves no half-made run behind
        raise UnknownNameError("stage", stage_name, list(STAGES))
    res = run_adaptive(suite, opts, AdaptiveSettings(stage=stage_name, seed=seed, until=until, tolerance=tolerance))
    for row in adaptive_summary(res):
        color = {"pass": "green", "fail": "red"}.get(row["verdict"], "yellow")
        share = 100 * row["generated"] / max(row["total"], 1)
        console.print(
            f"[bold]{escape(row['variant'])}[/bold]: adaptive verdict [{color}]{row['verdict']}[/{color}] (stage {stage_name}) after {row['generated']} of "
            f"{row['total']} cases generated ({share:.0f}%); {row['decided_checks']} block check(s) decided",
            highlight=False,
        )
        for f in row["failed"]:
            console.print(f"  [red]{escape(f['rule'])}[/red] {escape(f['scenario'])}/{escape(f['metric'])}: {escape(f['reason'])}", highlight=False)
    console.print(judgment_view(judge_run(res.store, stage=stage_name)))
    console.print(f"sequential decisions: {res.store.dir / STATE_FILE}; `evalsuite gate {res.store.run_id}` judges the run the same way", highlight=False)
    return res.run


def run_engines(store) -> dict[str, str]:
    """Variant -> its engine, version and settings in words: the report's engine column (the same function)."""
    from ..models.engines import variant_engines

    return variant_engines(list(store.suite.get("variants") or []), store.signature)


def print_variant_table(summaries: dict, title: str = "", engines: dict[str, str] | None = None) -> None:
    table = new_table(title)
    for col in ("variant", "engine", "changes", "generations", "errors", "timeouts", "median latency s", "tokens/s", "peak MB", "compile s"):
        table.add_column(col)

    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    for name, s in summaries.items():
        table.add_row(
            name,
            (engines or {}).get(name, "-"),
            ",".join(s.get("changes", [])) or "(baseline)",
            str(s.get("generations")),
            str(s.get("errors")),
            str(s.get("timeouts")),
            f(s.get("latency_median_s")),
            f(s.get("tokens_per_s_median"), "{:.1f}"),
            f(s.get("peak_memory_mb"), "{:.0f}"),
            f(s.get("compile_s"), "{:.1f}"),
        )
    console.print(table)


@app.command()
@guarded()
def score(run: str = typer.Argument(..., help="run id, run directory, or 'last'"), runs_dir: Path = RunsDir) -> None:
    """Recompute every score of a stored run from its outputs (no model is loaded)."""
    from ..run.store import RunStore
    from ..scoring.run import score_run

    setup_logging(False)
    store = RunStore.find(runs_dir, run)
    records = score_run(store)
    metrics = Counter(r.metric for r in records)
    console.print(f"{len(records)} scores over {len(metrics)} metrics written to {store.dir / store.SCORES}")


@app.command()
@guarded()
def compare(run: str = typer.Argument(..., help="run id, run directory, or 'last'"), runs_dir: Path = RunsDir) -> None:
    """Paired comparison of every variant with the baseline, per scenario and metric."""
    from ..report.terminal import comparison_view
    from ..run.store import RunStore
    from ..verdict.compare import compare_run

    cmp = compare_run(RunStore.find(runs_dir, run))
    console.print(comparison_view(cmp))
    raise typer.Exit(int(ExitCode.CANNOT_JUDGE if cmp.problems else ExitCode.OK))


@app.command()
@guarded()
def summary(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"),
    variant: str | None = typer.Option(None, help="variant (default: the baseline)"),
    markdown: bool = typer.Option(False, "--markdown", help="print a markdown table"),
    runs_dir: Path = RunsDir,
) -> None:
    """Pass rates of one variant per scenario, kind and metric (the floor of a model)."""
    from ..run.store import RunStore
    from ..verdict.summary import markdown_table, pass_rates

    store = RunStore.find(runs_dir, run)
    scores = store.scores()
    known = sorted({r.variant for r in scores} | set(store.signature.get("variants") or {}))
    if variant is not None and variant not in known:
        print_error(UnknownNameError("variant", variant, known))
        raise typer.Exit(int(ExitCode.USAGE))
    rows = pass_rates(scores, variant or store.signature.get("baseline") or "")
    if markdown:
        print(markdown_table(rows))
        return
    table = new_table(f"{variant or 'baseline'} pass rates, run {store.run_id}")
    for col in ("scenario", "kind", "metric", "cases", "passed", "rate"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["scenario"], r["kind"], r["metric"], str(r["cases"]), str(r["passed"]), f"{100 * r['rate']:.0f}%")
    console.print(table)
