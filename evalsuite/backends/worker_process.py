"""A worker: a child process in another environment that answers JSON lines on its stdin with JSON
lines on its stdout, one answer per message, while everything it logs goes to a file kept for error
messages. The one reader of that wire format: vLLM's worker (`vllm_env`) and the transformers
worker of a variant's own environment (`transformers_env`) both talk through it.

Each answer is a JSON object; what its keys mean is the worker's protocol (its module's docstring).
A worker that exits (or closes its stdout) instead of answering is an `EvalsuiteError` carrying its
exit status and its log's last lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Sequence

from ..errors import EvalsuiteError


class WorkerProcess:
    """One child process speaking JSON lines: `ask(message) -> answer`; stderr kept in a log file.

    The child runs in a session of its own, so `close` can end it with the processes it started.
    """

    def __init__(self, argv: Sequence[str], *, env: dict, log_prefix: str = "evalsuite-worker-", cwd: str | None = None):
        # a file without a name (O_TMPFILE): read through its descriptor, gone with it, so a suite killed
        # before `close` leaves no log behind
        self.log = tempfile.TemporaryFile("w+b", prefix=log_prefix, suffix=".log")
        self.argv = list(argv)
        # one message in flight: a caller the runner gave up on (its hard timeout) still reads its own
        # answer before the next message is sent, so no answer is ever read by the wrong caller
        self._lock = threading.Lock()
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1, env=env, cwd=cwd, start_new_session=True
            )
        except OSError as exc:
            self.proc = None
            self._drop_log()
            raise EvalsuiteError(f"{self.argv[0]} does not run ({exc})") from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ask(self, msg: dict) -> dict:
        """Send one message, read its one answer (a JSON object)."""
        with self._lock:
            return self._ask(msg)

    def _ask(self, msg: dict) -> dict:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise EvalsuiteError("the worker is closed")
        try:
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._kill(proc)
            raise EvalsuiteError(f"it exited with status {proc.returncode}; its log ends with: {self.log_tail()}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise EvalsuiteError(f"it answered with a line that is not JSON: {line.strip()[:200]!r}; its log ends with: {self.log_tail()}") from None
        if not isinstance(answer, dict):
            raise EvalsuiteError(f"it answered with {type(answer).__name__}, not a JSON object")
        return answer

    def log_text(self) -> str:
        """Everything the worker logged so far ('' when it cannot be read)."""
        with contextlib.suppress(OSError, ValueError):  # ValueError: the log is closed
            fd = self.log.fileno()
            return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")
        return ""

    def log_tail(self, lines: int = 5) -> str:
        """The worker's last log lines, joined on one line (for error messages)."""
        return " | ".join(ln.strip() for ln in self.log_text().splitlines()[-lines:] if ln.strip())

    def close(self, wait_s: float = 60.0) -> None:
        """End the worker: its stdin closed (its loop ends), then killed with its session past `wait_s`."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin:
                    proc.stdin.close()
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                self._kill(proc)
            with contextlib.suppress(OSError):
                if proc.stdout:
                    proc.stdout.close()
        self._drop_log()

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=30)

    def _drop_log(self) -> None:
        self.log.close()
