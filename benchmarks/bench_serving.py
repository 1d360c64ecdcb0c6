"""Served variants beside the offline baseline, measured in one run on the same cases.

    python benchmarks/bench_serving.py [--cases-per-scenario 2] [--max-new-tokens 32] [--concurrency 4]

One `run_suite` of the embedded model with three variants, each started and stopped in turn:

- `offline`: the transformers backend in this process, one request at a time (the baseline);
- `served`: `transformers serve` on loopback, one request at a time (what HTTP and the server add);
- `served-cb`: `transformers serve --continuous-batching`, `--concurrency` requests in flight
  (what batching on the server does to latency, time to first token and throughput);
- `gguf-llamacpp` too when llama-cpp-python is installed (the shipped Q4_1 GGUF on llama.cpp).

Prints per variant: median time to first token, median latency, median per-request tokens/s,
aggregate tokens/s (all new tokens over the variant's wall time) and how many greedy outputs equal
the baseline's (each difference with the setting responsible, from evalsuite.backends.http_parity).
The figures are ratios measured side by side on one machine, not absolute claims.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _suite(tmp: Path, args) -> Path:
    variants = f"""
  - name: offline
    baseline: true
    backend: transformers
    model: embedded
    options: {{device: cpu}}
  - name: served
    backend: http
    options: {{serve: {{launcher: transformers}}, timeout_s: 600}}
  - name: served-cb
    backend: http
    generation: {{batch_size: {args.concurrency}}}
    options: {{serve: {{launcher: transformers, continuous_batching: true}}, concurrency: {args.concurrency}, timeout_s: 600}}
"""
    if importlib.util.find_spec("llama_cpp") is not None:
        variants += """
  - name: gguf-llamacpp
    backend: http
    options: {serve: {launcher: llama_cpp}, timeout_s: 600}
"""
    path = tmp / "bench-serving.yaml"
    path.write_text(
        f"""
schema_version: 1
name: bench-serving
casesets:
  - {{path: {REPO / 'casesets'}, tags: [easy]}}
generation: {{max_new_tokens: {args.max_new_tokens}, temperature: 0, batch_size: 1}}
variants:
{variants}
"""
    )
    return path


def _fmt(x, spec=".3f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases-per-scenario", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()

    from evalsuite.backends.http_parity import parity
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = load_suite(_suite(tmp, args))
        res = run_suite(suite, RunOptions(limit=args.cases_per_scenario, progress=True, score=False, cache_path=str(tmp / "cache.sqlite"), runs_dir=str(tmp / "runs")))
        gens = res.store.generations()

    base = [g for g in gens if g.variant == "offline"]
    print(f"\n{len(base)} cases, max_new_tokens {args.max_new_tokens}, greedy; served-cb: {args.concurrency} requests in flight")
    head = f"{'variant':<15}{'ok':>5}{'TTFT med s':>12}{'latency med s':>15}{'tok/s med':>11}{'tok/s aggregate':>17}{'same as offline':>17}"
    print(head)
    print("-" * len(head))
    for name, summary in res.variants.items():
        mine = [g for g in gens if g.variant == name]
        ok = [g for g in mine if g.ok]
        ttft = [g.ttft_s for g in ok if g.ttft_s is not None]
        agg = (summary.get("new_tokens") or 0) / summary["wall_s"] if summary.get("wall_s") else None
        rows = parity(base, mine) if name != "offline" else []
        same = f"{sum(r.identical for r in rows)}/{len(rows)}" if rows else "-"
        print(f"{name:<15}{len(ok):>5}{_fmt(statistics.median(ttft) if ttft else None):>12}{_fmt(summary.get('latency_median_s')):>15}{_fmt(summary.get('tokens_per_s_median'), '.1f'):>11}{_fmt(agg, '.1f'):>17}{same:>17}")
        for r in rows:
            if not r.identical:
                print(f"{'':<15}  {r.case_id}: {r.setting}: {r.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
