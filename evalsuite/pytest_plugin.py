"""pytest plugin (entry point `pytest11`): gate variants from pytest, one test item per (variant, rule), named `rule[variant]`.

    pytest --evalsuite-suite suites/fake.yaml [--evalsuite-run last] [--evalsuite-stage production]
           [--evalsuite-rubric rubrics/default.yaml] [--junitxml out.xml]
    pytest --evalsuite-suite reports/runs/<run-id>/suite.yaml      # a stored run as it is (an imported run: docs/import.md)

Suite files named `evalsuite_*.yaml` or `*.evalsuite.yaml` are collected directly when pytest walks
a directory. Items are made from the suite and the rubric alone (cheap); the run (or, without
`--evalsuite-run`, a fresh run of the suite) is compared and gated once, on the first item that
needs it, and the verdict is kept in `config.stash`. A failing item's report lists the offending
cases and a short diff of the outputs; a warn rule passes with a pytest warning; a rule that does
not apply to the run is skipped.
"""

from __future__ import annotations

import fnmatch
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .verdict.outcome import RuleResult

_verdicts_key = pytest.StashKey[dict]()
_PATTERNS = ("evalsuite_*.yaml", "evalsuite_*.yml", "*.evalsuite.yaml", "*.evalsuite.yml")


class EvalsuiteWarning(UserWarning):
    """A warn-severity rule was violated (reported, never failing)."""


class RuleFailed(Exception):
    """A block rule failed for a variant; carries the rule result for `repr_failure`."""

    def __init__(self, result: RuleResult):
        self.result = result
        super().__init__(result.rule)


class CannotJudge(Exception):
    """The run cannot be judged (bad rubric, missing data, incomplete run)."""


def pytest_addoption(parser):
    group = parser.getgroup("evalsuite", "evalsuite quality gate")
    group.addoption("--evalsuite-suite", action="store", default=None, metavar="SUITE", help="suite file to gate: one test per (variant, rubric rule)")
    group.addoption(
        "--evalsuite-run", action="store", default=None, metavar="RUN", help="judge this stored run (id, directory or 'last') instead of running the suite"
    )
    group.addoption(
        "--evalsuite-stage",
        action="store",
        default=None,
        choices=("dev", "pilot", "production"),
        help="rubric stage (default: the suite's stage, else production)",
    )
    group.addoption("--evalsuite-rubric", action="store", default=None, metavar="FILE", help="rubric file (default: the suite's, else rubrics/default.yaml)")
    group.addoption("--evalsuite-runs-dir", action="store", default=None, metavar="DIR", help="where runs live (default: the suite's output_dir/runs)")


def pytest_configure(config):
    config.stash[_verdicts_key] = {}
    config.addinivalue_line("markers", "evalsuite: a quality-gate item made by the evalsuite plugin")


def pytest_report_header(config):
    """`evalsuite: suites/x.yaml, stage production (the suite's stage:)`: which stage the items judge."""
    suite = config.getoption("--evalsuite-suite")
    if not suite:
        return None
    from .cases.suite import load_suite
    from .errors import EvalsuiteError
    from .verdict.rubric import resolve_stage, stage_reason

    try:
        stage, source = resolve_stage(config.getoption("--evalsuite-stage"), {"stage": load_suite(suite).stage})
    except EvalsuiteError:
        return None  # the setup item reports it
    return f"evalsuite: {suite}, stage {stage} ({stage_reason(source)})"


def pytest_collect_file(file_path: Path, parent):
    if any(fnmatch.fnmatch(file_path.name, p) for p in _PATTERNS):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(session, config, items):
    suite = config.getoption("--evalsuite-suite")
    if not suite:
        return
    path = Path(suite)
    if not path.is_absolute():
        path = Path(config.invocation_params.dir) / path
    if any(isinstance(i, GateItem) and i.suite_path == path.resolve() for i in items):
        return  # already collected as a suite file
    collector = SuiteFile.from_parent(session, path=path)
    items.extend(collector.collect())


class SuiteFile(pytest.File):
    """A suite file: its items are (variant, rule) pairs of the suite's rubric stage."""

    def collect(self):
        from .errors import EvalsuiteError
        from .verdict.rubric import load_rubric

        cfg = self.config
        try:
            variants, rubric_path, stage, runs_dir = _gate_setup(self.path, cfg)
            sr = load_rubric(rubric_path).for_stage(stage)
        except EvalsuiteError as exc:
            yield SetupErrorItem.from_parent(self, name="evalsuite-setup", message=str(exc))
            return
        if not variants:
            yield SetupErrorItem.from_parent(self, name="evalsuite-setup", message=f"{self.path}: no variant to judge besides the baseline")
            return
        for v in variants:
            for rule in sr.rules:
                yield GateItem.from_parent(
                    self,
                    name=f"{rule.name}[{v}]",
                    variant=v,
                    rule=rule.name,
                    severity=rule.severity,
                    suite_path=self.path.resolve(),
                    rubric_path=str(rubric_path),
                    stage=stage,
                )
        from .review.api import default_queue_path

        if default_queue_path(runs_dir=runs_dir).is_file():  # reviewers' verdicts: one item per variant
            for v in variants:
                yield GateItem.from_parent(
                    self,
                    name=f"human-review[{v}]",
                    variant=v,
                    rule="human-review",
                    severity="block",
                    suite_path=self.path.resolve(),
                    rubric_path=str(rubric_path),
                    stage=stage,
                )


def _stored_run(path: Path):
    """The run whose own suite.yaml `path` is (an imported run has no suite file of its own), or None."""
    from .run.store import RunStore

    return RunStore(path.parent) if path.name == RunStore.SUITE and (path.parent / RunStore.SIGNATURE).is_file() else None


