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

CASES = """schema_version: 1
defaults: {{scenario: kb_qa, kind: grounded, lang: en}}
documents:
  - {{id: d1, text: The VPN session lasts 12 hours and then asks for the token again.}}
cases:
{cases}
"""

SUITE = """schema_version: 1
name: scaling
casesets: [cases.yaml]
generation: {{max_new_tokens: 16, samples: {samples}, batch_size: 8, temperature: {temperature}}}
output_dir: out
cache: out/cache.sqlite
variants:
{variants}
"""


def suite_file(tmp: Path, cases: int, samples: int, variants: int) -> Path:
    lines = "\n".join(f"  - {{id: q{i:04d}, prompt: 'How long does session {i} last?', context: [d1], expect: {{citations: [d1], required_terms: [hours]}}}}" for i in range(cases))
    (tmp / "cases.yaml").write_text(CASES.format(cases=lines))
    vs = ["  - {name: base, baseline: true, backend: fake, options: {default: 'The session lasts 12 hours [d1].'}}"]
    for j in range(1, variants):
        vs.append(f"  - {{name: v{j}, backend: fake, model: m{j}, options: {{default: 'It lasts 12 hours [d1].'}}}}")
    p = tmp / "suite.yaml"
    p.write_text(SUITE.format(samples=samples, temperature=0.7 if samples > 1 else 0, variants="\n".join(vs)))
    return p


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
