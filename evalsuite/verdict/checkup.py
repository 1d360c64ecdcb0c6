"""`evalsuite validate` as the promise that `run` and `gate` will start (issue 38, point 2).

Beyond what the suite loader checks, a suite's check resolves each case-set path, counts what each
selector selects (tags and ids that select no case are problems), checks its variants' quantization
methods, loads its rubric and checks every metric rule against the metrics that the scorers of the
selected scenarios produce. Every problem names the file, its line and the field, with close matches.
A rubric file is recognised as a rubric and checked on its own.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from ..cases.caseset import Case
from ..cases.suite import Suite, load_suite
from ..errors import EvalsuiteError, Problem, ValidationError, suggest
from ..yamlio import LineMap, load_yaml
from .gate import scorer_metrics
from .rubric import MetricRule, Rubric, RubricError, load_rubric, resolve_rubric_path

__all__ = ["SuiteCheck", "check_cases", "check_rubric", "check_suite", "is_rubric_file"]


@dataclass(frozen=True, kw_only=True)
class SuiteCheck:
    """A suite that will start: its cases as `run` selects them, and the rubric `gate` will use."""

    suite: Suite
    cases: tuple[Case, ...]
    rubric: Rubric
    rubric_path: str


def is_rubric_file(path: str | Path) -> bool:
    """A YAML file whose top level lists `rules:` and no `cases:`/`variants:` (a rubric)."""
    p = Path(path)
    if not p.is_file() or p.suffix not in (".yaml", ".yml"):
        return False
    try:
        data, _ = load_yaml(p)
    except EvalsuiteError:
        return False
    return isinstance(data, dict) and "rules" in data and not {"cases", "variants"} & set(data)


def check_rubric(path: str | Path) -> Rubric:
    """Load a rubric file; raise ValidationError naming every problem (file:line: rule: field: message)."""
    try:
        return load_rubric(path)
    except RubricError as exc:
        raise ValidationError([_problem(str(path), p) for p in exc.problems]) from None


def _problem(file: str, text: str) -> Problem:
    """A rubric's `file:line: rule r: field: message` line as a Problem (printed as it was)."""
    head, _, rest = text.partition(": ")
    where, _, line = head.rpartition(":")
    if where and line.isdigit():
        return Problem(file=where, line=int(line), case_id=None, field="rubric", message=rest)
    return Problem(file=file, line=None, case_id=None, field="rubric", message=text)


def check_suite(path: str | Path) -> SuiteCheck:
    """Everything `run` and `gate` would refuse, found now; raise ValidationError naming every problem."""
    suite = load_suite(path)
    _, lines = load_yaml(path)
    problems: list[Problem] = []
    cases = suite.load_cases(problems=problems)
    problems += _quantization_problems(suite, lines)
    rubric = None
    try:
        rubric_path = str(resolve_rubric_path(None, {"rubric": suite.rubric}))
        rubric = check_rubric(rubric_path)
    except RubricError as exc:  # a shipped: name that is not shipped
        problems += [_problem(suite.path, p) for p in exc.problems]
    except ValidationError as exc:
        problems += exc.problems
    if rubric is not None:
        problems += _rule_problems(rubric, {c.scenario for c in cases})
    if problems:
        raise ValidationError(problems)
    assert rubric is not None
    return SuiteCheck(suite=suite, cases=tuple(cases), rubric=rubric, rubric_path=rubric_path)


def check_cases(suite: Suite) -> list[Case]:
    """The suite's cases as `run` selects them; a case-set path that does not exist or a selector that
    selects nothing raises ValidationError at the suite's file:line (what `run` checks before it starts)."""
    problems: list[Problem] = []
    cases = suite.load_cases(problems=problems)
    if problems:
        raise ValidationError(problems)
    return cases


def _quantization_problems(suite: Suite, lines: LineMap) -> list[Problem]:
    from ..models.formats import quantization_method

    out = []
    for i, v in enumerate(suite.raw.get("variants") or []):
        q = v.get("quantization") if isinstance(v, dict) else None
        if isinstance(q, dict) and "method" in q:
            try:
                quantization_method(q)
            except EvalsuiteError as exc:
                line = lines.line_of(("variants", i, "quantization", "method")) or lines.line_of(("variants", i))
                msg = str(exc).removeprefix("quantization.method: ")
                out.append(Problem(file=suite.path, line=line, case_id=str(v.get("name")), field="quantization.method", message=msg, subject="variant"))
    return out


def _rule_problems(rubric: Rubric, scenarios: set[str]) -> list[Problem]:
    """Metric rules (of any stage) naming a metric that no scorer of the selected scenarios produces."""
    out: dict[str, Problem] = {}
    for sr in rubric.stages.values():
        for r in sr.rules:
            if not isinstance(r, MetricRule) or r.required is False:
                continue
            scen = tuple(scenarios) if "*" in r.scenarios else tuple(s for s in r.scenarios if s in scenarios)
            if not scen or any(s.startswith(("lm-eval:", "inspect:")) for s in scen):
                continue  # a rule for scenarios the suite does not run; imported tasks name their own metrics
            have = scorer_metrics(scen)
            if not any(fnmatch.fnmatchcase(m, r.metric) or fnmatch.fnmatchcase(r.metric, m) for m in have):
                p = _problem(rubric.path, f"{r.where}: rule {r.name}: metric: no scorer of {'/'.join(scen)} produces {r.metric!r}{suggest(r.metric, have)}")
                out.setdefault(r.name, p)
    return list(out.values())
