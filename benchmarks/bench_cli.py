"""How fast the command line answers, in a fresh process each time (as a user and CI meet it).

- `evalsuite --help`: starting Python, importing the CLI (every command registers itself; the
  libraries each command needs are imported inside it), printing the help. Target <= 0.3 s.
- `evalsuite review annotate ITEM --verdict acceptable`: one reviewer's verdict through the CLI, on a
  queue of open items this benchmark builds. Target <= 0.5 s.

Each round runs, one after the other, both commands and their floors, so all of them see the same
moments of a shared machine:

- `python -c pass`: the interpreter (and site-packages' start-up hooks);
- the help floor: a two-command typer app printing its `--help` (typer renders help with rich);
- the command floor: a one-command typer app taking an int and two options that prints its answer
  through rich, plus `import sqlite3` (typer 0.29 converts every option through a pydantic
  TypeAdapter, so any command with an option pays for importing pydantic; `--help` does not).

A command's figure minus its floor is what evalsuite itself adds. One untimed round first fills the
bytecode cache. Figures are wall seconds,
medians over rounds with a distribution-free 95% interval of the median (order statistics), so a
few runs slowed by the machine's other work move them little; the load averages printed before and
after say how loaded it was, and each command's CPU seconds (user + system), which waiting for a
core does not inflate, are printed beside its wall seconds. A target is met when the whole interval is under it, missed when the whole interval
is over it, within noise otherwise. The warm re-run against its cold run (target <= x0.03 of cold)
is `bench_warm`.
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Row, median

#: bytecode cached, as an installed package has it, but outside the checkout; PYTHONDONTWRITEBYTECODE
#: (set in some sandboxes) would recompile evalsuite's modules in every process
PYCACHE = Path(tempfile.gettempdir()) / "evalsuite-bench-cli-pycache"
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(PYCACHE)}

HELP_FLOOR = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def one(x: str = typer.Option("", help="an option")) -> None:
    "A command."
@app.command()
def two() -> None:
    "Another command."
app()
"""

COMMAND_FLOOR = """
import sqlite3
import typer
from rich.console import Console
app = typer.Typer(add_completion=False)
@app.callback()
def root() -> None:
    "A group."
@app.command()
def annotate(item: int, verdict: str = typer.Option(None), reviewer: str = typer.Option(None)) -> None:
    Console().print(item, verdict, reviewer)
app()
"""


CPU: dict[str, list[float]] = {}  #: CPU seconds (user + system) of each timed command, by name


def timed(cmd: list[str], name: str = "") -> float:
    """Wall seconds of `cmd` in a fresh process; its CPU seconds go to CPU[name]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(name, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalsuite.cli", *args]


def open_queue(tmp: Path, n: int) -> tuple[Path, list[int]]:
    """A review queue with `n` open items (the review-queue benchmark's synthetic ones)."""
    from bench_review_queue import items

    from evalsuite.review import api
    from evalsuite.review.store import ReviewStore

    queue = tmp / "review.sqlite"
    with ReviewStore(queue) as q:
        q.add_items(items(n))
    return queue, [it["id"] for it in api.list_items(queue, status="open")]


def median_ci(xs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """The median and its distribution-free interval: the order statistics x(k), x(n-k+1) with
    P(Binomial(n, 1/2) < k) <= (1 - level) / 2 (no assumption on the shape of the timings)."""
    s, n = sorted(xs), len(xs)
    k, tail = 0, 0.0
    while k < n // 2:
        nxt = tail + math.comb(n, k) / 2**n
        if nxt > (1 - level) / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:  # too few runs for an interval at this level
        return median(s), float("nan"), float("nan")
    return median(s), s[k - 1], s[n - k]


def verdict(xs: list[float], limit: float, floor: list[float]) -> str:
    """met / NOT met / within noise; a miss says so when the floor alone (typer, no evalsuite) is
    over the target too: then the machine's load, not evalsuite, decided it."""
    _, lo, hi = median_ci(xs)
    if math.isnan(lo):
        met, missed = median(xs) <= limit, median(xs) > limit
    else:
        met, missed = hi <= limit, lo > limit
    if met:
        return "met"
    if not missed:
        return "within noise"
    return "NOT met (the floor alone is over the target: a loaded machine)" if median(floor) > limit else "NOT met"


def figures(xs: list[float], floor: list[float] | None = None) -> str:
    m, lo, hi = median_ci(xs)
    own = f"; evalsuite's own share {m - median(floor):.3f}s over the floor's median {median(floor):.3f}s" if floor else ""
    return f"median {m:.3f}s [{lo:.3f}, {hi:.3f}], min {min(xs):.3f}s, {len(xs)} runs{own}"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def run(quick: bool = False) -> list[Row]:
    rounds = 7 if quick else 25
    t = {k: [] for k in ("python", "help floor", "help", "command floor", "annotate")}
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        queue, items = open_queue(Path(tmp), rounds + 1)
        timed(cli("--help"))  # the untimed round: bytecode for every module the commands import
        timed([sys.executable, "-c", HELP_FLOOR, "--help"])
        timed([sys.executable, "-c", COMMAND_FLOOR, "annotate", "0", "--verdict", "acceptable"])
        timed(cli("review", "annotate", str(items[-1]), "--verdict", "acceptable", "--reviewer", "warm-up", "--queue", str(queue)))
        for r in range(rounds):  # interleaved: every command sees the same moments of the machine
            t["python"].append(timed([sys.executable, "-c", "pass"], "python"))
            t["help floor"].append(timed([sys.executable, "-c", HELP_FLOOR, "--help"], "help floor"))
            t["help"].append(timed(cli("--help"), "help"))
            t["command floor"].append(
                timed([sys.executable, "-c", COMMAND_FLOOR, "annotate", str(r), "--verdict", "acceptable", "--reviewer", "x"], "command floor")
            )
            annotate = ["review", "annotate", str(items[r % len(items)]), "--verdict", "acceptable", "--reviewer", f"bench{r}", "--queue", str(queue)]
            t["annotate"].append(timed(cli(*annotate), "annotate"))
    print(f"  [cli] {rounds} interleaved rounds; load average (1/5/15 min) {load_before} before, {load()} after", flush=True)

    def cell(name: str, floor: str = "") -> str:
        return f"wall {figures(t[name], t[floor] if floor else None)}; CPU median {median(CPU[name]):.3f}s"

    for name in t:
        print(f"  [cli] {name}: {cell(name)}", flush=True)
    help_ok, annotate_ok = verdict(t["help"], 0.3, t["help floor"]), verdict(t["annotate"], 0.5, t["command floor"])
    print(f"  [cli] target `evalsuite --help` <= 0.3 s: {help_ok}; `evalsuite review annotate` <= 0.5 s: {annotate_ok}", flush=True)
    return [
        Row("Python start", "`python -c pass`, fresh process", cell("python")),
        Row("typer help floor", "a two-command typer app's `--help`, fresh process", cell("help floor")),
        Row("CLI start", "`evalsuite --help`, fresh process", cell("help", "help floor"), None, "<= 0.3 s", help_ok),
        Row("typer command floor", "a one-command typer app run with an int and two options, printing through rich", cell("command floor")),
        Row(
            "review annotate",
            "`evalsuite review annotate ITEM --verdict acceptable`, fresh process",
            cell("annotate", "command floor"),
            None,
            "<= 0.5 s",
            annotate_ok,
        ),
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
