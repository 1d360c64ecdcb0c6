"""pytest plugin (entry point `pytest11`): gate variants from pytest. Filled in by the verdicts work."""

from __future__ import annotations


def pytest_addoption(parser):  # pragma: no cover - placeholder until the plugin lands
    group = parser.getgroup("evalsuite", "evalsuite quality gate")
    group.addoption("--evalsuite-suite", action="store", default=None, help="suite file to gate")
