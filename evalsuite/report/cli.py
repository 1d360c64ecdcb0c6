"""The `report` command and the run half of `export` (registered in evalsuite/cli.py)."""

from __future__ import annotations

from pathlib import Path

import typer


def report_cmd(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"),
    rubric: Path | None = typer.Option(None, help="rubric file (default: the suite's, else rubrics/default.yaml)"),
    stage: str | None = typer.Option(None, help="dev, pilot or production (default: the suite's stage, else production)"),
    out: Path | None = typer.Option(None, help="output directory (default: reports/<run-id>/)"),
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the gate's full evidence too"),
) -> None:
    """Write reports/<run-id>/report.html (one self-contained page) and report.md for a run."""
    from ..cli import _fail, console
    from ..errors import EvalsuiteError
    from .api import write_report
    from .terminal import print_verdict

    try:
        res = write_report(run, rubric, stage, out_dir=out, runs_dir=runs_dir)
    except EvalsuiteError as exc:
        _fail(exc, 2)
    if res.data.verdict is not None:
        print_verdict(res.data.verdict, console, scenarios=res.data.scenarios, verbose=verbose)
    console.print(f"report: {res.html}", highlight=False, soft_wrap=True)
    console.print(f"summary: {res.markdown}", highlight=False, soft_wrap=True)


def is_run(paths: list[Path], runs_dir: Path) -> bool:
    """One argument naming a run (a directory holding signature.json, a run id, or 'last')."""
    if len(paths) != 1:
        return False
    p = paths[0]
    if (p / "signature.json").is_file() or (runs_dir / p / "signature.json").is_file():
        return True
    return str(p) == "last" and not p.exists()


def export_run_cmd(run: Path, out: Path | None, fmt: str | None, runs_dir: Path) -> str:
    """Export a run's frames; returns the message to print."""
    from .frames import export_run, resolve_store
    from .model import default_report_dir

    store = resolve_store(str(run), runs_dir)
    target = out if out is not None else default_report_dir(store) / "export"
    paths = export_run(store, target, fmt or "csv")
    return f"exported run {store.run_id} ({', '.join(p.name for p in paths)}) to {target}"


def export_cases_cmd(cases: list, out: Path, fmt: str | None) -> str:
    from .frames import export_cases

    export_cases(cases, out, fmt or out.suffix.lstrip("."))
    return f"exported {len(cases)} cases to {out}"
