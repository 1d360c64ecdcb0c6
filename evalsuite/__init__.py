"""evalsuite: did quality regress, where, and is it more than noise?

The public API, for notebooks, CI scripts and users (docs/api.md shows each in use)::

    suite = evalsuite.load_suite("suites/fake.yaml")        # load a suite
    result = evalsuite.run_suite(suite)                        # run it (generate, then score)
    store = evalsuite.open_run("last")                         # open a stored run
    judgment = evalsuite.judge_run(store)                      # judge it: the verdict
    flagged = evalsuite.flag_run(store)                        # flag its differences for review
    report = evalsuite.write_report(judgment)                  # report it (HTML and markdown)

Names are imported on first use (module `__getattr__`), so `import evalsuite` stays cheap and never
imports torch, numpy or a backend.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: the one list of public names: name -> "module:attribute" it lives in (`__init__.pyi` gives mypy and
#: editors their real types; tests/test_api_types.py checks it names the same objects)
_EXPORTS: dict[str, str] = {
    "load_suite": "evalsuite.cases.suite:load_suite",
    "Suite": "evalsuite.cases.suite:Suite",
    "run_suite": "evalsuite.scoring.pipeline:run_suite",
    "RunOptions": "evalsuite.run.runner:RunOptions",
    "RunResult": "evalsuite.run.runner:RunResult",
    "open_run": "evalsuite.run:open_run",
    "RunStore": "evalsuite.run.store:RunStore",
    "judge_run": "evalsuite.judge:judge_run",
    "Judgment": "evalsuite.verdict.outcome:Judgment",
    "Verdict": "evalsuite.verdict.outcome:Verdict",
    "flag_run": "evalsuite.review.api:flag_run",
    "FlagResult": "evalsuite.review.api:FlagResult",
    "write_report": "evalsuite.report.api:write_report",
    "ReportResult": "evalsuite.report.api:ReportResult",
    "ExitCode": "evalsuite.states:ExitCode",
    "EvalsuiteError": "evalsuite.errors:EvalsuiteError",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:  # the types are in __init__.pyi
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'evalsuite' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
