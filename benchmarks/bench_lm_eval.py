"""evalsuite against lm-evaluation-harness (`lm-eval`, HF backend) on the same prompts.

A `generate_until` task is built from the very prompts evalsuite sends (the embedded model's chat
template applied to each case), read from a local JSONL file; both tools load the local model
directory in float32 on the CPU, generate greedily with the same batch size and max new tokens,
and stop at the end-of-turn token. Rounds alternate (ABBA); each side's wall time covers the
whole call (loading the model, building the task, generating). Then the greedy outputs are
compared text by text. Target: evalsuite at least as fast (time ratio <= 1.0), outputs identical.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import Row, embedded_suite, judge, median, paired, ratio

TASK = """task: evalsuite_bench
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: ""
target_delimiter: ""
generation_kwargs:
  until: ["<|im_end|>"]
  max_gen_toks: {max_new}
  do_sample: false
metric_list:
  - metric: bypass
metadata:
  version: 1
"""


def run(quick: bool = False) -> list[Row]:
    import lm_eval
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from evalsuite.models import ensure_embedded_model
    from evalsuite.run.prompting import build_requests
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    per, max_new, bs, rounds = (1, 16, 4, 2) if quick else (2, 32, 4, 3)
    suite, base, cases = embedded_suite(per, max_new, bs)
    reqs = build_requests(cases, base)
    model_dir = ensure_embedded_model()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tmp = Path(tempfile.mkdtemp(prefix="evalsuite-lmeval-"))
    data = tmp / "prompts.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        for q in reqs:
            prompt = tok.apply_chat_template([{"role": r, "content": c} for r, c in q.messages], add_generation_prompt=True, tokenize=False)
            fh.write(json.dumps({"id": q.case_id, "prompt": prompt}) + "\n")
    (tmp / "evalsuite_bench.yaml").write_text(TASK.format(data=data, max_new=max_new))
    outputs: dict = {}

    def ours():
        with tempfile.TemporaryDirectory() as t:
            res = run_suite(suite, RunOptions(limit=per, scenarios=["kb_qa", "brand", "code"], progress=False, score=False, cache_path=f"{t}/c.sqlite", runs_dir=f"{t}/runs"))
            outputs["evalsuite"] = {g.case_id: g.text for g in res.store.generations()}

    def theirs():
        out = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={model_dir},dtype=float32,device=cpu,add_bos_token=False",
            tasks=["evalsuite_bench"], task_manager=TaskManager(include_path=str(tmp)), batch_size=bs, num_fewshot=0,
            log_samples=True, use_cache=None, verbosity="ERROR",
        )
        outputs["lm-eval"] = {s["doc"]["id"]: s["resps"][0][0] for s in out["samples"]["evalsuite_bench"]}

    print(f"lm-eval: {len(reqs)} prompts, batch {bs}, max_new_tokens {max_new}, {rounds} rounds", flush=True)
    t0 = time.perf_counter()
    theirs()  # warm-up of both (page cache, datasets' arrow cache, kernels)
    print(f"  [lm-eval] warm-up {time.perf_counter() - t0:.1f}s", flush=True)
    try:
        ta, tb, _, _ = paired(ours, theirs, rounds, "evalsuite vs lm-eval")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ci = ratio(ta, tb)
    ids = [q.case_id for q in reqs]
    same = [i for i in ids if outputs["evalsuite"].get(i, "").strip() == outputs["lm-eval"].get(i, "").strip()]
    differ = [i for i in ids if i not in same]
    for i in differ[:3]:
        print(f"  differs {i}:\n    evalsuite: {outputs['evalsuite'].get(i)!r}\n    lm-eval:   {outputs['lm-eval'].get(i)!r}")
    return [
        Row("evalsuite vs lm-eval", "whole call (load + task + generate)", f"evalsuite {median(ta):.2f}s, lm-eval {median(tb):.2f}s (medians)", ci, "<= 1.0", judge(ci, 1.0)),
        Row("evalsuite vs lm-eval", "identical greedy outputs", f"{len(same)}/{len(ids)}" + (f" (differ: {', '.join(differ[:4])})" if differ else ""), None, f"{len(ids)}/{len(ids)}", "met" if not differ else "NOT met"),
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
