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

CASES = """schema_version: 1
defaults: {{scenario: kb_qa, kind: grounded, lang: en}}
documents:
  - {{id: d1, text: The VPN session lasts 12 hours and then asks for the token again.}}
cases:
{cases}
"""
SUITE = """schema_version: 1
name: bookkeeping
casesets: [cases.yaml]
generation: {max_new_tokens: 16, samples: 1, batch_size: 8, temperature: 0}
output_dir: out
cache: out/cache.sqlite
variants:
  - {name: base, baseline: true, backend: fake, options: {default: 'The session lasts 12 hours [d1].'}}
"""


def suite_file(tmp: Path, n: int) -> Path:
    lines = "\n".join(
        f"  - {{id: q{i:04d}, prompt: 'How long does session {i} last?', context: [d1], expect: {{citations: [d1], required_terms: [hours]}}}}"
        for i in range(n)
    )
    (tmp / "cases.yaml").write_text(CASES.format(cases=lines))
    (tmp / "suite.yaml").write_text(SUITE)
    return tmp / "suite.yaml"


class Timed:
    """A backend whose `generate` is timed (CPU and wall), so its own work is taken off evalsuite's."""

    cpu = wall = 0.0

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, requests):
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            return self.inner.generate(requests)
        finally:
            Timed.cpu += time.process_time() - c0
            Timed.wall += time.perf_counter() - t0


def measure(n: int) -> dict:
    import evalsuite.run.runner as runner
    from evalsuite.backends.base import make_backend
    from evalsuite.cases.suite import load_suite
    from evalsuite.scoring.pipeline import score_stored_run

    with tempfile.TemporaryDirectory() as t:
        suite = load_suite(suite_file(Path(t), n))
        c0 = time.process_time()
        cases = runner.select_cases(suite)
        load_cpu = time.process_time() - c0
        select = runner.select_cases
        runner.select_cases = lambda *a, **k: cases
        try:
            Timed.cpu = Timed.wall = 0.0
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
