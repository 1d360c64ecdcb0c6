"""Run every benchmark and write the table: `python -m benchmarks` (or `make bench`).

    python -m benchmarks [--quick] [--only overhead,warm,...] [--out reports/benchmarks.md]

Each benchmark measures its two sides alternately in one process run, on the same cases and
settings, and reports ratios with 95% intervals (benchmarks/common.py). One that fails is reported
as an error row; the others still run. The whole set fits in 30 minutes on a 2-core machine
(`--quick`: a few minutes, smaller sizes and fewer rounds, for development).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import BUSY, REPO, OtherLoad, Row, core_count, is_busy, load_average, settle, with_load, write_table  # noqa: E402

#: name -> module; cheap ones first, so a short budget still gets a table
BENCHES = {
    "cli": "bench_cli",
    "scoring": "bench_scoring",
    "scaling": "bench_scaling",
    "run-size": "bench_run_size",
    "bookkeeping": "bench_bookkeeping",
    "import": "bench_import",
    "adaptive": "bench_adaptive",
    "humaneval": "bench_humaneval",
    "testwriting": "bench_testwriting",
    "overhead": "bench_overhead",
    "warm": "bench_warm",
    "lm-eval": "bench_lm_eval",
    "vllm": "bench_vllm",
    "upgrade": "bench_upgrade",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer rounds (development)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHES)}")
    ap.add_argument("--settle", type=float, default=120.0, help="seconds to wait at most, before each benchmark, for the load average to fall to 1 (default 120)")
    ap.add_argument("--out", default=str(REPO / "reports" / "benchmarks.md"), help="markdown table to write")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHES)}")
    cpus = core_count()
    load = load_average()
    if is_busy(load, cpus):
        print(f"WARNING: load average {load:.1f} on {cpus} core(s): the machine is busy; each benchmark waits up to {args.settle:.0f}s for it to settle, and a row measured busy is marked '{BUSY}'", file=sys.stderr)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[Row] = []
    t_all = time.perf_counter()
    out = Path(args.out)

    def header(done: bool) -> str:
        state = f"took {time.perf_counter() - t_all:.0f}s" if done else "in progress"
        return (f"# evalsuite benchmarks\n\n{started}, {platform.machine()}, {cpus} CPU(s), load average {load:.1f} at start, "
                f"Python {platform.python_version()}{', quick sizes' if args.quick else ''}; {state}.\n"
                "Ratios are A/B of the first and second side, geometric mean of per-round paired ratios with a 95% interval "
                "(see docs/performance.md). Verdict: met / NOT met when the whole interval is on one side of the target, "
                f"within noise otherwise; '{BUSY}' when the 1-minute load average before the benchmark was above the {cpus} core(s), "
                "or when other jobs kept half the cores busy while it ran (such a row never reads met). Each row gives the load average "
                "before / after its benchmark (after counts the benchmark's own processes: the sandbox benchmarks run two at once), and "
                "in brackets the other jobs' load: the mean number of runnable threads outside the benchmark's processes, sampled each second.")

    for name in names:
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        before = settle(load_average, 1.0, args.settle)  # the previous benchmark's own load, not the machine's
        with OtherLoad() as others:
            try:
                mod = importlib.import_module(BENCHES[name])
                got = list(mod.run(quick=args.quick))
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not lose the others' figures
                traceback.print_exc()
                got = [Row(name, "error", f"{type(exc).__name__}: {str(exc)[:160]}", verdict="error")]
        after = load_average()
        marked = with_load(got, before, after, cpus, others.mean)
        if any(r.verdict.startswith(BUSY) for r in marked):
            print(f"WARNING: load average {before:.1f} before {name}, other jobs' load {others.mean:.2f} during it: its verdicts are marked '{BUSY}'", file=sys.stderr)
        rows.extend(marked)
        print(f"== {name}: {time.perf_counter() - t0:.0f}s", flush=True)
        write_table(rows, out, header(False))
    write_table(rows, out, header(True))
    print(out.read_text())
    print(f"table written to {out}")
    return 1 if any(r.verdict == "error" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
