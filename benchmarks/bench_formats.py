"""The new variant kinds on the embedded model, each against the fp32 baseline, measured in one run.

    python benchmarks/bench_formats.py [--kinds w8a8,w4a16,fp8,awq,torchao-int8,torchao-int8-dynamic,hqq4]
                                       [--rounds 4] [--threads 1] [--cache-dir DIR]

Per kind it prints:
- build: seconds to build the checkpoint from cold (llm-compressor, AWQ: in a fresh cache
  directory), or to load and quantize at load (torchao, HQQ; the baseline's own load beside it);
- weights MB: the loaded weights (quantized tensors at their stored size) and, for checkpoints, the
  safetensors on disk (the fp32 embedding of the 135M model is 113 MB of the baseline's 513 MB and
  stays unquantized in every kind);
- tokens/s ratio variant/baseline: a few requests generated alternately (A B B A ...) for `rounds`
  rounds with both models loaded, geometric mean of the per-round ratios with its 95% interval
  (benchmarks/common.py: the machine is shared and noisy, so no figure is compared across time);
- KL(baseline || variant) and top-1 agreement, teacher-forced on the baseline's outputs over the
  demo profile (evalsuite.scoring.logits, as the demo computes them);
- same as baseline: greedy outputs identical to the baseline's, token for token, on the demo
  profile (suites/demo.yaml: 3 easy cases per scenario, max_new_tokens 96, batch size 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import REPO, paired, ratio  # noqa: E402

KINDS = {
    "w8a8": {"method": "llm-compressor", "scheme": "W8A8"},
    "w4a16": {"method": "llm-compressor", "scheme": "W4A16", "group_size": 64},
    "fp8": {"method": "llm-compressor", "scheme": "FP8_DYNAMIC"},
    "awq": {"method": "awq", "bits": 4, "group_size": 64, "calibration": str(REPO / "casesets")},
    "torchao-int8": {"method": "torchao", "scheme": "int8_weight_only"},
    "torchao-int8-dynamic": {"method": "torchao", "scheme": "int8_dynamic"},
    "hqq4": {"method": "hqq", "bits": 4, "group_size": 64},
}
BUILT = ("llm-compressor", "awq")
TIMING_PROMPTS = ("Explain what a VPN is in three sentences.", "Write a Python function that reverses a string.", "Describe a cat to a child.")


def _variant(base, name: str, q: dict | None, opts: dict):
    return replace(base, name=name, quantization=q, baseline=q is None, options={**base.options, **opts})


def _disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).glob("*.safetensors")) / 2**20


def build(kind: str, q: dict, base_dir: Path, cache_dir: str) -> tuple[float | None, float | None]:
    """Seconds to build a checkpoint kind from cold, and its safetensors MB; (None, None) for at-load kinds."""
    from evalsuite.models import formats

    if q["method"] not in BUILT:
        return None, None
    t0 = time.perf_counter()
    path = formats.checkpoint_dir(q["method"], base_dir, q, cache_dir)
    return time.perf_counter() - t0, _disk_mb(path)


def load(variant):
    from evalsuite.backends.transformers import TransformersBackend

    be = TransformersBackend(variant)
    t0 = time.perf_counter()
    be.load()
    return be, time.perf_counter() - t0


def timing(base_be, var_be, reqs, rounds: int):
    """Per-round tokens/s of the baseline and the variant, generated alternately."""

    def run(be):
        gens = [be.generate([r])[0] for r in reqs]
        return sum(g.new_tokens for g in gens)

    run(var_be)  # warm-up: first calls allocate, decompress, repack
    ta, tb, na, nb = paired(lambda: run(base_be), lambda: run(var_be), rounds)
    return [n / t for n, t in zip(na, ta)], [n / t for n, t in zip(nb, tb)]


def agreement(base_be, var_be, reqs, base_gens) -> dict:
    from evalsuite.scoring.logits import logit_agreement

    rows = logit_agreement(base_be, var_be, reqs, [g.extra["token_ids"] for g in base_gens])
    kls = [r["kl_mean"] for r in rows if r["kl_mean"] is not None]
    top1 = [r["top1_agreement"] for r in rows if r["top1_agreement"] is not None]
    return {"kl": statistics.fmean(kls) if kls else None, "top1": statistics.fmean(top1) if top1 else None}


def measure(kind: str, ctx: dict) -> dict:
    """Every figure of one kind (the baseline backend and its demo-profile outputs are in ctx)."""
    q = KINDS[kind]
    build_s, disk_mb = build(kind, q, ctx["base_dir"], ctx["cache_dir"])
    var_be, load_s = load(_variant(ctx["base"], kind, q, ctx["opts"]))
    try:
        tps_b, tps_v = timing(ctx["base_be"], var_be, ctx["timing_reqs"], ctx["rounds"])
        demo = [var_be.generate([r])[0] for r in ctx["demo_reqs"]]
        same = sum(g.extra["token_ids"] == b.extra["token_ids"] for g, b in zip(demo, ctx["base_gens"]))
        agree = agreement(ctx["base_be"], var_be, ctx["demo_reqs"], ctx["base_gens"])
        return {
            "kind": kind,
            "build_s": build_s,
            "load_s": load_s,
            "weights_mb": var_be.model_memory_mb(),
            "disk_mb": disk_mb,
            "tps": ratio(tps_v, tps_b),
            "tps_v": statistics.median(tps_v),
            "tps_b": statistics.median(tps_b),
            "same": f"{same}/{len(demo)}",
            **agree,
        }
    finally:
        var_be.close()


def setup(args) -> dict:
    import torch

    from evalsuite.cases.suite import load_suite
    from evalsuite.models import ensure_embedded_model
    from evalsuite.run.prompting import build_requests
    from evalsuite.run.runner import select_cases

    if args.threads:
        torch.set_num_threads(args.threads)
    suite = load_suite(REPO / "suites" / "demo.yaml")
    opts = {"device": "cpu", "dtype": "float32"} | ({"threads": args.threads} if args.threads else {})
    base = _variant(suite.baseline, "baseline", None, opts)
    base = replace(base, generation=replace(base.generation, max_new_tokens=96, batch_size=1))
    demo_reqs = build_requests(select_cases(replace(suite, variants=(base,)), None, 3), base)
    timing_base = replace(base, generation=replace(base.generation, max_new_tokens=args.timing_tokens))
    timing_reqs = [r for r in build_requests(select_cases(replace(suite, variants=(timing_base,)), None, 1), timing_base)]
    base_be, base_load = load(base)
    base_gens = [base_be.generate([r])[0] for r in demo_reqs]
    print(
        f"baseline: load {base_load:.1f}s, {base_be.model_memory_mb():.0f} MB, {len(demo_reqs)} demo-profile requests, torch threads {torch.get_num_threads()}",
        flush=True,
    )
    return {
        "base": base,
        "base_be": base_be,
        "base_dir": ensure_embedded_model(),
        "base_gens": base_gens,
        "demo_reqs": demo_reqs,
        "timing_reqs": timing_reqs,
        "rounds": args.rounds,
        "opts": opts,
        "cache_dir": args.cache_dir or tempfile.mkdtemp(prefix="bench-formats-"),
    }


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[dict]) -> str:
    head = (
        "| kind | build s | load s | weights MB (loaded / on disk) | tokens/s variant vs baseline (median) | ratio [95% CI] | KL | top-1 | same as baseline |"
    )
    out = [head, "|" + "---|" * 9]
    for r in rows:
        out.append(
            f"| {r['kind']} | {_fmt(r['build_s'], '.0f')} | {_fmt(r['load_s'], '.1f')} | {_fmt(r['weights_mb'], '.0f')} / {_fmt(r['disk_mb'], '.0f')} | "
            f"{r['tps_v']:.1f} vs {r['tps_b']:.1f} | {r['tps'].text()} | {_fmt(r['kl'], '.4f')} | {_fmt(r['top1'], '.3f')} | {r['same']} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated: {', '.join(KINDS)}")
    ap.add_argument("--rounds", type=int, default=4, help="timing rounds per kind (each: baseline and variant, alternating order)")
    ap.add_argument("--timing-tokens", type=int, default=32, help="max_new_tokens of the timing requests (one per scenario)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--cache-dir", default=None, help="where checkpoints are built (default: a fresh temporary directory: cold builds)")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        ap.error(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    ctx = setup(args)
    rows = []
    for kind in kinds:
        t0 = time.perf_counter()
        rows.append(measure(kind, ctx))
        r = rows[-1]
        print(
            f"{kind}: build {_fmt(r['build_s'], '.0f')}s, load {r['load_s']:.1f}s, {r['weights_mb']:.0f} MB, tokens/s {r['tps'].text()}, "
            f"KL {_fmt(r['kl'], '.4f')}, top-1 {_fmt(r['top1'], '.3f')}, same {r['same']} ({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )
    print("\n" + table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
