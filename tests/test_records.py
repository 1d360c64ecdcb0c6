"""Records are built by name: no call of an evalsuite class passes more than 6 positional arguments
(a swapped positional field is a silent bug), and the records that had such calls are keyword-only."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_POSITIONAL = 6


def _classes(root: Path) -> set[str]:
    """Every class name defined anywhere in evalsuite/."""
    return {n.name for p in (root / "evalsuite").rglob("*.py") for n in ast.walk(ast.parse(p.read_text("utf-8"))) if isinstance(n, ast.ClassDef)}


def _is_class_name(name: str) -> bool:
    return name.lstrip("_")[:1].isupper()


def long_positional_calls(source: str, classes: set[str], label: str = "<src>") -> list[str]:
    """`file:line: Name(N positional)` for each call of a known class with more than 6 positional arguments."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name and _is_class_name(name) and name in classes and len(n.args) > MAX_POSITIONAL:
            out.append(f"{label}:{n.lineno}: {name}({len(n.args)} positional)")
    return out


def test_no_class_is_called_with_more_than_six_positional_arguments():
    classes = _classes(ROOT)
    found = [
        hit
        for folder in ("evalsuite", "tests", "benchmarks")
        for p in sorted((ROOT / folder).rglob("*.py"))
        for hit in long_positional_calls(p.read_text("utf-8"), classes, str(p.relative_to(ROOT)))
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "source,hits",
    [
        ("Check(1, 2, 3, 4, 5, 6, 7)", ["<src>:1: Check(7 positional)"]),
        ("x = mod.MetricDelta(*range(0), 1, 2, 3, 4, 5, 6, 7)", ["<src>:1: MetricDelta(8 positional)"]),
        ("_Run(1, 2, 3, 4, 5, 6, 7, 8)", ["<src>:1: _Run(8 positional)"]),
        ("Check(1, 2, 3, 4, 5, 6)", []),  # six is the limit
        ("Check(a=1, b=2, c=3, d=4, e=5, f=6, g=7)", []),  # by name
        ("NotOurs(1, 2, 3, 4, 5, 6, 7)", []),  # not an evalsuite class
        ("helper(1, 2, 3, 4, 5, 6, 7)", []),  # a function
    ],
)
def test_the_scan_finds_planted_calls(source, hits):
    assert long_positional_calls(source, {"Check", "MetricDelta", "_Run"}) == hits


RECORDS = [
    ("evalsuite.adaptive.checks", "Check"),
    ("evalsuite.adaptive.driver", "_Run"),
    ("evalsuite.run.runner", "VariantJob"),
    ("evalsuite.verdict.compare", "MetricDelta"),
    ("evalsuite.verdict.compare", "PerfDelta"),
    ("evalsuite.verdict.compare", "Comparison"),
    ("evalsuite.verdict.outcome", "Verdict"),
    ("evalsuite.verdict.outcome", "Violation"),
    ("evalsuite.verdict.outcome", "RuleResult"),
    ("evalsuite.verdict.outcome", "Judgment"),
    ("evalsuite.promotion", "PromoteResult"),
    ("evalsuite.promotion", "PromoteRequest"),
    ("evalsuite.releases.ledger", "Deployment"),
    ("evalsuite.releases.clearance", "Clearance"),
    ("evalsuite.report.frames", "LoadedRun"),
    ("evalsuite.review.api", "FlagResult"),
    ("evalsuite.scoring.base", "ScorerSpec"),
    ("evalsuite.run.store", "ScoreRecord"),
]


@pytest.mark.parametrize("module,name", RECORDS)
def test_records_are_keyword_only(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert all(f.kw_only for f in dataclasses.fields(cls)), f"{module}.{name} is not kw_only"
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(TypeError):
        cls(first)  # a positional call is refused