def _gate_setup(path: Path, cfg) -> tuple[list[str], Path, str, Path]:
    """(variants to judge, rubric file, stage, runs folder) of a suite file, or of a stored run's suite.yaml."""
    from .cases.suite import load_suite
    from .verdict.rubric import resolve_rubric_path, resolve_stage

    store = _stored_run(path)
    if store is not None:
        info = store.suite or {}
        variants = [v["name"] for v in info.get("variants") or [] if not v.get("baseline") and not v.get("noise")]
        runs_dir = Path(cfg.getoption("--evalsuite-runs-dir") or store.dir.parent)
    else:
        suite = load_suite(path)
        info = {"rubric": suite.rubric, "stage": suite.stage}
        variants = [v.name for v in suite.variants if not v.baseline and not v.noise]
        runs_dir = Path(cfg.getoption("--evalsuite-runs-dir") or Path(suite.output_dir) / "runs")
    rubric_path = resolve_rubric_path(cfg.getoption("--evalsuite-rubric"), info)
    stage, _ = resolve_stage(cfg.getoption("--evalsuite-stage"), info)  # the one stage rule
    return variants, rubric_path, stage, runs_dir


class SetupErrorItem(pytest.Item):
    """Reports a suite or rubric that cannot be loaded as one failing item."""

    def __init__(self, *, message: str, **kw):
        super().__init__(**kw)
        self.message = message

    def runtest(self):
        raise CannotJudge(self.message)

    def repr_failure(self, excinfo, style=None):
        return f"evalsuite cannot judge: {excinfo.value}"

    def reportinfo(self):
        return self.path, 0, f"evalsuite: {self.name}"


def _verdict_for(item: GateItem):
    """Run (or load) and gate once per (suite, run, rubric, stage); cached in config.stash."""
    cfg = item.config
    key = (str(item.suite_path), cfg.getoption("--evalsuite-run"), item.rubric_path, item.stage)
    cache = cfg.stash[_verdicts_key]
    if key in cache:
        return cache[key]
    from .cases.suite import load_suite
    from .errors import EvalsuiteError
    from .judge import judge_run
    from .run.store import RunStore

    try:
        stored = _stored_run(Path(item.suite_path))
        if stored is not None and not cfg.getoption("--evalsuite-run"):  # a stored run's own suite.yaml: judge that run
            cache[key] = judge_run(stored, item.rubric_path, item.stage).verdict
            return cache[key]
        suite = load_suite(item.suite_path)
        runs_dir = cfg.getoption("--evalsuite-runs-dir") or str(Path(suite.output_dir) / "runs")
        run = cfg.getoption("--evalsuite-run")
        if run:
            store = RunStore.find(runs_dir, run)
        else:
            from .run.runner import RunOptions
            from .scoring.pipeline import run_suite

            store = run_suite(suite, RunOptions(progress=False, runs_dir=runs_dir)).store
        cache[key] = judge_run(store, item.rubric_path, item.stage).verdict
    except EvalsuiteError as exc:
        cache[key] = CannotJudge(str(exc))
    return cache[key]


class GateItem(pytest.Item):
    """One rubric rule for one variant."""

    def __init__(self, *, variant: str, rule: str, severity: str, suite_path: Path, rubric_path: str, stage: str, **kw):
        super().__init__(**kw)
        self.variant, self.rule, self.severity = variant, rule, severity
        self.suite_path, self.rubric_path, self.stage = suite_path, rubric_path, stage
        self.add_marker("evalsuite")
        self.user_properties.append(("evalsuite_rule", rule))
        self.user_properties.append(("evalsuite_variant", variant))
        self.user_properties.append(("evalsuite_stage", stage))

    def runtest(self):
        verdict = _verdict_for(self)
        if isinstance(verdict, CannotJudge):
            raise verdict
        self.user_properties.append(("evalsuite_verdict", verdict.status))  # the run's verdict, as `evalsuite gate` says it
        if not verdict.judgeable:
            raise CannotJudge("; ".join(verdict.problems))
        res = verdict.result(self.variant, self.rule)
        if res is None:
            raise CannotJudge(f"no result for variant {self.variant!r} and rule {self.rule!r} (variant not in the run?)")
        self.user_properties.append(("evalsuite_status", res.status))
        if res.rule == "human-review" and verdict.needs_review:
            warnings.warn(
                EvalsuiteWarning(f"needs review: {verdict.review.get('open')} flagged output(s) await review (max_open {verdict.review.get('max_open')})"),
                stacklevel=2,
            )
        if res.status == "fail":
            raise RuleFailed(res)
        if res.status == "missing":
            raise CannotJudge(res.note)
        if res.status == "skip":
            raise pytest.skip.Exception(res.note or "rule does not apply to this run", _use_item_location=True)
        if res.status == "warn":
            from .verdict.outcome import violation_text

            for v in res.violations:
                warnings.warn(EvalsuiteWarning(violation_text(v)), stacklevel=2)

    def repr_failure(self, excinfo, style=None):
        from .verdict.outcome import violation_text

        if isinstance(excinfo.value, RuleFailed):
            res = excinfo.value.result
            head = f"evalsuite rule {res.rule!r} failed for variant {res.variant!r} (stage {self.stage}, rubric {self.rubric_path})"
            return "\n".join([head] + [violation_text(v) for v in res.violations])
        if isinstance(excinfo.value, CannotJudge):
            return f"evalsuite cannot judge: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, f"evalsuite: {self.variant} :: {self.rule}"
