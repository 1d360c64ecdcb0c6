"""`evalsuite import lm-eval` and `evalsuite import inspect`: other tools' per-sample logs as a run
(evalsuite.importers; docs/import.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ._app import console, guarded
from .cases import import_app

NamesOpt = typer.Option(None, "--names", help="names of the baseline and each variant, comma-separated, in order (default: from the models)")
NoiseOpt = typer.Option(None, "--noise", help="a rerun of the baseline (repeatable): its flips are the noise floor")
EpochsOpt = typer.Option("paired", "--epochs", help="several epochs: paired (one case per document and epoch) or aggregate (epochs are samples of one case)")
RunsDirOpt = typer.Option(Path("reports/runs"), "--runs-dir", help="where runs live")
OwnOpt = typer.Option(True, "--own-scorers/--no-own-scorers", help="also score the responses with evalsuite's scorers (drift against the baseline)")


def _options(names: str | None, runs_dir: Path, epochs: str, own: bool):
    from ..errors import EvalsuiteError
    from ..importers import ImportOptions

    if epochs not in ("paired", "aggregate"):
        raise EvalsuiteError(f"--epochs must be paired or aggregate, not {epochs!r}")
    return ImportOptions(names=names.split(",") if names else None, runs_dir=runs_dir, epochs=epochs, own_scorers=own)  # type: ignore[arg-type]


def _report(res) -> None:
    noise = f", noise run(s) {', '.join(res.noise_runs)}" if res.noise_runs else ""
    console.print(
        f"imported run {res.store.run_id}: baseline {res.baseline}, variant(s) {', '.join(res.variants)}{noise}; "
        f"{res.cases} cases, {res.generations} responses, {res.scores} scores",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"rubric: {res.rubric} (each task's primary metric)", highlight=False, soft_wrap=True)
    console.print(
        f"next: evalsuite gate {res.store.dir}   evalsuite report {res.store.dir}   evalsuite review flag {res.store.dir}", highlight=False, soft_wrap=True
    )


def _import_command(name: str, summary: str, base_help: str, variants_help: str, importer: Callable[[], Callable[..., Any]]) -> None:
    """Register `evalsuite import NAME`: every log importer takes the same arguments and options and
    differs only in what it reads (`importer()`: its function in evalsuite.importers, imported when the
    command runs, not when the CLI starts)."""

    @import_app.command(name, help=summary)
    @guarded()
    def command(
        base: Path = typer.Argument(..., help=base_help),
        variants: list[Path] = typer.Argument(..., help=variants_help),
        names: str | None = NamesOpt,
        noise: list[Path] | None = NoiseOpt,
        epochs: str = EpochsOpt,
        runs_dir: Path = RunsDirOpt,
        own_scorers: bool = OwnOpt,
    ) -> None:
        _report(importer()(base, variants, noise=noise or [], options=_options(names, runs_dir, epochs, own_scorers)))


def _lm_eval() -> Callable[..., Any]:
    from ..importers import import_lm_eval

    return import_lm_eval


def _inspect() -> Callable[..., Any]:
    from ..importers import import_inspect

    return import_inspect


_import_command(
    "lm-eval",
    "Import lm-evaluation-harness --log_samples output as a run: cases are task/doc_id, variants the models.",
    "the baseline model's lm_eval --output_path (run with --log_samples)",
    "each variant's lm_eval --output_path",
    _lm_eval,
)
_import_command(
    "inspect",
    "Import Inspect eval logs as a run: cases are task/sample id (and epoch), variants the models.",
    "the baseline model's Inspect log (.eval or .json)",
    "each variant's Inspect log of the same task",
    _inspect,
)
