"""Generation speed on the embedded model, measured side by side in one process on the same cases.

    python benchmarks/bench_generation.py [--cases-per-scenario 2] [--max-new-tokens 48] [--batch-size 4]

Prints:
1. tokens/s of unbatched (one request at a time) vs batched generation, and how many greedy
   outputs differ between the two (left padding changes the numerics);
2. tokens/s of prompt-lookup speculative decoding vs the baseline (both one request at a time);
3. the suite's wall time (run_suite: fingerprints, cache, store, progress off, scoring off) vs a
   plain `model.generate` loop over the same batches: the overhead ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _tps(gens, wall):
    toks = sum(g.new_tokens for g in gens)
    return toks, toks / wall if wall > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(REPO / "suites" / "demo.yaml"))
    ap.add_argument("--cases-per-scenario", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=4)
    args = ap.parse_args()

    import torch

    from evalsuite.backends.transformers import TransformersBackend
    from evalsuite.run.prompting import batches as _batches
    from evalsuite.run.runner import RunOptions, build_requests, select_cases
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    suite = load_suite(args.suite)
    base_v = suite.baseline
    gen = replace(base_v.generation, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    base_v = replace(base_v, generation=gen)
    cases = select_cases(suite, None, args.cases_per_scenario)
    reqs = build_requests(cases, base_v)
    print(f"{len(reqs)} requests ({args.cases_per_scenario} per scenario), max_new_tokens {args.max_new_tokens}, batch size {args.batch_size}, torch threads {torch.get_num_threads()}")

    be = TransformersBackend(base_v)
    t0 = time.perf_counter()
    be.load()
    print(f"baseline load: {time.perf_counter() - t0:.1f}s")
    be.generate([reqs[0]])  # warm-up (first call allocates and initialises kernels)

    # 1. unbatched vs batched ------------------------------------------------------------------
    t0 = time.perf_counter()
    single = [be.generate([r])[0] for r in reqs]
    wall_single = time.perf_counter() - t0
    batches = _batches(list(reqs), args.batch_size)
    t0 = time.perf_counter()
    batched = {}
    for b in batches:
        for r, g in zip(b, be.generate(b)):
            batched[(r.case_id, r.sample)] = g
    wall_batched = time.perf_counter() - t0
    n1, tps1 = _tps(single, wall_single)
    nb, tpsb = _tps(batched.values(), wall_batched)
    differ = sum(1 for r, g in zip(reqs, single) if batched[(r.case_id, r.sample)].extra["token_ids"] != g.extra["token_ids"])
    print("\n== batched vs unbatched (baseline, greedy)")
    print(f"unbatched: {n1} tokens in {wall_single:.1f}s = {tps1:.1f} tokens/s")
    print(f"batched ({args.batch_size}): {nb} tokens in {wall_batched:.1f}s = {tpsb:.1f} tokens/s")
    print(f"speed-up: x{tpsb / tps1:.2f}; greedy outputs that differ between batched and unbatched: {differ}/{len(reqs)}")

    # 2. prompt lookup vs baseline ---------------------------------------------------------------
    pl = TransformersBackend(replace(base_v, name="prompt-lookup", speculative={"method": "prompt_lookup", "num_tokens": 10}))
    pl.load()
    pl.generate([reqs[0]])
    t0 = time.perf_counter()
    lookup = [pl.generate([r])[0] for r in reqs]
    wall_pl = time.perf_counter() - t0
    npl, tpspl = _tps(lookup, wall_pl)
    same = sum(1 for a, b in zip(single, lookup) if a.extra["token_ids"] == b.extra["token_ids"])
    print("\n== prompt lookup (num_tokens 10) vs baseline, one request at a time")
    print(f"baseline: {tps1:.1f} tokens/s; prompt lookup: {npl} tokens in {wall_pl:.1f}s = {tpspl:.1f} tokens/s; ratio x{tpspl / tps1:.2f}")
    print(f"identical greedy outputs: {same}/{len(reqs)}")
    per_scen = {}
    for c, a, b in zip(cases, single, lookup):
        per_scen.setdefault(c.scenario, [0, 0.0, 0.0])
        per_scen[c.scenario][0] += 1
        per_scen[c.scenario][1] += a.latency_s
        per_scen[c.scenario][2] += b.latency_s
    for scen, (n, la, lb) in sorted(per_scen.items()):
        print(f"  {scen}: latency baseline {la / n:.2f}s, prompt lookup {lb / n:.2f}s per case (x{la / lb:.2f})")
    pl.close()

    # 3. suite wall vs plain generate loop ---------------------------------------------------------
    tok, model = be.tokenizer, be.model
    t0 = time.perf_counter()
    plain_tokens = 0
    for b in batches:
        texts = [tok.apply_chat_template([{"role": r, "content": c} for r, c in q.messages], add_generation_prompt=True, tokenize=False) for q in b]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        new = out[:, enc["input_ids"].shape[1] :]
        plain_tokens += int((new != tok.pad_token_id).sum())
        _ = tok.batch_decode(new, skip_special_tokens=True)
    wall_plain = time.perf_counter() - t0
    be.close()

    only_base = replace(suite, variants=(base_v,))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = run_suite(only_base, RunOptions(limit=args.cases_per_scenario, progress=False, score=False, cache_path=f"{tmp}/gen.sqlite", runs_dir=f"{tmp}/runs"))
        wall_suite = time.perf_counter() - t0
        gen_wall = res.variants[base_v.name]["wall_s"]
    print("\n== suite overhead (same batches, baseline only)")
    print(f"plain model.generate loop (model loaded): {wall_plain:.1f}s, {plain_tokens} tokens")
    print(f"run_suite generation phase: {gen_wall:.1f}s (ratio x{gen_wall / wall_plain:.2f})")
    print(f"run_suite whole call (fingerprint, model load, store): {wall_suite:.1f}s (ratio x{wall_suite / wall_plain:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
