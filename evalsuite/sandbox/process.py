"""Spawning one sandboxed run and judging how it ended (the suite's side of `isolation`).

A run goes through the zygote (`isolation.zygote`, one per suite process) where it applies, else
through `unshare` and a bootstrap interpreter; either way the program is a fresh interpreter in
fresh namespaces (see the package docstring). `run_python` is the one entry point.
"""

from __future__ import annotations

import ast
import atexit
import logging
import marshal
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .isolation import _MAIN, _blocking_ancestor

log = logging.getLogger(__name__)

#: statuses a run can end with
STATUSES = ("passed", "failed", "timeout", "error")
OUTPUT_LIMIT = 8000  #: characters of stdout/stderr kept (head and tail)


_logged: set[str] = set()
_UID_RANGE = (1_100_000, 1_900_000)  #: unprivileged uids nobody else uses (see the module docstring)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    timeout_s: float = 10.0  #: wall clock, the whole process group is killed after it
    memory_mb: int = 512  #: RLIMIT_AS
    cpu_s: int | None = None  #: RLIMIT_CPU; default: the wall timeout rounded up
    max_procs: int = 32  #: RLIMIT_NPROC (processes and threads of the sandbox uid)
    max_file_mb: int = 16  #: RLIMIT_FSIZE, also bounds stdout/stderr and the private /tmp
    network: bool = False  #: allow network (no network namespace)

    def resolved_cpu_s(self) -> int:
        import math

        return int(self.cpu_s) if self.cpu_s is not None else max(1, math.ceil(self.timeout_s))


@dataclass(frozen=True)
class SandboxResult:
    """How one sandboxed program ended."""

    status: str  #: "passed", "failed", "timeout" or "error" (the sandbox itself failed)
    stdout: str  #: truncated to OUTPUT_LIMIT characters (head and tail kept)
    stderr: str  #: truncated likewise
    returncode: int | None  #: negative: killed by that signal
    duration_s: float
    verdict_seen: bool  #: the per-run token was printed after the tests (False when none was asked for)
    reason: str = ""  #: why it failed: "exit 1", "signal 9", "wall timeout", "cpu limit", "exited before the verdict", ...
    warnings: tuple[str, ...] = ()  #: protections that were missing on this machine
    isolation: str = ""  #: e.g. "namespaces(mount,net,pid)+uid 1234567" or "rlimits only"
    workdir: str = ""  #: the host temp dir (already deleted)
    tests_run: int | None = None  #: tests that ran and executed an assertion (run_tests only)
    cpu_s: float | None = None  #: CPU seconds the program used
    uid: int | None = None  #: the uid the program ran as (None: the caller's)
    pgid: int | None = None  #: the run's process group and session (all killed when it ends)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True)
class _Mode:
    prefix: tuple[str, ...]
    namespaces: bool
    pidns: bool
    root: bool
    warnings: tuple[str, ...]
    label: str


