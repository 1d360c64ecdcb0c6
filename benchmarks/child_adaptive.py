"""One adaptive run, timed batch by batch, in a process of its own (run by bench_adaptive.py with one
version of evalsuite or another on PYTHONPATH; prints one JSON line).

    python benchmarks/child_adaptive.py TESTS_DIR N_KB N_BRAND BATCH

The synthetic case sets of the gate tests (N_KB kb_qa and N_BRAND brand cases, fake backend), an
unchanged variant, and block rules whose pass side cannot rule out a drop of 0.001 until (nearly)
every case is in: the variant runs batch after batch through the whole case set. A batch's time is
the time between two of the driver's decisions (generate, store, score, decide).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

RUBRIC = {
    "schema_version": 1,
    "name": "batches",
    "rules": [
        {"name": "kb-recall", "scenario": "kb_qa", "metric": "citations.recall", "max_drop": 0.001, "require_significance": True},
        {"name": "brand-json", "scenario": "brand", "metric": "json.valid", "max_drop": 0.001, "require_significance": True},
    ],
}


def main() -> None:
    tests, n_kb, n_brand, batch = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    sys.path.insert(0, str(tests))
    from verdict_synth import write_sets, write_suite

    import evalsuite.adaptive.driver as driver
    try:
        from evalsuite.adaptive.checks import AdaptiveSettings
    except ModuleNotFoundError:  # the previous code (2e80882) had it in adaptive/verdict.py
        from evalsuite.adaptive.verdict import AdaptiveSettings  # type: ignore[no-redef]
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions

    stamps: list[float] = []
    real = driver._evaluate

    def timed(*args, **kwargs):  # called once per batch (and once at the stop): a batch ends at each call
        stamps.append(time.perf_counter())
        return real(*args, **kwargs)

    driver._evaluate = timed
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        outputs = write_sets(root, n_kb=n_kb, n_brand=n_brand)
        (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC), "utf-8")
        suite = load_suite(write_suite(root, outputs, [{"name": "same", "quantization": {"method": "bnb", "bits": 8}}], rubric=str(root / "rubric.yaml")))
        t0 = time.perf_counter()
        res = driver.run_adaptive(suite, RunOptions(progress=False), AdaptiveSettings(stage="production", tolerance=0.001, until="rules", batch_size=batch))
        wall = time.perf_counter() - t0
    st = res.states["same"]
    print(json.dumps({"batches": [b - a for a, b in zip(stamps, stamps[1:])], "generated": st.generated, "total": st.total, "wall_s": wall}))


if __name__ == "__main__":
    main()
