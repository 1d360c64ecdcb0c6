"""Shared fixtures. Tests never reach a model hub."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# `evalsuite gate` appends its report to $GITHUB_STEP_SUMMARY: tests never write to the CI's own job summary
os.environ.pop("GITHUB_STEP_SUMMARY", None)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def write(tmp_path):
    """Write a dedented text file under tmp_path and return its path."""

    def _write(rel: str, text: str) -> Path:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return p

    return _write


@pytest.fixture
def scorer_calls(monkeypatch):
    """A Counter of scorer calls by scorer name, for every scorer `evalsuite.scoring.run` loads
    while the test runs (stored scores that are reused call none)."""
    import dataclasses
    import functools
    from collections import Counter

    from evalsuite.scoring import run as scoring_run

    calls: Counter = Counter()
    real = scoring_run.load_scorers

    def wrap(spec):
        @functools.wraps(spec.fn)
        def fn(*args):
            calls[spec.name] += 1
            return spec.fn(*args)

        return dataclasses.replace(spec, fn=fn)

    monkeypatch.setattr(scoring_run, "load_scorers", lambda: [wrap(s) for s in real()])
    return calls
