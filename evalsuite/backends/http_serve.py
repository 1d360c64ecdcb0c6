"""Local OpenAI-compatible servers that evalsuite starts itself: `transformers serve` and llama.cpp.

A served variant is judged like a local one when evalsuite owns the server's whole life: the
http backend's `serve` option starts one of these on loopback, on a free port, when the variant's
first batch is due, and stops it when the variant is done (or at exit). Because the port changes
from run to run, such a variant's fingerprint is what was served (launcher, flags, weights' content
hashes, library versions), not the URL, so its cached outputs and resumed runs carry over.

`serve` settings:

- `launcher`: `transformers` (`transformers serve`, from `pip install 'evalsuite[serving]'`),
  `llama_cpp` (`python -m llama_cpp.server` from `pip install 'evalsuite[llamacpp]'`) or `vllm`
  (vLLM's OpenAI server from `make vllm`'s environment: `evalsuite.backends.serve_vllm`)
- `continuous_batching`: transformers only: `--continuous-batching` (paged attention, requests
  batched as they arrive). Left to size itself, its KV cache takes a share of the machine's
  memory (about 10 GB of a 23 GB CPU machine for a 135M model), so evalsuite gives it 256 blocks
  of 32 tokens (8192 tokens in flight) unless `args` set `--cb-num-blocks`, `--cb-block-size` or
  `--cb-max-memory-percent`
- `gguf`: llama_cpp only: the GGUF file (default: the embedded model's shipped Q4_1 GGUF)
- `args`: further command-line arguments, passed as given
- `startup_timeout_s`: how long to wait for the server to answer (default 300)

The variant's `model` names the weights (a local model directory, or `embedded`).

`LocalServer` owns the process (spawn on a free port, wait for an answer, stop the process group);
what differs between servers is a `Launcher` class (serve_launcher.py), one module per launcher,
registered by name in `serve_launcher.LAUNCHERS`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ..errors import EvalsuiteError
from .serve_launcher import LAUNCHERS, launcher_class, owned_settings

log = logging.getLogger("evalsuite")

_COMMON_KEYS = {"launcher", "args", "startup_timeout_s"}
#: servers started and not yet stopped (strong references: a forgotten server is still stopped at exit)
_LIVE: set[LocalServer] = set()


def check_serve_option(raw: object, who: str) -> dict:
    """The validated `serve` mapping of a variant (unknown keys and launchers fail helpfully)."""
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"variant {who!r}: the http option `serve` must be a mapping, e.g. {{launcher: transformers}}")
    known = _COMMON_KEYS | set(owned_settings())
    unknown = set(raw) - known
    if unknown:
        raise EvalsuiteError(f"variant {who!r}: unknown serve setting(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    launcher = raw.get("launcher", "transformers")
    if launcher not in LAUNCHERS:
        raise EvalsuiteError(f"variant {who!r}: unknown serve launcher {launcher!r}; available: {', '.join(LAUNCHERS)}")
    for key, (owner, what) in owned_settings().items():
        if raw.get(key) and owner != launcher:
            raise EvalsuiteError(f"variant {who!r}: {key} is {what}")
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise EvalsuiteError(f"variant {who!r}: serve.args must be a list of command-line arguments")
    startup = raw.get("startup_timeout_s", 300)
    if not isinstance(startup, (int, float)) or isinstance(startup, bool) or startup <= 0:
        raise EvalsuiteError(f"variant {who!r}: serve.startup_timeout_s must be a positive number of seconds (got {startup!r})")
    return {
        "launcher": launcher,
        "continuous_batching": bool(raw.get("continuous_batching", False)),
        "gguf": raw.get("gguf"),
        "args": [str(a) for a in args],
        "startup_timeout_s": float(startup),
    }


def missing_requirement(options: dict | None) -> str | None:
    """Why a `serve` variant cannot start here (a missing package, with the extra to install), or None."""
    serve = (options or {}).get("serve")
    if not isinstance(serve, dict):
        return None
    name = serve.get("launcher", "transformers")
    return launcher_class(name).missing_requirement() if name in LAUNCHERS else None


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now (the OS picks it; a race with another process is retried by start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ServerStartError(EvalsuiteError):
    """A server that did not come up, as a typed result: `hung` when it neither answered nor exited
    within its start-up bound, `log_tail` the last lines of its log (the fault probes classify these)."""

    def __init__(self, message: str, *, hung: bool, log_tail: str) -> None:
        super().__init__(message)
        self.hung = hung
        self.log_tail = log_tail


class LocalServer:
    """One server process on loopback; `start` waits until it answers, `stop` ends it (and its group)."""

    host = "127.0.0.1"

    def __init__(
        self,
        launcher: str,
        model_path: str | os.PathLike,
        *,
        model_name: str | None = None,
        continuous_batching: bool = False,
        args: list[str] | tuple[str, ...] = (),
        startup_timeout_s: float = 300.0,
        port: int | None = None,
    ):
        self.kind = launcher_class(launcher)  #: what differs between servers (command line, requirements, identity)
        self.launcher = launcher
        self.model_path = Path(model_path)
        #: the name requests must carry: transformers serve lists the path it was given; llama.cpp the alias
        self.model_name = model_name or self.kind.model_name(self.model_path)
        self.continuous_batching = continuous_batching
        self.args = [str(a) for a in args]
        self.startup_timeout_s = startup_timeout_s
        self._fixed_port = port
        self.port = port
        self.proc: subprocess.Popen | None = None
        self._log_file: Any = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        """The command line that starts the server on `port`."""
        kind = self.kind
        return (
            kind.command(self.model_path, self.model_name, host=self.host, port=port, continuous_batching=self.continuous_batching, args=self.args) + self.args
        )

    def start(self) -> str:
        """Start the server and wait until it answers; return its base URL."""
        if self.proc is not None and self.proc.poll() is None:
            return self.base_url
        if self.proc is not None:
            self.stop()  # a dead one: its log file goes before a new one starts
        last_error = ""
        for attempt in range(3):  # a port taken between free_port() and the server's bind is retried
            # a restart keeps its port (the same URL again); a port taken meanwhile gets a new one
            port = self._fixed_port or (self.port if attempt == 0 and self.port else free_port(self.host))
            self._spawn(port)
            ok, last_error = self._wait_ready()
            if ok:
                return self.base_url
            hung = self.proc is not None and self.proc.poll() is None  # neither answered nor exited
            tail = self.log_tail()
            self.stop()
            if self._fixed_port is not None or "address already in use" not in last_error.lower():
                break
        raise ServerStartError(f"the {self.launcher} server did not come up within {self.startup_timeout_s:g}s: {last_error}", hung=hung, log_tail=tail)

    def _spawn(self, port: int) -> None:
        self._log_file = tempfile.NamedTemporaryFile("w+b", prefix=f"evalsuite-{self.launcher}-", suffix=".log", delete=False)
        self.log_path = Path(self._log_file.name)
        env = self.kind.environment(dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1"))
        log.info("starting %s", " ".join(self.command(port)))
        self.proc = subprocess.Popen(
            self.command(port), stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        self.port = port
        _LIVE.add(self)

    def _wait_ready(self) -> tuple[bool, str]:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://{self.host}:{self.port}/v1/models"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False, f"it exited with status {self.proc.returncode}; its log ({self.log_path}) ends with:\n{self.log_tail()}"
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return True, ""
                time.sleep(0.25)
        return False, f"no answer at {url}; its log ({self.log_path}) ends with:\n{self.log_tail()}"

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's output (for error messages)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        data = self.log_path.read_bytes()[-chars:]
        return data.decode("utf-8", "replace")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crash would: what tests of a dying server need."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after `grace_s`."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path = None
        _LIVE.discard(self)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    """No server outlives the process that started it."""
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(grace_s=3.0)
