"""What every benchmark shares: paired interleaved timing, result rows and the table.

Timings on a shared machine drift by tens of percent within minutes, so no benchmark compares two
figures taken at different times: A and B run alternately (A B B A ...) on the same cases and
settings, and the ratio is the geometric mean of the per-round ratios with its 95% interval
(evalsuite.perf.stats.paired_ratio: the same statistics the gate uses for performance rules).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from evalsuite.perf.stats import RatioCI, paired_ratio  # noqa: E402


@dataclass
class Row:
    """One line of the benchmark table."""

    bench: str
    measure: str
    figures: str  #: what was measured (seconds, rates), as text
    ratio: RatioCI | None = None  #: A/B, paired over rounds
    target: str = ""  #: e.g. "<= 1.05"
    verdict: str = ""  #: met / not met / not judged / error
    load_before: float | None = None  #: 1-minute load average when the row's benchmark started
    load_after: float | None = None  #: ... and when it ended (the benchmark's own processes included)
    others: float | None = None  #: mean runnable tasks outside the benchmark's processes while it ran (OtherLoad)

    def cells(self) -> list[str]:
        load = "-" if self.load_before is None else f"{self.load_before:.1f} / {self.load_after:.1f}"
        if self.others is not None:
            load += f" (others {self.others:.2f})"
        return [self.bench, self.measure, self.figures, self.ratio.text() if self.ratio else "-", self.target or "-", self.verdict or "-", load]


#: the verdict a busy row gets in place of "met" (a figure taken while other jobs share the cores is not a result)
BUSY = "busy machine"


def load_average() -> float:
    """The 1-minute load average (nan where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def core_count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def is_busy(load: float, cores: int) -> bool:
    """A machine whose 1-minute load average is above its core count is busy."""
    return load == load and load > cores  # nan (no load average) is not busy


def settle(read: Callable[[], float], limit: float = 1.0, wait_s: float = 120.0) -> float:
    """Wait (at most `wait_s`) for the load average `read()` gives to fall to `limit`, so that a
    benchmark's "before" reading is the machine's and not the previous benchmark's own tail; returns
    the last reading."""
    t0 = time.monotonic()
    load = read()
    while load == load and load > limit and time.monotonic() - t0 < wait_s:
        time.sleep(5)
        load = read()
    return load


class OtherLoad:
    """The load the machine's other jobs put on it while a benchmark runs: the mean number of
    runnable tasks (threads in state R, as the load average counts them) outside this process and
    its descendants, sampled every `interval` seconds from /proc. The 1-minute load average after a
    benchmark counts the benchmark's own processes too (the sandbox benchmarks run two programs at
    once), so it cannot tell a busy machine from a busy benchmark; this can. nan without /proc."""

    def __init__(self, interval: float = 1.0):
        import threading

        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _tasks() -> tuple[dict[int, int], dict[int, int]] | None:
        """pid -> parent pid, and pid -> runnable threads, for every process; None without /proc."""
        proc = Path("/proc")
        if not (proc / "self" / "stat").exists():
            return None
        parents: dict[int, int] = {}
        running: dict[int, int] = {}
        for d in proc.iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
                parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                n = 0
                for t in (d / "task").iterdir():
                    if (t / "stat").read_text().rsplit(")", 1)[1].split()[0] == "R":
                        n += 1
                running[int(d.name)] = n
            except (OSError, ValueError, IndexError):  # the process ended while being read
                continue
        return parents, running

    def sample(self, root: int | None = None) -> int | None:
        """Runnable tasks now outside `root` (default: this process) and its descendants."""
        got = self._tasks()
        if got is None:
            return None
        parents, running = got
        ours = {os.getpid() if root is None else root}
        grew = True
        while grew:  # descendants of this process, however deep
            new = {p for p, pp in parents.items() if pp in ours and p not in ours}
            ours |= new
            grew = bool(new)
        return sum(n for p, n in running.items() if p not in ours)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            n = self.sample()
            if n is not None:
                self.samples.append(n)

    def __enter__(self) -> OtherLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else float("nan")


def with_load(rows: list[Row], before: float, after: float, cores: int, others: float = float("nan")) -> list[Row]:
    """`rows` with the load averages before and after recorded, and the other jobs' mean load while
    the benchmark ran (OtherLoad). Busy: the load average before the benchmark above the core count,
    or the other jobs keeping at least half the cores busy while it ran (the reading after is the
    benchmark's own load, not a sign of a busy machine). A busy row's verdict is prefixed
    "busy machine", and a busy row never reads "met"."""
    from dataclasses import replace

    busy = is_busy(before, cores) or (others == others and others >= cores / 2)
    out = []
    for r in rows:
        verdict = r.verdict
        if busy and verdict not in ("", "-", "error"):
            verdict = BUSY if verdict == "met" else f"{BUSY} ({verdict})"
        out.append(replace(r, verdict=verdict, load_before=before, load_after=after, others=None if others != others else others))
    return out


def judge(ci: RatioCI, limit: float, kind: str = "max") -> str:
    """met (the whole interval on the right side), not met (the whole interval on the wrong side),
    or "within noise" (the interval straddles the target)."""
    from evalsuite.perf.verdict import judge_ratio

    status = judge_ratio(ci, limit, kind).status
    return {"pass": "met", "fail": "NOT met", "cannot_judge": "within noise"}[status]


def paired(a: Callable[[], Any], b: Callable[[], Any], rounds: int, label: str = "") -> tuple[list[float], list[float], list[Any], list[Any]]:
    """Run a and b alternately (ABBA...), `rounds` each; wall seconds and results of each call."""
    ta, tb, ra, rb = [], [], [], []
    for r in range(rounds):
        for which in ("ab" if r % 2 == 0 else "ba"):
            fn, times, results = (a, ta, ra) if which == "a" else (b, tb, rb)
            t0 = time.perf_counter()
            results.append(fn())
            times.append(time.perf_counter() - t0)
        if label:
            print(f"  [{label}] round {r + 1}/{rounds}: {ta[-1]:.2f}s vs {tb[-1]:.2f}s", flush=True)
    return ta, tb, ra, rb


def ratio(num: list[float], den: list[float]) -> RatioCI:
    """num/den per round, geometric mean and 95% interval."""
    return paired_ratio(den, num)


def median(xs: list[float]) -> float:
    import statistics

    return statistics.median(xs)


def write_table(rows: list[Row], path: Path, header: str) -> None:
    """The markdown table (written atomically: a killed run leaves the last complete table)."""
    from evalsuite.yamlio import atomic_write_text

    cols = ["benchmark", "measure", "figures", "ratio [95% CI]", "target", "verdict", "load before / after"]
    lines = [header, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in r.cells()) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")


def embedded_suite(cases_per_scenario: int, max_new_tokens: int, batch_size: int, scenarios=("kb_qa", "brand", "code")):
    """The demo suite's baseline alone (the embedded model), with small settings, and its cases."""
    from dataclasses import replace

    from evalsuite.run.runner import select_cases
    from evalsuite.cases.suite import load_suite

    suite = load_suite(REPO / "suites" / "demo.yaml")
    base = suite.baseline
    base = replace(base, generation=replace(base.generation, max_new_tokens=max_new_tokens, batch_size=batch_size))
    only = replace(suite, variants=(base,), generation=base.generation)
    cases = select_cases(only, list(scenarios), cases_per_scenario)
    return only, base, cases


# ---------------------------------------------------------------------------------------------
# the previous code, side by side with this checkout

#: the last commit before the bookkeeping work of issue 25 (batched cache, in-memory generations):
#: `bench_bookkeeping` and `bench_adaptive` run it beside this checkout to show the change
PREVIOUS_REF = "2e80882"


def code_root(ref: str, into: Path) -> Path | None:
    """This repository's `evalsuite/` package at git `ref`, extracted under `into` (a root to put on
    PYTHONPATH); None when git or the ref is not available (a copy without history)."""
    import subprocess
    import tarfile

    out = into / f"evalsuite-{ref}"
    try:
        data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref, "evalsuite"], capture_output=True, check=True, timeout=120).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=__import__("io").BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    return out


def run_child(script: Path, root: Path, *args: str, timeout: float = 1800) -> dict:
    """`python script ARGS` with `root`'s evalsuite first on the path; the JSON its last line prints."""
    import json
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} on {root}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mean_ci(xs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of repeated figures and its Student t interval."""
    import statistics

    from scipy import stats

    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - half, m + half
