"""One timing of the sandbox's default (isolated) path, in a process of its own, run by bench_humaneval.py with
one version of evalsuite or another on PYTHONPATH; prints one JSON line.

    python benchmarks/child_sandbox.py JOBS.json ROUNDS

JOBS.json: [[program, tests, entry_point], ...]. One untimed warm-up call (the worker pool and the zygote
start), then ROUNDS timed calls of `sandbox.run_tests_many` over every job with the result cache emptied
before each; prints {"seconds": [...], "passed": [...]} (the statuses of the last call).
"""

from __future__ import annotations

import json
import sys
import time

from evalsuite import sandbox

LIMITS = {"timeout_s": 10.0, "memory_mb": 512, "max_procs": 32, "max_file_mb": 16}  #: evalsuite.scoring.code.LIMITS


def main() -> None:
    jobs = [tuple(j) for j in json.loads(open(sys.argv[1]).read())]
    rounds = int(sys.argv[2])
    sandbox.clear_cache()
    sandbox.run_tests_many(jobs[:2], **LIMITS)
    seconds, res = [], []
    for _ in range(rounds):
        sandbox.clear_cache()
        t0 = time.perf_counter()
        res = sandbox.run_tests_many(jobs, **LIMITS)
        seconds.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": seconds, "passed": [r.status == "passed" for r in res]}))


if __name__ == "__main__":
    main()
