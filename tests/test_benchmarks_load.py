"""Benchmarks say when the machine was busy (issue 44): each row records the load average before and after
its benchmark, and a row taken above the core count never reads "met"."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

bench_main = importlib.import_module("benchmarks.__main__")
common = sys.modules["common"]  # the module __main__ imported its helpers from


@pytest.mark.parametrize(
    ("before", "after", "verdict", "expected"),
    [
        (0.5, 0.8, "met", "met"),
        (0.5, 2.5, "met", "busy machine"),
        (3.0, 0.5, "met", "busy machine"),
        (3.0, 3.0, "NOT met", "busy machine (NOT met)"),
        (3.0, 3.0, "within noise", "busy machine (within noise)"),
        (3.0, 3.0, "error", "error"),
        (3.0, 3.0, "", ""),
        (2.0, 2.0, "met", "met"),  # at the core count, not above it
        (float("nan"), float("nan"), "met", "met"),  # no load average on this platform: not judged busy
    ],
)
def test_busy_rows_never_read_met(before, after, verdict, expected):
    row = common.Row("b", "m", "1s", verdict=verdict)
    (got,) = common.with_load([row], before, after, cores=2)
    assert got.verdict == expected
    assert (got.load_before, got.load_after) == (before, after) or before != before


def test_table_has_the_load_column(tmp_path):
    rows = common.with_load([common.Row("b", "m", "1s", verdict="met")], 0.4, 1.2, cores=2)
    out = tmp_path / "t.md"
    common.write_table(rows, out, "# h")
    text = out.read_text()
    assert "| load before / after |" in text
    assert "| met | 0.4 / 1.2 |" in text


def _fake_bench(verdict: str):
    mod = types.ModuleType("fake_bench_for_test")
    mod.run = lambda quick: [common.Row("fake", "measure", "1s", verdict=verdict)]
    return mod


def test_main_warns_and_marks_a_busy_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fake_bench_for_test", _fake_bench("met"))
    monkeypatch.setattr(bench_main, "BENCHES", {"fake": "fake_bench_for_test"})
    readings = iter([9.0, 9.0, 9.5])  # at start, before, after
    monkeypatch.setattr(bench_main, "load_average", lambda: next(readings))
    monkeypatch.setattr(bench_main, "core_count", lambda: 2)
    out = tmp_path / "bench.md"
    assert bench_main.main(["--only", "fake", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "WARNING: load average 9.0 on 2 core(s)" in err
    table = out.read_text()
    assert "| busy machine | 9.0 / 9.5 |" in table
    assert "| met |" not in table


def test_main_keeps_met_on_an_idle_machine(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fake_bench_for_test", _fake_bench("met"))
    monkeypatch.setattr(bench_main, "BENCHES", {"fake": "fake_bench_for_test"})
    monkeypatch.setattr(bench_main, "load_average", lambda: 0.3)
    monkeypatch.setattr(bench_main, "core_count", lambda: 2)
    out = tmp_path / "bench.md"
    bench_main.main(["--only", "fake", "--out", str(out)])
    assert "WARNING" not in capsys.readouterr().err
    assert "| met | 0.3 / 0.3 |" in out.read_text()
