"""The command line: thin typer commands over the library, one console, one error boundary.

Commands by concern: `cases` (validate, import, export, list), `importing` (import lm-eval, import inspect), `running` (run, score, compare,
summary), `scaffolding` (init), `judging` (gate, report, demo: each renders evalsuite.judge.judge_run's Judgment) and
`review` (the review queue), `installing` (models install-embedded, notebook), `releases` (releases, promote, rollback: the release ledger). Exit codes: `_app.ExitCode`.
"""

from __future__ import annotations

import sys

from . import cases, importing, installing, judging, releases, review, running, scaffolding, traffic  # noqa: F401 - each registers its commands on `app`
from ._app import ExitCode, app, console, err

__all__ = ["ExitCode", "app", "console", "err", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted: finished generations are kept; continue with --resume last")
        sys.exit(int(ExitCode.INTERRUPTED))


if __name__ == "__main__":
    main()
