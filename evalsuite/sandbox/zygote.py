"""The zygote: one small stdlib-only process per suite process that forks each run's PID 1 into
fresh namespaces (`isolation.zygote`), saving the two process starts of the `unshare` path; this
module holds this process's handle on it and runs one run through it (`execute_zygote`).

It is started on first use, replaced if it died, and given up for the rest of the process
(`zygote_broken`) when it cannot start or cannot set up a run: runs then go through `unshare`.
"""

from __future__ import annotations

import atexit
import logging
import marshal
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping

from .judge import Outcome
from .mode import Plan
from .spawn import Stdin, boot_code, killpg, read_all, read_until_eof, write_inputs

log = logging.getLogger(__name__)

#: the zygote's command: the bootstrap's code (`spawn.boot_code`) on stdin, run as the bootstrap runs it
_ZYGOTE_CODE = "import marshal, sys\ng = {'__name__': 'isolation'}\nfor c in marshal.loads(sys.stdin.buffer.read()):\n    exec(c, g)\nsys.exit(g['zygote'](int(sys.argv[1])))"
_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000


class _Zygote:
    """This process's handle on its zygote: a socket to send runs on, and the zygote's process."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-c", _ZYGOTE_CODE, str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        boot = self.proc.stdin
        assert boot is not None  # stdin=PIPE
        boot.write(boot_code())
        boot.close()
        self.sock, self.owner = ours, os.getpid()
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def spawn(self, cfg_path: str, flags: int, fds: list[int]) -> int:
        """Start one run (stdin, stdout, stderr, status fds); its pid, which is also its process group."""
        with self.lock:
            socket.send_fds(self.sock, [marshal.dumps((cfg_path, flags))], fds)
            reply = self.sock.recv(64)
        pid = int(reply)  # b"" (the zygote died): ValueError
        if pid <= 0:
            raise OSError(-pid, "the sandbox zygote could not fork")
        return pid

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_zygote_lock = threading.Lock()
zygote_state: dict = {"zygote": None, "broken": None}


def zygote_for(plan: Plan) -> _Zygote | None:
    """The zygote, started on first use, when this plan can use it (else None: the `unshare` path)."""
    mode = plan.mode
    if not (mode.namespaces and mode.pidns and mode.root) or zygote_state["broken"]:
        return None
    with _zygote_lock:
        z = zygote_state["zygote"]
        if z is None or not z.alive():
            try:
                z = zygote_state["zygote"] = _Zygote()
            except OSError as exc:
                zygote_broken(f"could not start: {exc}")
                return None
        return z


def zygote_broken(why: str) -> None:
    """Stop using the zygote for the rest of this process (runs go through `unshare` again)."""
    if not zygote_state["broken"]:
        log.info("sandbox: zygote not used (%s); runs start `unshare` instead", why)
    zygote_state["broken"] = why


def helper_pids() -> set[int]:
    """Pids of this process's long-lived sandbox helpers (the zygote): not part of any run, so leftover
    checks skip them (but not their children, which are runs)."""
    z = zygote_state["zygote"]
    return {z.proc.pid} if z is not None and z.alive() else set()


@atexit.register
def _stop_zygote() -> None:
    z = zygote_state["zygote"]
    if z is not None and z.owner == os.getpid():
        z.close()


def unshare_flags(plan: Plan) -> int:
    """The namespaces a run's PID 1 gets from the zygote: mount and PID, and network unless the run may use it."""
    return _CLONE_NEWNS | _CLONE_NEWPID | (0 if plan.limits.network else _CLONE_NEWNET)


def execute_zygote(z: _Zygote, plan: Plan, hostdir: str, code: str, stdin: bytes, files: Mapping[str, bytes] | None = None) -> Outcome:
    """One run through the zygote: the run ends when its status pipe closes (the zygote closes its
    copy once it has reaped the namespace's PID 1, so nothing of the run is left); past the wall
    timeout its process group is killed, which takes PID 1 and with it the whole namespace."""
    flags = unshare_flags(plan)
    r_status, w_status = os.pipe()
    r_in, w_in = os.pipe()
    feed = Stdin(w_in, stdin)
    start = time.monotonic()
    try:
        cfg_path = write_inputs(plan, hostdir, code, -1, files)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            pid = z.spawn(cfg_path, flags, [r_in, out.fileno(), err.fileno(), w_status])
            for fd in (r_in, w_status):
                os.close(fd)
            r_in = w_status = -1
            try:
                status, ended = read_until_eof(r_status, plan.limits.timeout_s, feed)
            except BaseException:
                killpg(pid)  # the caller may run the program again through `unshare`: never two at once
                raise
            feed.close()
            if not ended:
                killpg(pid)
                status += read_all(r_status)
            duration = time.monotonic() - start
            out.seek(0)
            err.seek(0)
            return Outcome(
                stdout=out.read(),
                stderr=err.read(),
                status_lines=status.decode("utf-8", "replace").splitlines(),
                wall_timeout=not ended,
                bootstrap_rc=None,
                duration_s=duration,
                pgid=pid,
            )
    finally:
        feed.close()
        for fd in (r_status, w_status, r_in):
            if fd >= 0:
                os.close(fd)
