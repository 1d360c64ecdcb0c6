"""Importing 10,000 samples: `evalsuite import lm-eval` on two lm-eval `--log_samples` outputs of 10,000
documents each (half multiple choice, half generation), built from the stored lm-eval 0.4.13 log
(tests/importers/data) with each document's responses and metrics varied; then the gate on the run.

    python benchmarks/bench_import.py [--docs 10000] [--rounds 3]

Prints the seconds to import (read both logs, check that they pair, score with evalsuite's drift
scorers, write the run) and to judge the imported run, as the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import REPO, Row  # noqa: E402

DATA = REPO / "tests" / "importers" / "data" / "lmeval-0.4.13"


def make_logs(out: Path, docs: int, seed: int = 0) -> tuple[Path, Path]:
    """Two lm-eval outputs (base, variant) of `docs` documents, the variant flipping about 5% of them."""
    rng = random.Random(seed)
    dirs = []
    for name in ("base", "rtn"):
        src = DATA / name
        dst = out / name
        dst.mkdir(parents=True)
        results = next(src.glob("results_*.json"))
        (dst / results.name).write_text(results.read_text())
        dirs.append(dst)
    stamp = {d.name: next(d.glob("results_*.json")).stem[len("results_") :] for d in dirs}
    for task, metric in (("tiny_mc", "acc"), ("tiny_gen", "exact_match")):
        template = [json.loads(line) for line in next((DATA / "base").glob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        base_rows, var_rows = [], []
        for i in range(docs // 2):
            row = dict(template[i % len(template)], doc_id=i, doc_hash=f"{i:064x}", prompt_hash=f"{i:064x}")
            good = rng.random() < 0.6
            base_rows.append(dict(row, **{metric: float(good)}))
            flip = rng.random() < 0.05
            var = dict(row, **{metric: float(good != flip)})
            if task == "tiny_gen" and flip:
                var["resps"] = [[" something else"]]
            var_rows.append(var)
        for d, rows in zip(dirs, (base_rows, var_rows)):
            (d / f"samples_{task}_{stamp[d.name]}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dirs[0], dirs[1]


def measure(docs: int, rounds: int) -> dict:
    from evalsuite.importers import ImportOptions, import_lm_eval
    from evalsuite.judge import judge_run

    imports, gates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        base, var = make_logs(Path(tmp) / "logs", docs)
        for r in range(rounds):
            t0 = time.perf_counter()
            res = import_lm_eval(base, [var], options=ImportOptions(runs_dir=Path(tmp) / f"runs{r}", names=["base", "rtn"]))
            t1 = time.perf_counter()
            verdict = judge_run(res.store, queue=Path(tmp) / f"q{r}.sqlite").verdict
            gates.append(time.perf_counter() - t0 - (t1 - t0))
            imports.append(t1 - t0)
        assert res.generations == 2 * docs, res
    return {"docs": docs, "import_s": statistics.median(imports), "gate_s": statistics.median(gates), "status": verdict.status, "rounds": rounds}


def run(quick: bool = False) -> list[Row]:
    m = measure(2000 if quick else 10_000, 1 if quick else 3)
    figures = f"{m['docs']} documents x 2 models: import {m['import_s']:.1f}s, gate {m['gate_s']:.1f}s (median of {m['rounds']})"
    return [Row(bench="import", measure=f"evalsuite import lm-eval, {m['docs']} samples per model", figures=figures)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    m = measure(args.docs, args.rounds)
    print(
        f"import of {m['docs']} samples per model (2 models): {m['import_s']:.2f}s; gate: {m['gate_s']:.2f}s (median of {m['rounds']}); verdict {m['status']}"
    )


if __name__ == "__main__":
    main()
