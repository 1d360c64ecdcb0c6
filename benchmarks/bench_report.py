"""Report rendering on a 500-case, 6-variant run: seconds to write report.html + report.md, and size.

    python benchmarks/bench_report.py [--kb 250 --code 60 --brand 190] [--run DIR]

The run is made with the fake backend (tests/verdict_synth.py's case sets, each variant with a
planted regression on 10% of its cases, plus a noise rerun of the baseline) and scored by the real
scorers, once; `--run DIR` reuses a stored run. Then `write_report` runs twice in this process
(imports warm after the first) and prints the time of each stage (read + compare, gate + evidence,
plots, HTML/markdown) and the size of report.html. The issue's bar: under 10 s and under 20 MB.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

KINDS = ["drop_citations", "corrupt_json", "break_code", "forbidden_terms", "leak_canary", None]  #: six variants, one clean


def make_run(root: Path, kb: int, code: int, brand: int):
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite
    from verdict_synth import write_sets, write_suite

    outputs = write_sets(root, n_kb=kb, n_code=code, n_brand=brand)
    variants = [{"name": "baseline-rerun", "noise": True}]
    for i, kind in enumerate(KINDS):
        v = {"name": f"v{i}-{kind or 'clean'}", "quantization": {"method": "bnb", "bits": 4 + i}}
        if kind:
            v["degrade"] = {"kind": kind, "rate": 0.1, "seed": i}
        variants.append(v)
    suite = write_suite(root, outputs, variants, name="bench")
    return run_suite(load_suite(suite), RunOptions(progress=True)).store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=int, default=250)
    ap.add_argument("--code", type=int, default=60)
    ap.add_argument("--brand", type=int, default=190)
    ap.add_argument("--run", help="a stored run to report on (skips making one)")
    args = ap.parse_args()

    from evalsuite.judge import judge_run
    from evalsuite.report import write_report
    from evalsuite.run.store import RunStore

    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    if args.run:
        store = RunStore(args.run)
    else:
        t = time.perf_counter()
        store = make_run(tmp, args.kb, args.code, args.brand)
        print(f"made run {store.dir} in {time.perf_counter() - t:.1f}s (generation with the fake backend + scoring; not part of the report)")
    cases = len({g.case_id for g in store.generations()})
    suite_variants = store.suite.get("variants") or []
    noise = sum(1 for v in suite_variants if v.get("noise"))
    print(f"run: {cases} cases, {len(suite_variants) - 1 - noise} variants and {noise} noise rerun(s) besides the baseline")
    for attempt in ("first (cold imports)", "second (warm)"):
        t, cpu = time.perf_counter(), time.process_time()
        res = write_report(judge_run(store, None, "production"), out_dir=tmp / "report")
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        mb = res.html.stat().st_size / 1e6
        stages = ", ".join(f"{k} {v:.2f}s" for k, v in res.seconds.items() if k != "total")
        print(f"{attempt}: report written in {wall:.2f}s wall, {cpu:.2f}s CPU ({stages}); report.html {mb:.2f} MB, "
              f"{res.data.flagged_total} flagged cases, {len(res.data.metric_rows)} metric rows")
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        print(f"note: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: wall times are inflated by other processes; CPU seconds are the steadier figure")
    print(f"bar: under 10 s -> {'yes' if wall < 10 else 'NO'}; under 20 MB -> {'yes' if mb < 20 else 'NO'}  ({res.html})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
