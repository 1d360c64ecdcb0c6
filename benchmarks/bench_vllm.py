"""evalsuite's vllm backend against a plain `LLM.chat` loop, and vLLM against the transformers backend.

    python benchmarks/bench_vllm.py [--quick] [--rounds N] [--no-fours] [--no-throughput]   # needs `make vllm`

1. Overhead: the same prompts (the demo profile: 3 easy cases per scenario, greedy) through
   evalsuite's vllm backend (its worker in .venv-vllm, requests in, generations out) and through a
   plain script in the same environment that calls `llm.chat(conversations, params)` and nothing
   else. Both engines are loaded first (same engine arguments), then called in interleaved rounds
   (ABBA); measured from this process: the whole call (pipe and bookkeeping included), and the
   generation phase (the `llm.chat` time each side reports). Target: evalsuite / plain <= 1.05.
   Two more sides, in the same interleaved rounds, say where a difference comes from: the plain
   loop with vLLM's statistics on (evalsuite turns them on: TTFT, queue time and the engine's
   counters come from them), and evalsuite's backend handed the requests 4 at a time (what
   suites/vllm.yaml did before it handed them 16 at a time: each `llm.chat` call waits for its
   slowest request, and the engine batches only what it is given).
2. Throughput: vLLM (bf16, the whole profile as one batch) against the transformers backend
   (fp32, one request at a time, as the demo's baseline runs), in new tokens per second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Row, embedded_suite, judge, median, ratio  # noqa: E402

_ENGINE = {"dtype": "bfloat16", "max_model_len": 2048, "enforce_eager": True, "seed": 0}

#: the plain side: vLLM's documented offline API and nothing else
_PLAIN = """
import json, sys, time
from vllm import LLM, SamplingParams

if __name__ == "__main__":
    args = json.loads(sys.stdin.readline())
    llm = LLM(**args["engine"])  # vLLM's LLM default: statistics off
    params = SamplingParams(temperature=0.0, max_tokens=args["max_tokens"])
    print("ready", flush=True)
    for line in sys.stdin:
        t0 = time.perf_counter()
        outs = llm.chat(args["conversations"], params, use_tqdm=False)
        gen_s = time.perf_counter() - t0
        print(json.dumps({"gen_s": gen_s, "tokens": sum(len(o.outputs[0].token_ids) for o in outs)}), flush=True)
"""


class _Plain:
    """The plain loop in a child process of vLLM's interpreter (stdout lines are its answers)."""

    def __init__(self, python: str, conversations: list, max_tokens: int, engine: dict):
        self.script = tempfile.NamedTemporaryFile("w", suffix="_plain_vllm.py", delete=False)
        self.script.write(_PLAIN)
        self.script.close()
        self.log = tempfile.NamedTemporaryFile("w+b", suffix="_plain_vllm.log", delete=False)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"VLLM_CPU_KVCACHE_SPACE": "2"}  # as the worker runs
        self.proc = subprocess.Popen([python, self.script.name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"engine": engine, "conversations": conversations, "max_tokens": max_tokens}) + "\n")
        self.proc.stdin.flush()
        while True:  # vLLM may print to stdout while it loads: wait for the marker
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the plain vLLM script exited while loading: {Path(self.log.name).read_text()[-1500:]}")
            if line.strip() == "ready":
                break

    def __call__(self) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the plain vLLM script exited")
            if line.startswith("{"):
                return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)
        Path(self.script.name).unlink(missing_ok=True)


