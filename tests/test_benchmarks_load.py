"""Benchmarks say when the machine was busy (issue 44): each row records the load average before and after
its benchmark and the other jobs' load while it ran, and a row taken on a busy machine never reads "met".
Busy: the load average before the benchmark above the core count, or other jobs keeping half the cores
busy during it. The reading after is not used: it counts the benchmark's own processes (the sandbox
benchmarks run two programs at once and leave the load at 3 on an idle machine)."""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

bench_main = importlib.import_module("benchmarks.__main__")
common = sys.modules["common"]  # the module __main__ imported its helpers from


NAN = float("nan")


@pytest.mark.parametrize(
    ("before", "after", "others", "verdict", "expected"),
    [
        (0.5, 0.8, NAN, "met", "met"),
        (0.5, 2.9, 0.1, "met", "met"),  # the benchmark's own two processes, nobody else's
        (0.5, 2.5, 1.0, "met", "busy machine"),  # another job held a core throughout
        (0.5, 0.9, 1.4, "NOT met", "busy machine (NOT met)"),
        (3.0, 0.5, NAN, "met", "busy machine"),
        (3.0, 3.0, 0.0, "NOT met", "busy machine (NOT met)"),
        (3.0, 3.0, NAN, "within noise", "busy machine (within noise)"),
        (3.0, 3.0, NAN, "error", "error"),
        (3.0, 3.0, NAN, "", ""),
        (2.0, 2.0, 0.99, "met", "met"),  # at the core count, not above it; others under half the cores
        (NAN, NAN, NAN, "met", "met"),  # no load average on this platform: not judged busy
    ],
)
def test_busy_rows_never_read_met(before, after, others, verdict, expected):
    row = common.Row("b", "m", "1s", verdict=verdict)
    (got,) = common.with_load([row], before, after, cores=2, others=others)
    assert got.verdict == expected
    assert (got.load_before, got.load_after) == (before, after) or before != before
    assert got.others == (None if others != others else others)


def test_other_load_counts_other_processes_not_its_own(tmp_path):
    """Two spinning children: rooted at one of them, the other is someone else's load; rooted at this
    process, both are the benchmark's own and are not counted."""
    import subprocess
    import time

    (tmp_path / "spin.py").write_text("import time\nt = time.time()\nwhile time.time() - t < 60: pass\n")
    a = subprocess.Popen([sys.executable, str(tmp_path / "spin.py")])
    b = subprocess.Popen([sys.executable, str(tmp_path / "spin.py")])
    try:
        time.sleep(1.0)
        probe = common.OtherLoad()
        pairs = [(probe.sample(root=a.pid), probe.sample(root=os.getpid())) for _ in range(3)]
        assert all(x is not None and y is not None for x, y in pairs)
        # rooted at a: b (runnable throughout) is another job's; rooted here, neither spinner counts
        assert max(x - y for x, y in pairs) >= 1, pairs
    finally:
        a.kill()
        b.kill()
        a.wait()
        b.wait()


def test_other_load_samples_while_it_runs():
    with common.OtherLoad(interval=0.05) as probe:
        import time

        time.sleep(0.3)
    assert probe.samples and probe.mean == probe.mean


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
    assert bench_main.main(["--only", "fake", "--out", str(out), "--settle", "0"]) == 0
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
    bench_main.main(["--only", "fake", "--out", str(out), "--settle", "0"])
    assert "WARNING" not in capsys.readouterr().err
    assert "| met | 0.3 / 0.3 |" in out.read_text()