def _try(cmd: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(cmd) + ["--", "true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=4)
def _mode(network: bool) -> _Mode:
    """The strongest isolation this machine allows (probed once)."""
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    warns: list[str] = []
    if not root:
        warns.append("not root: no uid drop; the program runs as the caller's uid (capabilities dropped), RLIMIT_NPROC binds that uid")
    if unshare:
        base = [unshare] + ([] if root else ["--user", "--map-root-user"]) + ["--mount"] + ([] if network else ["--net"])
        full = base + ["--pid", "--fork", "--kill-child", "--mount-proc"]
        if _try(full):
            label = "namespaces(mount,%spid)" % ("" if network else "net,")
            return _Mode(tuple(full), True, True, root, tuple(warns), label)
        if _try(base):
            warns.append("no PID namespace: leftover processes are killed by uid/process group only")
            return _Mode(tuple(base), True, False, root, tuple(warns), "namespaces(mount%s)" % ("" if network else ",net"))
        warns.append(f"`{unshare}` failed here (no namespaces allowed?)")
    else:
        warns.append("`unshare` (util-linux) not found")
    if not network:
        warns.append("network NOT isolated")
    warns.append("no private /tmp, no read-only root: the program can write wherever its uid may")
    return _Mode((), False, False, root, tuple(warns), "rlimits only")


def isolation_summary() -> dict:
    """What this machine gives the sandbox, for run signatures and reports."""
    m = _mode(False)
    return {"isolation": m.label, "root": m.root, "warnings": list(m.warnings)}


def _reachable_by_others(path: str) -> bool:
    import stat

    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
    except OSError:
        return False
    return _blocking_ancestor(os.path.dirname(real)) is None


@lru_cache(maxsize=4)
def _program_python(mode: _Mode) -> tuple[str, str | None]:
    """The interpreter the program runs with: the suite's own, unless the dropped uid cannot reach it."""
    own = os.path.realpath(sys.executable)
    if mode.namespaces or not mode.root or (_reachable_by_others(own) and _blocking_ancestor(os.path.realpath(sys.base_prefix)) is None):
        return own, None
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(cand) and _reachable_by_others(cand):
            return os.path.realpath(cand), f"the suite's interpreter {own} is not reachable by the sandbox uid: programs run with {cand}"
    return own, f"the suite's interpreter {own} is not reachable by the sandbox uid and no other python3 was found"


def _truncate(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    if len(s) <= OUTPUT_LIMIT:
        return s
    half = OUTPUT_LIMIT // 2
    return s[:half] + f"\n...[{len(s) - OUTPUT_LIMIT} characters cut]...\n" + s[-half:]


def _read_all(fd: int) -> bytes:
    chunks = []
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


@dataclass(frozen=True)
class _Plan:
    """Who and how one run executes: the isolation mode, interpreter, uid and limits."""

    mode: _Mode
    limits: Limits
    python: str
    uid: int | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class _Outcome:
    """What came back from the bootstrap, before it is judged."""

    stdout: bytes
    stderr: bytes
    status_lines: list[str]
    wall_timeout: bool
    bootstrap_rc: int | None
    duration_s: float
    pgid: int


def _plan(lim: Limits) -> _Plan:
    """The strongest isolation available, the interpreter the program can reach, a fresh uid as root."""
    mode = _mode(lim.network)
    warnings = list(mode.warnings)
    python, pywarn = _program_python(mode)
    if pywarn:
        warnings.append(pywarn)
    uid = _claim_uid() if mode.root else None
    return _Plan(mode, lim, python, uid, tuple(warnings))


_uids_in_use: set[int] = set()
_uids_lock = threading.Lock()


def _claim_uid() -> int:
    """A random uid of the range that no run of this process holds now: runs in flight never share
    one (a kill by uid, or a process limit per uid, must reach one run only). `_release_uid` frees it."""
    with _uids_lock:
        while True:
            uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
            if uid not in _uids_in_use:
                _uids_in_use.add(uid)
                return uid


def _release_uid(uid: int | None) -> None:
    if uid is not None:
        with _uids_lock:
            _uids_in_use.discard(uid)


def _write_inputs(plan: _Plan, hostdir: str, code: str, status_fd: int) -> str:
    """The program and the bootstrap's config in the host temp dir; returns the config's path."""
    lim = plan.limits
    with open(os.path.join(hostdir, _MAIN), "w", encoding="utf-8") as fh:
        fh.write(code)
    cfg = {
        "hostdir": hostdir,
        "status_fd": status_fd,
        "namespaces": plan.mode.namespaces,
        "pidns": plan.mode.pidns,
        "drop_caps": plan.mode.namespaces and not plan.mode.root,
        "uid": plan.uid,
        "python": plan.python,
        "prefix": os.path.realpath(sys.base_prefix),
        "cpu_s": lim.resolved_cpu_s(),
        "memory_mb": lim.memory_mb,
        "max_file_mb": lim.max_file_mb,
        "max_procs": lim.max_procs,
    }
    cfg_path = os.path.join(hostdir, "sandbox.cfg")
    with open(cfg_path, "wb") as fh:
        marshal.dump(cfg, fh)  # the bootstrap runs this very interpreter (sys.executable)
    if plan.uid is not None and not plan.mode.namespaces:
        os.chown(hostdir, plan.uid, plan.uid)
        os.chown(os.path.join(hostdir, _MAIN), plan.uid, plan.uid)
    return cfg_path


# The bootstrap's code object travels as a marshal file (same interpreter: sys.executable), so no
# run compiles isolation.py (no cached bytecode is written with PYTHONDONTWRITEBYTECODE).
_BOOT_CODE = "import marshal, sys; g = {'__name__': 'isolation'}; exec(marshal.loads(open(sys.argv[1], 'rb').read()), g); sys.exit(g['main'](sys.argv[2:]))"
_BOOT_BIN = "boot.bin"


@lru_cache(maxsize=1)
def _boot_code() -> bytes:
    from . import isolation

    with open(isolation.__file__, encoding="utf-8") as fh:
        return marshal.dumps(compile(fh.read(), isolation.__file__, "exec", dont_inherit=True))


def _bootstrap_cmd(plan: _Plan, cfg_path: str) -> list[str]:
    prefix = list(plan.mode.prefix)
    boot = os.path.join(os.path.dirname(cfg_path), _BOOT_BIN)
    return prefix + (["--"] if prefix else []) + [sys.executable, "-I", "-S", "-B", "-c", _BOOT_CODE, boot, cfg_path]


class _Stdin:
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


def _poll_until(fd: int, deadline: float, stdin: _Stdin) -> bool:
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


def _exited_within(proc: subprocess.Popen, timeout_s: float, stdin: _Stdin) -> bool:
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


def _wait_or_kill(proc: subprocess.Popen, timeout_s: float, stdin: _Stdin) -> bool:
    """Wait for the bootstrap; past the wall timeout kill its whole process group. True if killed."""
    if _exited_within(proc, timeout_s, stdin):
        proc.wait()
        return False
    _killpg(proc.pid)
    proc.wait()
    return True


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


#: run through the zygote (isolation.zygote) where it applies: root, mount+PID(+net) namespaces
USE_ZYGOTE = True
_ZYGOTE_CODE = "import marshal, sys; g = {'__name__': 'isolation'}; exec(marshal.loads(sys.stdin.buffer.read()), g); sys.exit(g['zygote'](int(sys.argv[1])))"
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
        self.proc.stdin.write(_boot_code())
        self.proc.stdin.close()
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
_zygote_state: dict = {"zygote": None, "broken": None}


def _zygote_for(plan: _Plan) -> _Zygote | None:
    """The zygote, started on first use, when this plan can use it (else None: the `unshare` path)."""
    mode = plan.mode
    if not (USE_ZYGOTE and mode.namespaces and mode.pidns and mode.root) or _zygote_state["broken"]:
        return None
    with _zygote_lock:
        z = _zygote_state["zygote"]
        if z is None or not z.alive():
            try:
                z = _zygote_state["zygote"] = _Zygote()
            except OSError as exc:
                _zygote_broken(f"could not start: {exc}")
                return None
        return z


def _zygote_broken(why: str) -> None:
    """Stop using the zygote for the rest of this process (runs go through `unshare` again)."""
    if not _zygote_state["broken"]:
        log.info("sandbox: zygote not used (%s); runs start `unshare` instead", why)
    _zygote_state["broken"] = why


def helper_pids() -> set[int]:
    """Pids of this process's long-lived sandbox helpers (the zygote): not part of any run, so leftover
    checks skip them (but not their children, which are runs)."""
    z = _zygote_state["zygote"]
    return {z.proc.pid} if z is not None and z.alive() else set()


@atexit.register
def _stop_zygote() -> None:
    z = _zygote_state["zygote"]
    if z is not None and z.owner == os.getpid():
        z.close()


def _read_until_eof(fd: int, timeout_s: float, stdin: _Stdin) -> tuple[bytes, bool]:
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


def _execute_zygote(z: _Zygote, plan: _Plan, hostdir: str, code: str, stdin: bytes) -> _Outcome:
    """`_execute` through the zygote: the run ends when its status pipe closes (the zygote closes its
    copy once it has reaped the namespace's PID 1, so nothing of the run is left); past the wall
    timeout its process group is killed, which takes PID 1 and with it the whole namespace."""
    flags = _CLONE_NEWNS | _CLONE_NEWPID | (0 if plan.limits.network else _CLONE_NEWNET)
    r_status, w_status = os.pipe()
    r_in, w_in = os.pipe()
    feed = _Stdin(w_in, stdin)
    start = time.monotonic()
    try:
        cfg_path = _write_inputs(plan, hostdir, code, -1)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            pid = z.spawn(cfg_path, flags, [r_in, out.fileno(), err.fileno(), w_status])
            for fd in (r_in, w_status):
                os.close(fd)
            r_in = w_status = -1
            try:
                status, ended = _read_until_eof(r_status, plan.limits.timeout_s, feed)
            except BaseException:
                _killpg(pid)  # the caller may run the program again through `unshare`: never two at once
                raise
            feed.close()
            if not ended:
                _killpg(pid)
                status += _read_all(r_status)
            duration = time.monotonic() - start
            out.seek(0)
            err.seek(0)
            return _Outcome(out.read(), err.read(), status.decode("utf-8", "replace").splitlines(), not ended, None, duration, pid)
    finally:
        feed.close()
        for fd in (r_status, w_status, r_in):
            if fd >= 0:
                os.close(fd)


def _execute(plan: _Plan, hostdir: str, code: str, stdin: bytes) -> _Outcome:
    """Start the bootstrap in its own session, feed stdin, wait (or kill), collect output and status."""
    z = _zygote_for(plan)
    if z is not None:
        try:
            out = _execute_zygote(z, plan, hostdir, code, stdin)
        except (OSError, ValueError) as exc:
            _zygote_broken(f"{type(exc).__name__}: {exc}")
        else:
            boot, setup_error = _parse_status(out.status_lines)
            if not (setup_error or "").startswith("zygote:") or boot:
                return out
            # the zygote could not set up namespaces that `unshare` could (the program never ran)
            _zygote_broken(setup_error)
    return _execute_unshare(plan, hostdir, code, stdin)


def _execute_unshare(plan: _Plan, hostdir: str, code: str, stdin: bytes) -> _Outcome:
    """`_execute` through `unshare` (or a plain process): the bootstrap in its own session."""
    r_status, w_status = os.pipe()
    r_in, w_in = os.pipe()
    feed = _Stdin(w_in, stdin)
    start = time.monotonic()
    try:
        cfg_path = _write_inputs(plan, hostdir, code, w_status)
        with open(os.path.join(hostdir, _BOOT_BIN), "wb") as fh:
            fh.write(_boot_code())
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
            if plan.uid is not None and not plan.mode.pidns:
                _kill_uid_from_host(plan.uid, plan.python)  # stragglers outside the process group
            duration = time.monotonic() - start
            status_lines = _read_all(r_status).decode("utf-8", "replace").splitlines()
            out.seek(0)
            err.seek(0)
            return _Outcome(out.read(), err.read(), status_lines, wall_timeout, proc.returncode, duration, proc.pid)
    finally:
        feed.close()
        for fd in (r_status, w_status, r_in):
            if fd >= 0:
                os.close(fd)


def _parse_status(lines: list[str]) -> tuple[dict, str | None]:
    """The bootstrap's final report and the setup error, if any, from its status lines."""
    boot: dict = {}
    setup_error = None
    for line in lines:
        try:
            d = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if not isinstance(d, dict):
            continue
        if "setup_error" in d:
            setup_error = d["setup_error"]
        else:
            boot = d
    return boot, setup_error


@dataclass(frozen=True)
class _Verdict:
    seen: bool = False  #: the token was the last line
    tests_run: int | None = None
    failure: str | None = None  #: the harness's own reason for failing ("no test ran", ...)


def _split_verdict(stdout: bytes, token: str | None) -> tuple[bytes, _Verdict]:
    """Take the harness's last line ("<token> <tests run>" or "<token> FAIL <reason>") off stdout."""
    if token is None:
        return stdout, _Verdict()
    text = stdout.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    if not (last.startswith(token + " ") or last == token):
        return stdout, _Verdict()  # absent, or something was printed after it: it was not last
    rest = last[len(token) :].strip()
    if rest.startswith("FAIL "):
        return body.encode(), _Verdict(False, None, rest[5:])
    return body.encode(), _Verdict(True, int(rest) if rest.isdigit() else None)


def _signal_name(rc: int) -> str:
    return f"signal {signal.Signals(-rc).name}" if -rc in signal.valid_signals() else f"signal {-rc}"


def _judge(out: _Outcome, boot: dict, setup_error: str | None, verdict: _Verdict, token: str | None, lim: Limits) -> tuple[str, str]:
    """(status, reason) of one run; the first matching rule wins."""
    rc = boot.get("returncode")
    tail = out.stderr[-4000:]
    if out.wall_timeout:
        return "timeout", f"wall timeout ({lim.timeout_s:g} s)"
    if setup_error:
        return "error", f"sandbox setup failed: {setup_error}"
    if rc is None:
        ended = "without a report" if out.bootstrap_rc is None else f"with {out.bootstrap_rc}"  # zygote: no exit status here
        return "error", f"sandbox bootstrap ended {ended}: {_truncate(out.stderr)[-500:]}"
    if rc == -signal.SIGXCPU or (rc == -signal.SIGKILL and (boot.get("cpu_s") or 0) >= lim.resolved_cpu_s() - 0.05):
        return "timeout", f"cpu limit ({lim.resolved_cpu_s()} s)"
    if verdict.failure:
        return "failed", verdict.failure
    if rc != 0:
        reason = _signal_name(rc) if rc < 0 else f"exit {rc}"
        cap = lim.max_file_mb * 1024 * 1024
        if rc == -signal.SIGXFSZ or b"File too large" in tail or max(len(out.stdout), len(out.stderr)) >= cap:
            reason += " (file size limit)"
        if b"MemoryError" in tail:
            reason += " (MemoryError: memory limit)"
        return "failed", reason
    if token is not None and not verdict.seen:
        return "failed", "exited before the verdict (the tests did not all run)"
    if verdict.tests_run == 0:
        return "failed", "no test ran"
    return "passed", ""


def _log_new(warnings: Sequence[str]) -> None:
    for w in warnings:
        if w not in _logged:
            _logged.add(w)
            log.warning("sandbox: %s", w)


def run_python(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 512,
    cpu_s: int | None = None,
    max_procs: int = 32,
    max_file_mb: int = 16,
    network: bool = False,
    verdict_token: str | None = None,
    stdin: bytes = b"",
) -> SandboxResult:
    """Run `code` as `main.py` in the sandbox.

    Passed means exit status 0 and, when `verdict_token` is given, that token as the last line of
    stdout (followed by a test count that is not 0, when the harness gives one).
    """
    plan = _plan(Limits(timeout_s, memory_mb, cpu_s, max_procs, max_file_mb, network))
    try:
        hostdir = tempfile.mkdtemp(prefix="evalsuite-sbx-")
        try:
            out = _execute(plan, hostdir, code, stdin)
        finally:
            shutil.rmtree(hostdir, ignore_errors=True)
    finally:
        _release_uid(plan.uid)  # the run's processes are all gone by now (see _execute)
    boot, setup_error = _parse_status(out.status_lines)
    stdout, verdict = _split_verdict(out.stdout, verdict_token)
    status, reason = _judge(out, boot, setup_error, verdict, verdict_token, plan.limits)
    warnings = tuple(dict.fromkeys(list(plan.warnings) + list(boot.get("warnings", []))))
    _log_new(warnings)
    return SandboxResult(
        status=status,
        stdout=_truncate(stdout),
        stderr=_truncate(out.stderr),
        returncode=boot.get("returncode"),
        duration_s=round(out.duration_s, 4),
        verdict_seen=verdict.seen,
        reason=reason,
        warnings=warnings,
        isolation=plan.mode.label + (f"+uid {plan.uid}" if plan.uid is not None else ""),
        workdir=hostdir,
        tests_run=verdict.tests_run,
        uid=plan.uid,
        cpu_s=None if boot.get("cpu_s") is None else round(boot["cpu_s"], 4),
        pgid=out.pgid,
    )