def _interleaved(sides: dict[str, Any], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Each side once per round, the order reversed every other round (ABCD DCBA ...): wall seconds and results."""
    times: dict[str, list[float]] = {k: [] for k in sides}
    results: dict[str, list[Any]] = {k: [] for k in sides}
    for r in range(rounds):
        for name in list(sides) if r % 2 == 0 else list(reversed(sides)):
            t0 = time.perf_counter()
            results[name].append(sides[name]())
            times[name].append(time.perf_counter() - t0)
        print("  [vllm overhead] round " + f"{r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    return times, results


def _overhead(python: str, requests: list, rounds: int, fours: bool = True) -> list[Row]:
    from evalsuite.backends.vllm import VLLMBackend
    from evalsuite.cases.suite import Variant

    be = VLLMBackend(Variant(name="vllm-bf16", backend="vllm", model="embedded", options=dict(_ENGINE)))
    be.load()
    conversations = [[{"role": r, "content": c} for r, c in req.messages] for req in requests]
    engine = dict(_ENGINE, model=str(be.model_dir))
    plain = _Plain(python, conversations, requests[0].max_new_tokens, engine)
    stats = _Plain(python, conversations, requests[0].max_new_tokens, dict(engine, disable_log_stats=False))

    def in_fours() -> list:
        return [g for i in range(0, len(requests), 4) for g in be.generate(requests[i : i + 4])]

    try:
        sides = {"evalsuite": lambda: be.generate(requests), "plain": plain, "plain+stats": stats}
        if fours:  # a fourth engine beside the three: more rounds' noise on 2 cores, so it can be left out
            sides["evalsuite/4"] = in_fours
        t, res = _interleaved(sides, rounds)
    finally:
        plain.close()
        stats.close()
        be.close()
    ta, tb, tc, t4 = t["evalsuite"], t["plain"], t["plain+stats"], t.get("evalsuite/4")
    ga = [gens[0].extra["engine_s"] for gens in res["evalsuite"]]  # the worker's llm.chat time for the batch
    gb, gc = [r["gen_s"] for r in res["plain"]], [r["gen_s"] for r in res["plain+stats"]]
    whole, gen, vs_stats = ratio(ta, tb), ratio(ga, gb), ratio(ta, tc)
    n = len(requests)
    rows = [
        Row(
            "vllm",
            "whole call: evalsuite vllm backend / plain LLM.chat",
            f"{median(ta):.2f}s vs {median(tb):.2f}s, {n} requests",
            whole,
            "<= 1.05",
            judge(whole, 1.05),
        ),
        Row("vllm", "generation phase (llm.chat): evalsuite / plain", f"{median(ga):.2f}s vs {median(gb):.2f}s", gen, "<= 1.05", judge(gen, 1.05)),
        Row(
            "vllm",
            "whole call: evalsuite / plain with vLLM's statistics on",
            f"{median(ta):.2f}s vs {median(tc):.2f}s (llm.chat {median(gc):.2f}s)",
            vs_stats,
            "<= 1.05",
            judge(vs_stats, 1.05),
        ),
    ]
    if t4:
        rows.append(Row("vllm", "evalsuite, the requests 4 at a time / all at once", f"{median(t4):.2f}s vs {median(ta):.2f}s, {n} requests", ratio(t4, ta), verdict="measured"))
    return rows


def _throughput(requests: list, base) -> list[Row]:
    from dataclasses import replace

    from evalsuite.backends import BACKENDS
    from evalsuite.backends.vllm import VLLMBackend
    from evalsuite.cases.suite import Variant

    out = []
    be = VLLMBackend(Variant(name="vllm-bf16", backend="vllm", model="embedded", options=dict(_ENGINE)))
    be.load()
    t0 = time.perf_counter()
    gens = be.generate(requests)
    v_s = time.perf_counter() - t0
    be.close()
    v_tps = sum(g.new_tokens or 0 for g in gens) / v_s
    tf = BACKENDS.get("transformers")(replace(base, options={"device": "cpu", "dtype": "float32"}))
    tf.load()
    t0 = time.perf_counter()
    tgens = [g for r in requests for g in tf.generate([r])]
    t_s = time.perf_counter() - t0
    tf.close()
    t_tps = sum(g.new_tokens or 0 for g in tgens) / t_s
    same = sum(a.text == b.text for a, b in zip(gens, tgens))
    out.append(
        Row(
            "vllm",
            "tokens/s: vLLM bf16 (one batch) / transformers fp32 (one at a time), demo profile",
            f"{v_tps:.1f} vs {t_tps:.1f} tok/s (x{v_tps / t_tps:.2f}); same text {same}/{len(requests)}",
            verdict="measured",
        )
    )
    return out


def run(quick: bool = False, rounds: int | None = None, fours: bool = True, throughput: bool = True) -> list[Row]:
    from evalsuite.backends import vllm_env
    from evalsuite.errors import EvalsuiteError
    from evalsuite.run.prompting import build_requests

    try:
        python = vllm_env.locate()
    except EvalsuiteError as exc:
        return [Row("vllm", "skipped", str(exc), verdict="not judged")]
    if python is None:
        python = sys.executable
    _, base, cases = embedded_suite(1 if quick else 3, 32 if quick else 96, 1)
    requests = build_requests(cases, base)
    rows = _overhead(python, requests, rounds or (3 if quick else 16), fours)
    return rows + (_throughput(requests, base) if throughput else [])


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else None
    for row in run(quick, rounds, "--no-fours" not in sys.argv[1:], "--no-throughput" not in sys.argv[1:]):
        print(" | ".join(row.cells()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
