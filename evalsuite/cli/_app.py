"""The command line's shared pieces: the typer app, one console (and one for errors), logging, the
exit codes, and the one error boundary every command goes through."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from ..errors import EvalsuiteError, ValidationError
from ..states import ExitCode

if TYPE_CHECKING:
    from rich.table import Table


#: click's UsageError as typer raises it (typer >= 0.2x vendors click: find it from typer's own BadParameter)
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class _Group(TyperGroup):
    """The root command group: click's own usage errors (a bad option, a missing argument, a value
    outside its choices) exit with `ExitCode.USAGE` like every other "your input is wrong", never
    with click's 2, which is the gate's "cannot judge"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_help(self)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except _UsageError as exc:
            exc.exit_code = int(ExitCode.USAGE)  # type: ignore[attr-defined]
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:  # a subcommand's arguments are parsed here
            exc.exit_code = int(ExitCode.USAGE)  # type: ignore[attr-defined]
            raise


def _plain_help(cmd: Any) -> None:
    """Help as written: brackets are text (`pip install 'evalsuite[mlflow]'` kept its `[mlflow]` from
    rich's markup), and a flag shows no `<bool>` value it does not take."""
    from rich.markup import escape as _esc

    for sub in getattr(cmd, "commands", {}).values():
        _plain_help(sub)
    if cmd.help:
        cmd.help = _esc(cmd.help)
    for param in cmd.params:
        if getattr(param, "help", None):
            param.help = _esc(param.help)
        if getattr(param, "is_flag", False):
            param.display_type_rich = lambda ctx: None
    get_help_option = cmd.get_help_option

    def help_option(ctx: Any) -> Any:  # click adds --help when the help is rendered: a flag too
        opt = get_help_option(ctx)
        if opt is not None:
            opt.display_type_rich = lambda ctx: None
        return opt

    cmd.get_help_option = help_option


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_Group, help="evalsuite: did quality regress, where, and is it more than noise?")
# piped output (CI logs, files) gets wide tables instead of rich's 80-column default
console = Console() if sys.stdout.isatty() else Console(width=160)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=160)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        console.print(f"evalsuite {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print evalsuite's version (the one run signatures record) and exit"
    ),
) -> None:
    """evalsuite: did quality regress, where, and is it more than noise?"""


def new_table(title: str, **kwargs: Any) -> Table:
    """A rich Table, its module imported only by the commands that print one (start-up stays short)."""
    from rich.table import Table

    return Table(title=title, **kwargs)


def setup_logging(verbose: bool = False) -> None:
    """evalsuite's log lines on stderr through rich: its own from INFO, other libraries' from WARNING
    (their INFO lines, one per HTTP request or matplotlib's font cache, would bury evalsuite's);
    `verbose`: everything from DEBUG."""
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, show_time=False)],
        force=True,
    )
    logging.getLogger("evalsuite").setLevel(logging.DEBUG if verbose else logging.INFO)


def print_error(exc: BaseException) -> None:
    """How every command reports an EvalsuiteError: validation problems one per line, plain and
    unwrapped (editors and CI parse `file:line`), anything else as one `error:` line."""
    if isinstance(exc, ValidationError):
        for p in exc.problems:
            print(str(p), file=sys.stderr)
        err.print(f"[red]{len(exc.problems)} problem(s)[/red]")
    else:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)


P = ParamSpec("P")
R = TypeVar("R")


def guarded(code: ExitCode = ExitCode.USAGE) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """The error boundary of a command: an EvalsuiteError (bad input: a missing run or file, an
    invalid suite or rubric, an unknown name) is printed by `print_error` and ends the command with
    `code`; anything else is a bug and keeps its traceback (`main` exits with ExitCode.INTERNAL)."""

    def deco(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except EvalsuiteError as exc:
                print_error(exc)
                raise typer.Exit(int(code)) from None

        return wrapper

    return deco
