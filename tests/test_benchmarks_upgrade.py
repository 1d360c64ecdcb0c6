"""The upgrade benchmark goes on when one side fails (vLLM's batch invariance dies on this CPU in its first
batch): the failing side becomes a row with its error, the others keep their rounds and their ratios."""

from __future__ import annotations

import importlib

importlib.import_module("benchmarks.__main__")  # puts benchmarks/ on the path for its own imports
bench_upgrade = importlib.import_module("bench_upgrade")


def _side(tps: float, fail_at: int | None = None):
    calls = {"n": 0}

    def call():
        calls["n"] += 1
        if fail_at is not None and calls["n"] >= fail_at:
            raise TypeError("'function' object is not subscriptable")
        return 1.0, int(tps), {"c1": "same text"}

    return call


def test_a_failing_side_is_a_row_and_the_others_are_measured():
    sides = {"base": _side(10), "broken": _side(10, fail_at=1), "fast": _side(20)}
    rows = bench_upgrade._measured("vllm compile layer (1 cases)", "base", sides, 3, {})
    by = {r.measure: r for r in rows}
    assert set(by) == {"base (baseline): tokens/s", "fast / base: tokens/s", "broken: failed"}
    assert "TypeError" in by["broken: failed"].figures
    assert by["fast / base: tokens/s"].ratio is not None


def test_a_failing_baseline_leaves_no_ratio():
    rows = bench_upgrade._measured("x (1 cases)", "base", {"base": _side(10, fail_at=2), "other": _side(12)}, 2, {})
    assert [r.measure for r in rows] == ["base: failed"]
