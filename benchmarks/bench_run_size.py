"""A large run stays small and fast to judge (issue 41): the run directory's size and the wall time of
`evalsuite gate`, `evalsuite report` and `evalsuite review flag` on a fake run of 10,000 cases x 4
variants (40,000 generations, 600,000 score records), each command in a fresh process as a user runs it.

Targets: the run directory at most 50 MB, `gate` at most 8 s. With `--against REF` (or
`python -m benchmarks`, which uses `PREVIOUS_REF` below) the same commands of the code at git REF
run too, on a copy of the run whose scores are the JSON lines that code stored (`scores.jsonl`,
written by `evalsuite export --format jsonl`), so the table shows before and after on one machine.
`--quick`: 1,000 cases; `--no-previous`: this checkout only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Row, code_root, load_average
from fake_suite import suite_file

#: the code before scores.parquet (issue 41 item 9): scores.jsonl, read on every command
PREVIOUS_REF = "b4b9e41"
MAX_RUN_MB = 50.0
MAX_GATE_S = 8.0
COMMANDS = ("gate", "report", "review flag")


def dir_mb(path: Path) -> float:
    """The size of the files under `path`, in MB (10^6 bytes)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def build_run(tmp: Path, cases: int, variants: int = 4) -> Path:
    """The fake run (generated and scored by this checkout, in this process); its run directory."""
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    (tmp / "suite").mkdir()
    path = suite_file(tmp / "suite", cases, 1, variants)
    t0 = time.perf_counter()
    res = run_suite(load_suite(path), RunOptions(progress=False))
    print(f"  [run size] built {cases} cases x {variants} variants ({res.generated} generations) in {time.perf_counter() - t0:.0f}s", flush=True)
    return Path(res.run_dir)


def command(name: str, run_dir: Path, work: Path) -> list[str]:
    """The command line of `name` on `run_dir`; what it writes (queue, ledger, report) goes under `work`."""
    runs = ["--runs-dir", str(run_dir.parent), "--rubric", str(REPO / "rubrics" / "default.yaml")]  # the previous code's root has no shipped files
    queue = ["--queue", str(work / "review.sqlite")]
    if name == "gate":
        return ["gate", run_dir.name, *runs, *queue, "--ledger", str(work / "ledger.sqlite")]
    if name == "report":
        return ["report", run_dir.name, *runs, *queue, "--ledger", str(work / "ledger.sqlite"), "--out", str(work / "report")]
    return ["review", "flag", run_dir.name, *runs, *queue]


def time_commands(run_dir: Path, root: Path) -> dict[str, float]:
    """Wall seconds of each command on `run_dir`, in a fresh process with `root`'s evalsuite."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    work = run_dir.parent.parent / f"work-{root.name}"
    work.mkdir(exist_ok=True)
    out = {}
    for name in COMMANDS:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "evalsuite.cli", *command(name, run_dir, work)], env=env, capture_output=True, text=True, timeout=900)
        out[name] = time.perf_counter() - t0
        if proc.returncode not in (0, 1, 3):  # passed, a regression, needs review: judged either way
            raise RuntimeError(f"{name} on {run_dir} ({root}): exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return out


def old_copy(run_dir: Path, into: Path) -> Path:
    """A copy of the run as the previous code stored it: scores.jsonl in place of scores.parquet."""
    from evalsuite.report.frames import export_run
    from evalsuite.run.store import RunStore

    copy = into / "runs" / run_dir.name
    shutil.copytree(run_dir, copy)
    export_run(RunStore(copy), copy, "jsonl")
    (copy / RunStore.SCORES).unlink()
    return copy


def run(quick: bool = False, against: str | None = PREVIOUS_REF) -> list[Row]:
    cases = 1000 if quick else 10_000
    load = load_average()
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("EVALSUITE_BENCH_TMP")) as t:
        tmp = Path(t)
        run_dir = build_run(tmp, cases)
        from evalsuite.run.store import RunStore

        size, scores = dir_mb(run_dir), (run_dir / RunStore.SCORES).stat().st_size / 1e6
        sides = {"this": (run_dir, REPO)}
        prev = code_root(against, tmp) if against else None
        if prev is not None:
            sides["previous"] = (old_copy(run_dir, tmp / "old"), prev)
        timed = {name: time_commands(d, root) for name, (d, root) in sides.items()}
        sizes = {name: (dir_mb(d), max(p.stat().st_size for p in d.glob("scores.*")) / 1e6) for name, (d, _) in sides.items()}
    after = load_average()
    label = f"{cases} cases x 4 variants, fake backend"
    for name, figs in timed.items():
        print(f"  [run size] {name}: run dir {sizes[name][0]:.1f} MB (scores {sizes[name][1]:.1f} MB); " + ", ".join(f"{k} {v:.1f}s" for k, v in figs.items()), flush=True)
    print(f"  [run size] load average {load:.1f} before, {after:.1f} after", flush=True)
    this = timed["this"]
    prev_note = ""
    if "previous" in timed:
        p = timed["previous"]
        prev_note = f"; previous code ({against}, scores.jsonl): run dir {sizes['previous'][0]:.1f} MB, " + ", ".join(f"{k} {v:.1f}s" for k, v in p.items())
    rows.append(
        Row(
            "run size and read time",
            f"{label}: run directory",
            f"{size:.1f} MB (scores.parquet {scores:.1f} MB){prev_note.split(', gate')[0] if prev_note else ''}",
            target=f"<= {MAX_RUN_MB:.0f} MB",
            verdict="met" if size <= MAX_RUN_MB else "NOT met",
        )
    )
    rows.append(
        Row(
            "run size and read time",
            f"{label}: gate, report, review flag (fresh processes)",
            ", ".join(f"{k} {v:.1f}s" for k, v in this.items()) + prev_note,
            target=f"gate <= {MAX_GATE_S:.0f} s",
            verdict="met" if this["gate"] <= MAX_GATE_S else "NOT met",
        )
    )
    return rows


if __name__ == "__main__":
    ref = sys.argv[sys.argv.index("--against") + 1] if "--against" in sys.argv else PREVIOUS_REF
    for row in run("--quick" in sys.argv, against=None if "--no-previous" in sys.argv else ref):
        print(" | ".join(row.cells()))
