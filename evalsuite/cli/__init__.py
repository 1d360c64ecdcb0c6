"""The command line: thin typer commands over the library, one console, one error boundary.

Commands by concern: `cases` (validate, import, export, list), `importing` (import lm-eval, import inspect), `running` (run, score, compare,
summary), `scaffolding` (init), `judging` (gate, report, demo: each renders evalsuite.judge.judge_run's Judgment) and
`review` (the review queue), `installing` (models install-embedded, notebook), `envs` (env: variants' own environments), `releases` (releases, promote, rollback: the release ledger). Exit codes: `_app.ExitCode`.
"""

from __future__ import annotations

import sys
from typing import Any

from . import cases, envs, importing, installing, judging, releases, review, running, scaffolding, traffic  # noqa: F401 - each registers its commands on `app`
from ._app import ExitCode, app, console, err

__all__ = ["ExitCode", "app", "console", "err", "main"]

#: `evalsuite --help` by workflow, in the order a newcomer meets them (a command not named here stays under "Commands")
WORKFLOW = {
    "1. cases": ("init", "validate", "list", "export", "cases"),
    "2. run": ("run", "score", "compare", "summary", "demo"),
    "3. judge": ("gate", "report"),
    "4. review": ("review", "notebook"),
    "5. releases": ("releases", "promote", "rollback", "recheck"),
    "6. import and setup": ("import", "models", "env"),
}


def _group_help() -> None:
    panel = {name: title for title, names in WORKFLOW.items() for name in names}
    infos: list[Any] = [*app.registered_commands, *app.registered_groups]  # typer's CommandInfo and TyperInfo alike
    for info in infos:
        name = info.name or (info.callback.__name__ if info.callback else "")
        if name in panel:
            info.rich_help_panel = panel[name]
    order = {name: i for i, name in enumerate(n for names in WORKFLOW.values() for n in names)}
    app.registered_commands.sort(key=lambda c: order.get(c.name or (c.callback.__name__ if c.callback else ""), len(order)))


_group_help()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted: finished generations are kept; continue with --resume last")
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception:  # a bug: its traceback, and a code of its own (never a verdict's)
        import traceback

        traceback.print_exc()
        err.print("internal error: this is a bug in evalsuite; please report it with the traceback above")
        sys.exit(int(ExitCode.INTERNAL))


if __name__ == "__main__":
    main()
