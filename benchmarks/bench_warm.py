"""A warm re-run of an unchanged suite against its cold run, both as a user runs them.

`evalsuite run SUITE -q` in a fresh process, twice on the same cache: the cold run loads the
embedded model, generates and scores; the warm run finds every generation in the cache (torch and
transformers are never imported, the model never loaded) and every score in the cache's scores
table (no scorer runs, no sandboxed code executes). Each round uses a new cache, so every cold run
is really cold. Target: warm / cold <= 0.03. Cold must come before warm within a round, so the
order is fixed; the rounds still pair each warm run with the cold run just before it.

The floor of a warm run is starting Python and the CLI: `evalsuite --help` in a fresh process is
timed in each round too, and printed beside the warm run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Row, judge, median, ratio


def write_suite(tmp: Path, per: int, max_new: int, bs: int) -> Path:
    import yaml

    raw = yaml.safe_load((REPO / "suites" / "demo.yaml").read_text())
    base = next(v for v in raw["variants"] if v.get("baseline"))
    raw["variants"] = [base]
    raw["generation"].update(max_new_tokens=max_new, batch_size=bs)
    raw["casesets"] = [dict(c, path=str((REPO / "suites" / c["path"]).resolve())) for c in raw["casesets"]]
    raw["output_dir"] = str(tmp / "out")
    raw["cache"] = str(tmp / "cache.sqlite")
    raw.pop("rubric", None)
    p = tmp / "suite.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def cli_run(suite: Path, per: int) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalsuite.cli", "run", str(suite), "-q", "--limit", str(per)], cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def cli_help() -> float:
    """The floor: a fresh interpreter importing the CLI and printing its help."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalsuite.cli", "--help"], cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[Row]:
    per, max_new, bs, rounds = (1, 16, 4, 2) if quick else (3, 96, 4, 3)  # full: the demo's quick profile (3 per scenario, 96 tokens)
    cold, warm, floor = [], [], []
    print(f"warm re-run: {per} case(s) per scenario, max_new_tokens {max_new}, {rounds} rounds", flush=True)
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            suite = write_suite(Path(tmp), per, max_new, bs)
            cold.append(cli_run(suite, per))
            warm.append(cli_run(suite, per))
            floor.append(cli_help())
        print(f"  [warm vs cold] round {r + 1}/{rounds}: cold {cold[-1]:.2f}s, warm {warm[-1]:.2f}s (floor: `evalsuite --help` {floor[-1]:.2f}s)", flush=True)
    ci = ratio(warm, cold)
    figures = f"cold {median(cold):.2f}s, warm {median(warm):.2f}s, CLI start floor {median(floor):.2f}s (medians)"
    return [Row("warm re-run vs cold run", "`evalsuite run` wall, fresh process each", figures, ci, "<= 0.03", judge(ci, 0.03))]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
