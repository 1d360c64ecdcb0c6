"""How fast the command line answers, in a fresh process each time (as a user and CI meet it).

- `evalsuite --help`: starting Python, importing the CLI (every command registers itself; the
  libraries each command needs are imported inside it), printing the help. Target <= 0.3 s.
- `evalsuite review annotate ITEM --verdict acceptable`: one reviewer's verdict through the CLI, on a
  queue of open items. Target <= 0.5 s.

The warm re-run against its cold run (target <= x0.03 of cold) is `bench_warm`. Figures are absolute
seconds, so a loaded machine moves them: the header's load average says how loaded it was. A
target is met when the 95% interval of the mean is under it, missed when it is over, within noise
otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Row, mean_ci, median

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalsuite.cli", *args], cwd=REPO, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def open_queue(tmp: Path, n: int) -> tuple[Path, list[int]]:
    """A review queue with `n` open items (the review-queue benchmark's synthetic ones)."""
    from bench_review_queue import items

    from evalsuite.review import api
    from evalsuite.review.store import ReviewStore

    queue = tmp / "review.sqlite"
    with ReviewStore(queue) as q:
        q.add_items(items(n))
    return queue, [it["id"] for it in api.list_items(queue, status="open")]


def verdict(xs: list[float], limit: float) -> str:
    _, lo, hi = mean_ci(xs)
    if hi <= limit:
        return "met"
    return "NOT met" if lo > limit else "within noise"


def figures(xs: list[float]) -> str:
    m, lo, hi = mean_ci(xs)
    return f"median {median(xs):.3f}s, mean {m:.3f}s [{lo:.3f}, {hi:.3f}], min {min(xs):.3f}s, {len(xs)} runs"


def run(quick: bool = False) -> list[Row]:
    rounds = 5 if quick else 15
    helps, annotates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        queue, items = open_queue(Path(tmp), rounds)
        for r in range(rounds):  # interleaved: both commands see the same moments of the machine
            helps.append(timed(["--help"]))
            item = items[r % len(items)]
            annotates.append(timed(["review", "annotate", str(item), "--verdict", "acceptable", "--reviewer", f"bench{r}", "--queue", str(queue)]))
    print(f"  [cli] --help {figures(helps)}; review annotate {figures(annotates)}", flush=True)
    return [
        Row("CLI start", "`evalsuite --help`, fresh process", figures(helps), None, "<= 0.3 s", verdict(helps, 0.3)),
        Row("review annotate", "`evalsuite review annotate ITEM --verdict acceptable`, fresh process", figures(annotates), None, "<= 0.5 s", verdict(annotates, 0.5)),
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
