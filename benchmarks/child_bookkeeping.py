"""One measurement of evalsuite's own cost around the model, in a process of its own (run by
bench_bookkeeping.py with one version of evalsuite or another on PYTHONPATH; prints one JSON line).

    python benchmarks/child_bookkeeping.py CASES

On the fake backend (whose own work is timed and taken off): a suite of CASES kb_qa cases, one
sample, one variant, batches of 8, a cold cache and a new run directory. Figures per generation:
the CPU and the wall time `generate_suite` spends outside `backend.generate` with the cases already
loaded (planning, request hashes, cache lookups and writes, the run log, summaries); then, for
context, loading the case set (per case) and scoring the outputs (per output).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from fake_suite import suite_file

class Timed:
    """A backend whose `generate` is timed (CPU and wall), so its own work is taken off evalsuite's;
    its `fingerprint` (hashing a model's files, once per run) is timed apart."""

    cpu = wall = fingerprint_s = 0.0
    calls: list[tuple[float, float]] = []  #: (entered, returned) of every generate call, in order

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def fingerprint(self):
        t0 = time.perf_counter()
        try:
            return self.inner.fingerprint()
        finally:
            Timed.fingerprint_s += time.perf_counter() - t0

    def generate(self, requests):
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            return self.inner.generate(requests)
        finally:
            t1 = time.perf_counter()
            Timed.cpu += time.process_time() - c0
            Timed.wall += t1 - t0
            Timed.calls.append((t0, t1))

    @classmethod
    def reset(cls) -> None:
        cls.cpu = cls.wall = cls.fingerprint_s = 0.0
        cls.calls = []

    @classmethod
    def gaps(cls) -> list[float]:
        """Seconds between one generate call's return and the next call: evalsuite's work between batches."""
        return [b[0] - a[1] for a, b in zip(cls.calls, cls.calls[1:])]


def measure(n: int) -> dict:
    import evalsuite.run.runner as runner
    from evalsuite.backends.base import make_backend
    from evalsuite.cases.suite import load_suite
    from evalsuite.scoring.pipeline import score_stored_run

    with tempfile.TemporaryDirectory() as t:
        suite = load_suite(suite_file(Path(t), n, 1, 1))
        c0 = time.process_time()
        cases = runner.select_cases(suite)
        load_cpu = time.process_time() - c0
        select = runner.select_cases
        runner.select_cases = lambda *a, **k: cases
        try:
            Timed.reset()
            opts = runner.RunOptions(progress=False, backend_factory=lambda v: Timed(make_backend(v)))
            c0, t0 = time.process_time(), time.perf_counter()
            res = runner.generate_suite(suite, opts)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        finally:
            runner.select_cases = select
        c0 = time.process_time()
        score_stored_run(suite, res)
        score_cpu = time.process_time() - c0
    g = res.generated
    return {
        "generations": g,
        "own_cpu_ms": 1000 * (cpu - Timed.cpu) / g,
        "own_wall_ms": 1000 * (wall - Timed.wall) / g,
        "backend_cpu_ms": 1000 * Timed.cpu / g,
        "load_cpu_ms_per_case": 1000 * load_cpu / len(cases),
        "score_cpu_ms_per_output": 1000 * score_cpu / g,
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 800
    measure(50)  # warm-up: imports, first SQLite and file-system work
    print(json.dumps(measure(n)))


if __name__ == "__main__":
    main()
