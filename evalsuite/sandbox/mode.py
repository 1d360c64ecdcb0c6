"""What a run runs under: the isolation mode this machine allows (probed once), and each run's plan
(that mode, an interpreter the program can reach, a uid of its own as root, the limits).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..hashing import sha256_json
from .isolation import SECCOMP_DENIED, libseccomp
from .mounts import blocking_ancestor

UID_RANGE = (1_100_000, 1_900_000)  #: unprivileged uids nobody else uses (see the package docstring)
#: the warning that starts with this says a run's verdict can be forged where it ran (`forgeable`)
FORGEABLE = "verdict forgeable"


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
class Mode:
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
def machine_mode(network: bool) -> Mode:
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
            return Mode(tuple(full), True, True, root, tuple(warns), label)
        if _try(base):
            warns.append("no PID namespace: leftover processes are killed by uid/process group only")
            return Mode(tuple(base), True, False, root, tuple(warns), "namespaces(mount%s)" % ("" if network else ",net"))
        warns.append(f"`{unshare}` failed here (no namespaces allowed?)")
    else:
        warns.append("`unshare` (util-linux) not found")
    if not network:
        warns.append("network NOT isolated")
    warns.append("no private /tmp, no read-only root: the program can write wherever its uid may")
    return Mode((), False, False, root, tuple(warns), "rlimits only")


def isolation_summary() -> dict:
    """What this machine gives the sandbox, for run signatures and reports: the mode (`isolation`, its
    label; `mode`, in words), whether it runs as root, the calls the seccomp filter denies (`seccomp`,
    empty where there is no filter) and the filter's identity (`seccomp_filter`), and the warnings."""
    m = machine_mode(False)
    warnings = list(m.warnings) + _forgeable(m)
    return {
        "isolation": m.label,
        "mode": mode_words(m),
        "root": m.root,
        "seccomp": list(_seccomp_denied()),
        "seccomp_filter": seccomp_filter(),
        "warnings": warnings,
    }


def mode_words(mode: Mode) -> str:
    """The mode in words: "root with namespaces", "user namespaces" (not root) or "rlimits only"."""
    if not mode.namespaces:
        return "rlimits only"
    return "root with namespaces" if mode.root else "user namespaces"


def _seccomp_denied() -> tuple[str, ...]:
    """The calls the sandbox's filter denies here: none where libseccomp is missing."""
    import ctypes

    return SECCOMP_DENIED if libseccomp(ctypes) is not None else ()


def seccomp_filter() -> dict:
    """The seccomp filter every run gets here: whether there is one (libseccomp loads), a digest of
    the sorted calls it denies (the same list, the same digest) and the libseccomp version."""
    import ctypes

    lib = libseccomp(ctypes)
    if lib is None:
        return {"installed": False, "digest": None, "libseccomp": None}
    return {"installed": True, "digest": sha256_json(sorted(SECCOMP_DENIED))[:16], "libseccomp": _libseccomp_version(lib, ctypes)}


def _libseccomp_version(lib, ctypes) -> str | None:
    """libseccomp's version (`seccomp_version`, libseccomp 2.3 and later), or None where unknown."""
    try:
        fn = lib.seccomp_version
    except AttributeError:  # a libseccomp older than 2.3
        return None

    class Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]

    fn.restype = ctypes.POINTER(Version)
    fn.argtypes = []
    v = fn()
    return f"{v.contents.major}.{v.contents.minor}.{v.contents.micro}" if v else None


def _forgeable(mode: Mode) -> list[str]:
    """Where the program's interpreter can reach the harness's memory: no uids of their own (not root)
    and either /proc in sight (no namespaces: /proc/<harness>/mem is the same uid's) or no filter."""
    if mode.root:
        return []
    if not mode.namespaces:
        return [f"{FORGEABLE}: rlimits only, not root: the program runs as the harness's uid and /proc/<harness>/mem is open to it"]
    if not _seccomp_denied():
        return [f"{FORGEABLE}: not root and no seccomp filter: the program runs as the harness's uid, unfiltered"]
    return []


def forgeable(warnings: Sequence[str]) -> str | None:
    """The warning that says the verdict could be forged where the run ran, if one does."""
    return next((w for w in warnings if w.startswith(FORGEABLE)), None)


def _reachable_by_others(path: str) -> bool:
    import stat

    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
    except OSError:
        return False
    return blocking_ancestor(os.path.dirname(real)) is None


@lru_cache(maxsize=4)
def _program_python(mode: Mode) -> tuple[str, str | None]:
    """The interpreter the program runs with: the suite's own, unless the dropped uid cannot reach it."""
    own = os.path.realpath(sys.executable)
    if mode.namespaces or not mode.root or (_reachable_by_others(own) and blocking_ancestor(os.path.realpath(sys.base_prefix)) is None):
        return own, None
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(cand) and _reachable_by_others(cand):
            return os.path.realpath(cand), f"the suite's interpreter {own} is not reachable by the sandbox uid: programs run with {cand}"
    return own, f"the suite's interpreter {own} is not reachable by the sandbox uid and no other python3 was found"


@dataclass(frozen=True)
class Plan:
    """Who and how one run executes: the isolation mode, interpreter, uid and limits."""

    mode: Mode
    limits: Limits
    python: str
    uid: int | None  #: main.py's uid; where it is the harness, the program's is uid + 1 and the tests' uid + 2
    warnings: tuple[str, ...]
    harness: bool = False  #: main.py is the suite's harness (`build_harness`): it gives each interpreter its own uid
    #: main.py runs in a fork of the run's PID 1, not a fresh interpreter (`fork_main.run_main_here`): only
    #: for a harness whose untrusted code runs in interpreters of its own
    fork_main: bool = False

    def uids(self) -> tuple[int, ...]:
        """Every uid the run's processes may have."""
        if self.uid is None:
            return ()
        return (self.uid, self.uid + 1, self.uid + 2) if self.harness else (self.uid,)


def plan_run(lim: Limits, *, harness: bool = False, fork_main: bool = False) -> Plan:
    """The strongest isolation available, the interpreter the program can reach, fresh uids as root."""
    if fork_main and not harness:
        raise ValueError("fork_main is for a harness whose untrusted code runs in interpreters of its own")
    mode = machine_mode(lim.network)
    warnings = list(mode.warnings)
    python, pywarn = _program_python(mode)
    if pywarn:
        warnings.append(pywarn)
    warnings += _forgeable(mode)
    uid = UIDS.claim() if mode.root else None
    return Plan(mode, lim, python, uid, tuple(warnings), harness, fork_main=fork_main)


class Uids:
    """The uids this process's runs in flight hold: runs never share one (a kill by uid, or a process
    limit per uid, must reach one run only). Claimed in blocks of four (the harness, the program, the
    tests), each at random in `UID_RANGE`; `release` frees a block once its run is over."""

    def __init__(self) -> None:
        self.in_use: set[int] = set()
        self._lock = threading.Lock()

    def claim(self) -> int:
        """A random uid of the range that no run of this process holds now, with the three after it."""
        with self._lock:
            while True:
                uid = 4 * secrets.randbelow((UID_RANGE[1] - UID_RANGE[0]) // 4) + UID_RANGE[0]
                if uid not in self.in_use:
                    self.in_use.add(uid)
                    return uid

    def release(self, uid: int | None) -> None:
        if uid is not None:
            with self._lock:
                self.in_use.discard(uid)


#: the uids of this process's runs (`plan_run` claims them, `process.run_python` releases them)
UIDS = Uids()
