"""Review queue write cost, side by side: synchronous=NORMAL (the default) vs FULL, one writer and eight.

    .venv/bin/python benchmarks/bench_review_queue.py [N_ITEMS]

Prints milliseconds per claim+annotate pair and the FULL/NORMAL ratio (measured on this machine,
now; the ratio is the claim, not the absolute numbers).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalsuite.review.store import NewItem, ReviewStore  # noqa: E402

WORKER = """
import sys, time
from evalsuite.review.store import ReviewStore
q = ReviewStore(sys.argv[1], synchronous=sys.argv[2])
while time.time() < float(sys.argv[4]):
    time.sleep(0.005)
for _ in range(int(sys.argv[3])):
    iid = q.claim_next(sys.argv[5], 600)
    if iid is None:
        break
    q.annotate(iid, "acceptable", sys.argv[5])
"""


def items(n: int) -> list[NewItem]:
    return [NewItem(run_id="run", variant="opt", fingerprint="fp", case_id=f"c{i}", scenario="kb_qa", kind="k", baseline="base", reasons=({"code": "flip"},), baseline_output="b", variant_output=f"text {i}") for i in range(n)]


def one_writer(sync: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d, ReviewStore(Path(d) / "q.sqlite", synchronous=sync) as q:
        q.add_items(items(n))
        t = time.perf_counter()
        while (iid := q.claim_next("a")) is not None:
            q.annotate(iid, "acceptable", "a")
        return (time.perf_counter() - t) / n * 1000


def eight_writers(sync: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "q.sqlite"
        with ReviewStore(path) as q:
            q.add_items(items(n))
        start = time.time() + 2.0
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), sync, str(n), str(start), f"r{k}"]) for k in range(8)]
        for p in procs:
            p.wait()
        return (time.time() - start) / n * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    for name, fn in (("1 writer", one_writer), ("8 writers", eight_writers)):
        normal, full = fn("NORMAL", n), fn("FULL", n)
        print(f"{name}: NORMAL {normal:.2f} ms, FULL {full:.2f} ms per claim+annotate ({n} items); FULL/NORMAL = {full / normal:.1f}x")


if __name__ == "__main__":
    main()
