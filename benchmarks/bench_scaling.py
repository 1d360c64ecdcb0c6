"""How evalsuite's own cost grows with cases, samples and variants (measured, not assumed).

The fake backend answers instantly, so what is timed is everything evalsuite does around the model:
planning, fingerprints, the generation cache, the run store, scoring and its books. Sizes step
cases (x4, x16), samples (x4) and variants (x3) from a base of 50 kb_qa cases, 1 sample, 1 variant.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from common import Row
from fake_suite import suite_file

def run(quick: bool = False) -> list[Row]:
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    sizes = [(50, 1, 1), (200, 1, 1), (50, 4, 1), (50, 1, 3)] if quick else [(50, 1, 1), (200, 1, 1), (800, 1, 1), (200, 4, 1), (200, 1, 3)]
    rows = []
    for cases, samples, variants in sizes:
        with tempfile.TemporaryDirectory() as t:
            path = suite_file(Path(t), cases, samples, variants)
            t0 = time.perf_counter()
            c0 = time.process_time()
            res = run_suite(load_suite(path), RunOptions(progress=False))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            n = res.generated
            t0 = time.perf_counter()
            warm = run_suite(load_suite(path), RunOptions(progress=False))
            warm_wall = time.perf_counter() - t0
        print(f"  [scaling] {cases} cases x {samples} samples x {variants} variants: {n} generations, cold {wall:.2f}s (cpu {cpu:.2f}s), warm {warm_wall:.2f}s", flush=True)
        assert warm.cached == n
        rows.append(Row("evalsuite's own cost (fake backend)", f"{cases} cases x {samples} samples x {variants} variants", f"{n} gens: cold {wall:.2f}s (cpu {cpu:.2f}s, {1000 * cpu / n:.1f} ms/gen), warm {warm_wall:.2f}s"))
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
