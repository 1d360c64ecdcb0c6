"""evalsuite's whole `run_suite` against a plain `model.generate` loop over the same batches.

Both sides load the embedded model, render the same chat prompts, generate greedily in the same
batches (evalsuite's length-sorted batching) and decode; evalsuite also fingerprints, caches,
stores and keeps its books. Rounds alternate (ABBA). Target: suite / plain <= 1.05.
"""

from __future__ import annotations

import tempfile
import time

from common import Row, embedded_suite, judge, median, paired, ratio


def plain_loop(model_dir, reqs, batch_size: int, max_new_tokens: int) -> tuple[float, list[str]]:
    """Load, then generate batch by batch; (generation seconds, texts by request order)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalsuite.run.prompting import batches as _batches

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    texts: dict = {}
    t0 = time.perf_counter()
    for b in _batches(list(reqs), batch_size):
        prompts = [tok.apply_chat_template([{"role": r, "content": c} for r, c in q.messages], add_generation_prompt=True, tokenize=False) for q in b]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id, temperature=None, top_p=None, top_k=None)
        for q, row in zip(b, tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)):
            texts[(q.case_id, q.sample)] = row
    return time.perf_counter() - t0, [texts[(q.case_id, q.sample)] for q in reqs]


def run(quick: bool = False) -> list[Row]:
    from evalsuite.models import ensure_embedded_model
    from evalsuite.run.prompting import build_requests
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    per, max_new, bs, rounds = (1, 16, 4, 2) if quick else (3, 96, 4, 4)  # full: the demo's quick profile (3 per scenario, 96 tokens)
    suite, base, cases = embedded_suite(per, max_new, bs)
    reqs = build_requests(cases, base)
    model_dir = ensure_embedded_model()
    gen_walls: list[float] = []
    plain_gen: list[float] = []
    outputs = {}

    def suite_run():
        with tempfile.TemporaryDirectory() as tmp:
            res = run_suite(suite, RunOptions(limit=per, scenarios=["kb_qa", "brand", "code"], progress=False, score=False, cache_path=f"{tmp}/c.sqlite", runs_dir=f"{tmp}/runs"))
            gen_walls.append(res.variants[base.name]["wall_s"])
            outputs["suite"] = {(g.case_id, g.sample): g.text for g in res.store.generations()}

    def plain():
        wall, texts = plain_loop(model_dir, reqs, bs, max_new)
        plain_gen.append(wall)
        outputs["plain"] = texts

    print(f"overhead: {len(reqs)} requests, batch {bs}, max_new_tokens {max_new}, {rounds} rounds", flush=True)
    plain()  # warm-up: first load pages the weights in, first generate initialises kernels
    gen_walls.clear()
    plain_gen.clear()
    ts, tp, _, _ = paired(suite_run, plain, rounds, "suite vs plain")
    whole, gen = ratio(ts, tp), ratio(gen_walls, plain_gen)
    same = sum(outputs["suite"].get((q.case_id, q.sample)) == t for q, t in zip(reqs, outputs["plain"]))
    return [
        Row("suite vs plain generate", "whole call (load + generate + store)", f"suite {median(ts):.2f}s, plain {median(tp):.2f}s (medians)", whole, "<= 1.05", judge(whole, 1.05)),
        Row("suite vs plain generate", "generation phase only", f"suite {median(gen_walls):.2f}s, plain {median(plain_gen):.2f}s", gen, "<= 1.05", judge(gen, 1.05)),
        Row("suite vs plain generate", "identical greedy outputs", f"{same}/{len(reqs)}", None, f"{len(reqs)}/{len(reqs)}", "met" if same == len(reqs) else "NOT met"),
    ]


if __name__ == "__main__":
    import sys

    for r in run("--quick" in sys.argv):
        print(" | ".join(r.cells()))
