"""A load run of the embedded model served by `transformers serve`, with and without continuous
batching (suites/load.yaml, docs/load.md), and its figures per level.

    python benchmarks/bench_load.py [--suite suites/load.yaml] [--out DIR] [--vllm]

Runs the suite end to end (generation at rest, the at-rest rerun, the load windows, scoring) into a
fresh directory, judges it with the suite's rubric and prints, per served variant and level: p95
TTFT, end-to-end p95, aggregate tokens/s, errors and timeouts, the TTFT p95 ratio against the
baseline's server, and how many replayed answers changed or flipped against the variant at rest
(the at-rest rerun's count beside it), then the wall time of the whole run; and writes the HTML
report (its "Stability under load" section has the latency-against-concurrency curve). `--vllm` adds a
variant served by vLLM's OpenAI server (needs `make vllm`; EVALSUITE_VLLM_PYTHON names its python).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VLLM_VARIANT = """  - name: served-vllm
    backend: http
    model: embedded
    options: {serve: {launcher: vllm, args: [--dtype, bfloat16, --max-model-len, '2048', --enforce-eager]}, timeout_s: 600, verify_settings: false}
"""


def _suite_copy(src: Path, out: Path, vllm: bool) -> Path:
    """The suite with its paths made absolute and its output under `out`."""
    text = src.read_text("utf-8").replace("../casesets", str(REPO / "casesets")).replace("../rubrics", str(REPO / "rubrics"))
    text = text.replace("output_dir: ../reports", f"output_dir: {out}")
    if vllm:
        text = text.replace("\nload:", "\n" + VLLM_VARIANT + "load:", 1)
    path = out / src.name
    path.write_text(text, "utf-8")
    return path


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(REPO / "suites" / "load.yaml"))
    ap.add_argument("--out", default=None, help="directory for the run (default: a temporary one)")
    ap.add_argument("--vllm", action="store_true", help="add a vLLM-served variant")
    args = ap.parse_args(argv)

    from evalsuite.cases.suite import load_suite
    from evalsuite.judge import judge_run
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    out = Path(args.out or tempfile.mkdtemp(prefix="evalsuite-load-"))
    out.mkdir(parents=True, exist_ok=True)
    suite = load_suite(_suite_copy(Path(args.suite), out, args.vllm))
    t0 = time.perf_counter()
    result = run_suite(suite, RunOptions(progress=True, runs_dir=str(out / "runs"), cache_path=str(out / "cache.sqlite")))
    wall = time.perf_counter() - t0
    judgment = judge_run(result.store, queue=out / "review.sqlite")
    load = judgment.comparison.load
    print(f"\nrun {result.store.run_id} ({result.store.dir}): {wall / 60:.1f} min wall, {os.cpu_count()} CPUs")
    print(
        f"{'variant':<14} {'level':>5} {'reqs':>5} {'err':>4} {'t/o':>4} {'TTFT p95 s':>10} {'e2e p95 s':>10} {'tok/s':>7} {'TTFT x base':>22} {'changed':>8} {'flips (rest)':>13}"
    )
    for v in load.variants:
        rest = load.rest(v)
        for lv in ([rest] if rest else []) + load.for_variant(v):
            floor = "" if lv.level == 0 or rest is None else f" ({len(rest.flips)})"
            ratio = lv.ttft_p95_ratio
            ratio_txt = "-" if ratio is None else f"{ratio.ratio:.2f} [{ratio.low:.2f}, {ratio.high:.2f}]"
            print(
                f"{v:<14} {('rest' if lv.level == 0 else lv.level):>5} {lv.requests:>5} {lv.errors:>4} {lv.timeouts:>4} {_fmt(lv.ttft_s['p95']):>10} "
                f"{_fmt(lv.e2e_s['p95']):>10} {_fmt(lv.tokens_per_s, '.1f'):>7} {ratio_txt:>22} {len(lv.changed):>4}/{lv.replayed:<3} {len(lv.flips):>8}{floor}"
            )
    from evalsuite.report.api import write_report

    report = write_report(judgment, out_dir=out / "report")
    print(f"verdict: {judgment.verdict.status}; report (Stability under load, with the curve): {report.html}")
    for r in judgment.verdict.results:
        if r.rule.startswith(("batch", "load")):
            print(f"  {r.variant} {r.rule}: {r.status}: {(r.violations[0].reason if r.violations else r.note)[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
