"""Prints the figures of the reliability tests at the end of a session (for docs/reliability.md)."""

from __future__ import annotations

from .fuzz import Counter
from .helpers import FIGURES


def pytest_terminal_summary(terminalreporter):
    if not Counter.counts and not FIGURES:
        return
    tr = terminalreporter
    tr.section("evalsuite reliability figures")
    names = sorted({n for n, _ in Counter.counts})
    for n in names:
        valid, error = Counter.counts.get((n, "valid"), 0), Counter.counts.get((n, "error"), 0)
        tr.write_line(f"fuzz {n}: {valid + error} examples ({valid} valid, {error} clear errors)")
    if names:
        tr.write_line(f"fuzz total: {sum(Counter.counts.values())} examples, every one a valid object or a clear error, nothing written")
    for line in FIGURES:
        tr.write_line(line)
