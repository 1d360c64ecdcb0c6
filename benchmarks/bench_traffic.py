"""Importing traffic: `evalsuite cases from-traffic` on 5,000 and 50,000 generated requests (the three logged
formats, 40% exact or near copies, Chinese requests, response_format and tools requests, planted secrets:
tests/traffic_synth.py), 25 cases per stratum.

    python benchmarks/bench_traffic.py [--sizes 5000,50000] [--rounds 3] [--per-stratum 25]

Prints, per size, the seconds to import (read, infer, deduplicate, sample, scrub, write) as the median over
rounds, after one warm-up import that loads the libraries (presidio, detect-secrets, datasketch: their
one-time import is printed on its own). Run it on an otherwise idle machine: the figures are for the
issue's closing note, and a busy machine moves them by tens of percent.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import REPO, Row  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from traffic_synth import write_traffic  # noqa: E402


def libraries_s() -> float:
    """Seconds to load the scrubbing and MinHash libraries (once per process)."""
    t0 = time.perf_counter()
    from evalsuite.cases.traffic.sample import dedup  # noqa: F401
    from evalsuite.cases.traffic.scrub import Scrubber

    Scrubber().text("warm-up a@example.com")
    return time.perf_counter() - t0


def import_s(files: list[Path], out: Path, per_stratum: int) -> tuple[float, dict]:
    from evalsuite.cases.traffic import TrafficSettings, from_traffic

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    report = from_traffic(files, TrafficSettings(out=out, per_stratum=per_stratum))
    return time.perf_counter() - t0, report.to_dict()


def measure(sizes: list[int], rounds: int, per_stratum: int) -> list[dict]:
    """Per size: median and min seconds of the import, cases written, duplicate ratio, replacements."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            files, _ = write_traffic(Path(tmp) / f"logs-{n}", n, seed=n)
            times, rep = [], {}
            for _ in range(rounds):
                s, rep = import_s(files, Path(tmp) / f"out-{n}", per_stratum)
                times.append(s)
            out.append(
                {
                    "n": n,
                    "median": statistics.median(times),
                    "min": min(times),
                    "cases": rep["cases"],
                    "dup": rep["duplicate_ratio"],
                    "repl": rep["replacements"],
                }
            )
    return out


def run(quick: bool = False) -> list[Row]:
    """`python -m benchmarks --only traffic` (not in its default list: give it its own idle machine)."""
    libs = libraries_s()
    rows = [Row("traffic", "libraries loaded (once per process)", f"{libs:.2f} s")]
    for r in measure([500] if quick else [5000, 50000], 1 if quick else 3, 25):
        rows.append(Row("traffic", f"from-traffic, {r['n']} requests", f"{r['median']:.2f} s median ({r['cases']} cases, duplicate ratio {r['dup']:.2f})"))
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000,50000", help="numbers of requests, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-stratum", type=int, default=25)
    args = ap.parse_args(argv)
    print(f"libraries loaded in {libraries_s():.2f} s (once per process)")
    print(f"{'requests':>9} {'median s':>9} {'min s':>7} {'cases':>6} {'dup ratio':>9}  replacements")
    for r in measure([int(x) for x in args.sizes.split(",")], args.rounds, args.per_stratum):
        reps = ", ".join(f"{k} {v}" for k, v in sorted(r["repl"].items()))
        print(f"{r['n']:>9} {r['median']:>9.2f} {r['min']:>7.2f} {r['cases']:>6} {r['dup']:>9.3f}  {reps}")


if __name__ == "__main__":
    main()
