"""Local vs Ray executor wall time for the same suite, side by side on this machine (overhead ratio).

    python benchmarks/bench_ray.py [--suite suites/demo.yaml] [--cases-per-scenario 1] [--max-new-tokens 16]
                                   [--actors 1 2] [--fake-batches 30 --fake-delay 0.05]

Prints, each run on a fresh cache so every request is really generated:
1. the suite's baseline variant (the embedded model by default), local executor vs the Ray executor
   with 1, 2... model actors on a local Ray (`ray.init(num_cpus=<cores>)`): wall time and the ratio
   ray/local. Each Ray run starts its actors and loads the model in them, as a cluster run would.
2. the same for a fake backend with a fixed latency per batch: what Ray adds per run and per batch
   when the model costs nothing but waiting (the orchestration overhead on its own).
Ray's start (ray.init) is reported apart: on a cluster it is paid once, not per suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Ray runs its workers at nice 15 by default; the local executor runs at 0. Same priority for both,
# or a busy machine measures the scheduler, not the executors
os.environ.setdefault("RAY_worker_niceness", "0")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def timed_run(suite, executor, cases_per_scenario: int | None) -> tuple[float, int]:
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    with tempfile.TemporaryDirectory() as tmp:
        s = dataclasses.replace(suite, executor=executor, output_dir=tmp, cache=str(Path(tmp) / "cache.sqlite"))
        t0 = time.perf_counter()
        res = run_suite(s, RunOptions(variants=[], limit=cases_per_scenario, progress=False, score=False))
        wall = time.perf_counter() - t0
    if res.errors:
        raise SystemExit(f"{res.errors} generation errors: the comparison would be meaningless")
    return wall, res.generated


def compare(title: str, suite, actors: list[int], cases_per_scenario: int | None, cpus: int) -> None:
    from evalsuite.executors import ExecutorSpec

    local, n = timed_run(suite, ExecutorSpec("local"), cases_per_scenario)
    print(f"\n{title}: {n} requests")
    print(f"  {'executor':<24}{'wall s':>8}{'ratio':>8}")
    print(f"  {'local':<24}{local:8.1f}{1.0:8.2f}")
    for k in actors:
        spec = ExecutorSpec("ray", {"num_actors": k, "num_cpus": max(1, cpus // k) if k <= cpus else 1})
        wall, _ = timed_run(suite, spec, cases_per_scenario)
        print(f"  {f'ray, {k} actor(s)':<24}{wall:8.1f}{wall / local:8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(REPO / "suites" / "demo.yaml"))
    ap.add_argument("--cases-per-scenario", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--fake-batches", type=int, default=30)
    ap.add_argument("--fake-delay", type=float, default=0.05, help="seconds per request of the fake backend")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)

    import ray

    from evalsuite.backends.base import GenerationSettings
    from evalsuite.cases.suite import Variant, load_suite

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    t0 = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=200 * 2**20, logging_level=logging.ERROR, log_to_driver=False)
    print(f"ray {ray.__version__}: local instance with {cpus} CPUs started in {time.perf_counter() - t0:.1f}s (paid once per cluster, not per suite)")

    suite = load_suite(args.suite)
    base = suite.baseline
    gen = dataclasses.replace(base.generation, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    model_suite = dataclasses.replace(suite, variants=(dataclasses.replace(base, generation=gen),))
    compare(f"{suite.name} baseline ({base.backend}, {base.model}), max_new_tokens {args.max_new_tokens}, batch size {args.batch_size}", model_suite, args.actors, args.cases_per_scenario, cpus)

    # the orchestration alone: a backend that only waits, `fake_batches` batches of one request
    fake_gen = GenerationSettings(max_new_tokens=8, batch_size=1)
    fake = Variant("fake", backend="fake", options={"delay_s": args.fake_delay}, generation=fake_gen, baseline=True)
    cases = suite.load_cases()
    ids = [c.id for c in cases][: args.fake_batches]

    sels = tuple(dataclasses.replace(s, ids=tuple(ids)) for s in suite.casesets)
    fake_suite = dataclasses.replace(suite, variants=(fake,), casesets=sels, generation=fake_gen)
    compare(f"fake backend, {args.fake_delay * 1000:.0f} ms per request, batches of 1", fake_suite, args.actors, None, cpus)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
