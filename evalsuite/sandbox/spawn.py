"""Starting one run and collecting what it left: its inputs in the host temp dir, its stdin fed
without blocking, the wait for its end or its wall timeout, its process group killed; and the run
itself through `unshare` and a bootstrap interpreter (`execute_unshare`; the zygote's way is in `zygote`).
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from functools import lru_cache

from .isolation import MAIN
from .judge import Outcome
from .mode import Plan

_HERE = os.path.dirname(os.path.abspath(__file__))
#: the bootstrap's modules, run in this order in one namespace named "isolation" (stdlib only: `mounts`, `fork_main`, `isolation`)
_BOOT_FILES = tuple(os.path.join(_HERE, name) for name in ("mounts.py", "fork_main.py", "isolation.py"))


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _kill_uid_from_host(uid: int, python: str) -> None:
    """Kill every process of `uid` (kill(-1) as that uid), with an interpreter that uid can reach
    (`_program_python`: the suite's own may live under a directory it cannot enter, such as /root)."""
    try:
        subprocess.run([python, "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid, group=uid, extra_groups=[], timeout=10, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        pass


def write_inputs(plan: Plan, hostdir: str, code: str, status_fd: int, files: Mapping[str, bytes] | None = None) -> str:
    """The program, the `files` beside it (name: content) and the bootstrap's config in the host temp
    dir; returns the config's path."""
    lim = plan.limits
    files = dict(files or {})
    with open(os.path.join(hostdir, MAIN), "w", encoding="utf-8") as fh:
        fh.write(code)
    for name, data in files.items():
        with open(os.path.join(hostdir, name), "wb") as fh:
            fh.write(data)
    cfg = {
        "hostdir": hostdir,
        "status_fd": status_fd,
        "namespaces": plan.mode.namespaces,
        "pidns": plan.mode.pidns,
        "drop_caps": plan.mode.namespaces and not plan.mode.root,
        "uid": plan.uid,
        "harness": plan.harness,
        "python": plan.python,
        "prefix": os.path.realpath(sys.base_prefix),
        "cpu_s": lim.resolved_cpu_s(),
        "memory_mb": lim.memory_mb,
        "max_file_mb": lim.max_file_mb,
        "max_procs": lim.max_procs,
        "files": sorted(files),
        "fork_main": plan.fork_main,
    }
    cfg_path = os.path.join(hostdir, _CFG)
    with open(cfg_path, "wb") as fh:
        marshal.dump(cfg, fh)  # the bootstrap runs this very interpreter (sys.executable)
    if plan.uid is not None and not plan.mode.namespaces:
        os.chown(hostdir, plan.uid, plan.uid)
        for name in (MAIN, *files):
            os.chown(os.path.join(hostdir, name), plan.uid, plan.uid)
    return cfg_path


def check_file_names(files: Mapping[str, bytes] | None) -> None:
    """ValueError unless each of `files` (to go beside main.py, `write_inputs`) has a plain name of its own."""
    for name in files or ():
        if not name or name != os.path.basename(name) or name.startswith(".") or name in (MAIN, _CFG, _BOOT_BIN):
            raise ValueError(f"not a name for a file beside main.py: {name!r}")


# The bootstrap's code objects travel as a marshal file (same interpreter: sys.executable), so no
# run compiles mounts.py, fork_main.py and isolation.py (no cached bytecode is written with PYTHONDONTWRITEBYTECODE).
_BOOT_CODE = "import marshal, sys\ng = {'__name__': 'isolation'}\nfor c in marshal.loads(open(sys.argv[1], 'rb').read()):\n    exec(c, g)\nsys.exit(g['main'](sys.argv[2:]))"
_BOOT_BIN = "boot.bin"
_CFG = "sandbox.cfg"


@lru_cache(maxsize=1)
def boot_code() -> bytes:
    """mounts.py, fork_main.py and isolation.py compiled, marshalled (a tuple of code objects, run in that order in
    one namespace): what the bootstrap (and the zygote) runs."""
    codes = []
    for path in _BOOT_FILES:
        with open(path, encoding="utf-8") as fh:
            codes.append(compile(fh.read(), path, "exec", dont_inherit=True))
    return marshal.dumps(tuple(codes))


def _bootstrap_cmd(plan: Plan, cfg_path: str) -> list[str]:
    prefix = list(plan.mode.prefix)
    boot = os.path.join(os.path.dirname(cfg_path), _BOOT_BIN)
    return prefix + (["--"] if prefix else []) + [sys.executable, "-I", "-S", "-B", "-c", _BOOT_CODE, boot, cfg_path]


class Stdin:
    """The write end of a run's stdin pipe, fed without blocking by the loop that waits for the run:
    a program that never reads its stdin cannot hold the wall timeout up (a blocking write of more
    than the pipe holds would wait for the program, however long it sleeps)."""

    def __init__(self, fd: int, data: bytes) -> None:
        os.set_blocking(fd, False)
        self.fd, self.view = fd, memoryview(data)
        if not self.view:
            self.close()

    def feed(self) -> None:
        """Write what the pipe takes now; close it once everything is written or the reader is gone."""
        if self.fd < 0:
            return
        try:
            while self.view:
                self.view = self.view[os.write(self.fd, self.view) :]
        except BlockingIOError:
            return  # the pipe is full: more when it has room
        except OSError:
            pass  # the run ended without reading it all: as with Popen's stdin, nothing more to give
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _poll_until(fd: int, deadline: float, stdin: Stdin) -> bool:
    """Wait until `fd` is readable or hung up (True) or the deadline passes (False), feeding `stdin`."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    fed = stdin.fd
    if fed >= 0:
        poller.register(fed, select.POLLOUT)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        events = dict(poller.poll(max(1, int(remaining * 1000) + 1)))
        if fed >= 0 and fed in events:
            stdin.feed()
            if stdin.fd < 0:
                poller.unregister(fed)
                fed = -1
        if fd in events:
            return True


def _exited_within(proc: subprocess.Popen, timeout_s: float, stdin: Stdin) -> bool:
    """Whether the bootstrap ended within `timeout_s` (its stdin fed meanwhile).

    A pidfd wakes us the moment it exits: `Popen.wait(timeout=...)` polls with sleeps of up to 50 ms,
    which added about 25 ms of latency to every sample. Falls back to that where pidfds are missing.
    """
    deadline = time.monotonic() + timeout_s
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        while stdin.fd >= 0 and proc.poll() is None:  # feed stdin as the pipe takes it, looking in now and then
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            poller = select.poll()
            poller.register(stdin.fd, select.POLLOUT)
            if poller.poll(min(50, int(remaining * 1000) + 1)):
                stdin.feed()
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        return _poll_until(fd, deadline, stdin) or proc.poll() is not None
    finally:
        os.close(fd)


def _wait_or_kill(proc: subprocess.Popen, timeout_s: float, stdin: Stdin) -> bool:
    """Wait for the bootstrap; past the wall timeout kill its whole process group. True if killed."""
    if _exited_within(proc, timeout_s, stdin):
        proc.wait()
        return False
    killpg(proc.pid)
    proc.wait()
    return True


def killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def read_until_eof(fd: int, timeout_s: float, stdin: Stdin) -> tuple[bytes, bool]:
    """Everything written to the pipe `fd` until its writers are all gone (True) or the timeout (False),
    feeding the run's `stdin` meanwhile."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while True:
        if not _poll_until(fd, deadline, stdin):
            return b"".join(chunks), False
        b = os.read(fd, 65536)
        if not b:
            return b"".join(chunks), True
        chunks.append(b)


def execute_unshare(plan: Plan, hostdir: str, code: str, stdin: bytes, files: Mapping[str, bytes] | None = None) -> Outcome:
    """One run through `unshare` (or a plain process): the bootstrap in its own session, its stdin fed,
    waited for (or killed at the wall timeout), its output and status collected."""
    r_status, w_status = os.pipe()
    r_in, w_in = os.pipe()
    feed = Stdin(w_in, stdin)
    start = time.monotonic()
    try:
        cfg_path = write_inputs(plan, hostdir, code, w_status, files)
        with open(os.path.join(hostdir, _BOOT_BIN), "wb") as fh:
            fh.write(boot_code())
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                _bootstrap_cmd(plan, cfg_path),
                stdin=r_in,
                stdout=out,
                stderr=err,
                pass_fds=(w_status,),
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd=hostdir,
                start_new_session=True,
            )
            for fd in (r_in, w_status):
                os.close(fd)
            r_in = w_status = -1
            wall_timeout = _wait_or_kill(proc, plan.limits.timeout_s, feed)
            feed.close()
            if not plan.mode.pidns:
                for uid in plan.uids():
                    _kill_uid_from_host(uid, plan.python)  # stragglers outside the process group
            duration = time.monotonic() - start
            status_lines = read_all(r_status).decode("utf-8", "replace").splitlines()
            out.seek(0)
            err.seek(0)
            return Outcome(
                stdout=out.read(),
                stderr=err.read(),
                status_lines=status_lines,
                wall_timeout=wall_timeout,
                bootstrap_rc=proc.returncode,
                duration_s=duration,
                pgid=proc.pid,
            )
    finally:
        feed.close()
        for fd in (r_status, w_status, r_in):
            if fd >= 0:
                os.close(fd)
