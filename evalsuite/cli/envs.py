"""`evalsuite env list | build | remove`: the environments variants run in (`environment:` in a
suite; evalsuite.backends.envs), built once and kept under $EVALSUITE_ENVS_DIR (default
~/.cache/evalsuite/envs)."""

from __future__ import annotations

import time

import typer
from rich.markup import escape

from ._app import ExitCode, app, console, err, guarded, new_table, setup_logging

env_app = typer.Typer(no_args_is_help=True, help="Environments variants run in (`environment:` in a suite).")
app.add_typer(env_app, name="env", help="Variants' own environments (other library versions): list, build, remove.")


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


@env_app.command("list")
@guarded()
def env_list() -> None:
    """Each environment: its digest, requirements, Python, size on disk and when it was built."""
    from ..backends.envs import envs_root, list_envs

    found = list_envs()
    if not found:
        console.print(f"no environments under {escape(str(envs_root()))}", highlight=False)
        return
    t = new_table(f"{len(found)} environment(s) under {envs_root()}", title_justify="left")
    for col in ("digest", "requirements", "python", "size", "created", "libraries"):
        t.add_column(col, overflow="fold")
    for e in found:
        libs = ", ".join(f"{k} {v}" for k, v in (e.meta.get("libraries") or {}).items() if v)
        created = str(e.meta.get("created") or "").replace("T", " ")[:19] if e.complete else "incomplete (a build that did not finish)"
        t.add_row(e.digest, " ".join(e.requirements) or "-", str(e.meta.get("python") or "-"), _size(e.size_bytes()), created, libs or "-")
    console.print(t)


@env_app.command("build")
@guarded()
def env_build(what: list[str] = typer.Argument(..., help="a suite file (its variants' environments) or pip requirements, e.g. transformers==5.25.0")) -> None:
    """Build environments now (a run builds what it needs by itself): pip resolves evalsuite's
    dependencies, torch and the requirements together; a built one is kept and reused."""
    from ..backends.envs import built, ensure_env, specs_to_build

    setup_logging()
    for spec in specs_to_build(what):
        already = built(spec.digest).complete
        t0 = time.perf_counter()
        env = ensure_env(spec, announce=lambda msg: console.print(escape(msg), highlight=False, soft_wrap=True))
        libs = ", ".join(f"{k} {v}" for k, v in (env.meta.get("libraries") or {}).items() if v)
        verb = "already built" if already else f"built in {time.perf_counter() - t0:.0f}s"
        console.print(f"{env.digest}: {verb}, {_size(env.size_bytes())} ({escape(libs)}): {escape(str(env.path))}", highlight=False, soft_wrap=True)


@env_app.command("remove")
@guarded()
def env_remove(
    digest: str = typer.Argument(None, help="the environment's digest (or a unique prefix of it), as `evalsuite env list` shows it"),
    remove_all: bool = typer.Option(False, "--all", help="remove every environment"),
) -> None:
    """Delete an environment (a later run that needs it builds it again)."""
    from ..backends.envs import find_env, list_envs, remove_env

    if (digest is None) == (not remove_all):
        err.print("[red]error:[/red] give a digest or --all (not both)", highlight=False)
        raise typer.Exit(int(ExitCode.USAGE))
    targets = list_envs() if remove_all else [find_env(digest)]
    for e in targets:
        size = e.size_bytes()
        remove_env(e)
        console.print(f"removed {e.digest} ({' '.join(e.requirements) or 'incomplete'}, {_size(size)})", highlight=False, soft_wrap=True)
    if not targets:
        console.print("no environments to remove", highlight=False)
