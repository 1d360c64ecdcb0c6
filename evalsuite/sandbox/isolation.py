"""Inside the sandbox: namespaces, mounts, limits and the uid drop for one run, then the program.

Two ways in (see the package docstring for the whole mechanism). Through `unshare`, this module runs
as `python -I -S -B -c "<exec its marshalled code>" boot.bin sandbox.cfg`, PID 1 of the run's PID
namespace (`main`): the suite compiles this file and `mounts` (the run's file system) once per
process and hands over the code objects, run in one namespace, `mounts` first (`spawn.boot_code`),
so no run pays for compiling them (with PYTHONDONTWRITEBYTECODE or a read-only install there is no
cached bytecode to lean on). Through the zygote (`zygote`), one long-lived process forks each run's
PID 1 and no run starts an interpreter before the program's own. Either way `_boot` does the rest,
and a `run_tests` harness that may (`cfg["fork_main"]`) runs in PID 1's fork without an `execve`
(`fork_main.run_main_here`): no run through the zygote then starts an interpreter at all.

Only the standard library, and only its cheap part (no json, re or signal/enum at import), because
its start-up is paid once per run on the `unshare` path. The config comes as a marshal file and the
status goes back as `repr` lines (read with `ast.literal_eval`).
"""

from __future__ import annotations

import marshal
import os
import sys

if __name__ != "isolation":  # the suite imports it; in the sandbox `mounts` and `fork_main` already ran in this namespace (`spawn.boot_code`)
    from .fork_main import run_main_here
    from .mounts import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_REC, WORK, isolate_fs, load_libc, mount

MAIN = "main.py"  #: the program's (or the harness's) file in the working directory

# linux/prctl.h, linux/capability.h
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 38, 24, 28, 47

# ----------------------------------------------------------------------------------------------
# Bootstrap (runs inside the namespaces; stdlib only): the program's process, its limits and filter
# ----------------------------------------------------------------------------------------------


def _drop_all_caps() -> None:
    """Without a uid to switch to (user namespace, uid 0 inside): lose every capability for good."""
    ctypes, libc = load_libc()
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


#: system calls the program, the harness and the tests' interpreter never need: each fails with EPERM
#: (a program that probes for one still runs). Reaching another process (ptrace, process_vm_*,
#: pidfd_*, kcmp), the kernel's larger surfaces (bpf, perf events, userfaultfd, keyrings, modules)
#: and the namespaces and mounts the sandbox set up.
SECCOMP_DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "kcmp",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "move_mount",
    "fsopen",
    "open_tree",
    "pivot_root",
    "unshare",
    "setns",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "open_by_handle_at",
)
_SCMP_ACT_ALLOW, _SCMP_ACT_EPERM = 0x7FFF0000, 0x00050000 | 1  # SCMP_ACT_ERRNO(EPERM)
_seccomp: list = []  #: libseccomp, loaded once per process (the zygote loads it before any run)
_filter: list = []  #: the filter (a libseccomp context, or None) and its warnings, built once per process (`_seccomp_filter`)


def libseccomp(ctypes):
    """libseccomp.so.2 through ctypes, or None where it is missing."""
    if not _seccomp:
        try:
            lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
            lib.seccomp_init.restype = ctypes.c_void_p
            lib.seccomp_init.argtypes = [ctypes.c_uint32]
            lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
            lib.seccomp_load.argtypes = [ctypes.c_void_p]
            lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        except (OSError, AttributeError):
            lib = None
        _seccomp.append(lib)
    return _seccomp[0]


def _seccomp_filter(ctypes, warnings: list):
    """The filter, built (not loaded): a libseccomp context, or None with a warning. Built once per
    process and kept (the zygote builds it before any run, so each run's `seccomp_load` starts from a
    copy of the same rules); `seccomp_load` does not change it."""
    if not _filter:
        built: list = []
        lib = libseccomp(ctypes)
        ctx = lib.seccomp_init(_SCMP_ACT_ALLOW) if lib is not None else None
        if not ctx:
            built.append("no seccomp filter (libseccomp.so.2 not found): nothing but the uids keeps the program from the harness's memory")
            ctx = None
        else:
            for name in SECCOMP_DENIED:
                nr = lib.seccomp_syscall_resolve_name(name.encode())
                if nr >= 0 and lib.seccomp_rule_add(ctx, _SCMP_ACT_EPERM, nr, 0) != 0:
                    built.append(f"seccomp: {name} not filtered")
        _filter[:] = [ctx, built]
    warnings.extend(_filter[1])
    return _filter[0]


def _load_filter(ctypes, ctx) -> None:
    """Load the filter into this process (inherited by every fork and exec after it); no return on failure."""
    if ctx is not None and libseccomp(ctypes).seccomp_load(ctx) != 0:
        raise OSError(ctypes.get_errno(), "seccomp_load")


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
    import signal

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


def _boot(argv: list, status_fd: int | None = None) -> int:
    """Entry point inside the sandbox: set up, fork the program, report its status on the status fd."""
    with open(argv[0], "rb") as fh:
        cfg = marshal.load(fh)
    status_fd = int(cfg["status_fd"]) if status_fd is None else status_fd
    os.set_inheritable(status_fd, False)
    warnings: list = []
    workdir = _prepare_workdir(cfg, warnings)
    pid, seccomp = _fork_program(cfg, workdir, status_fd, warnings)
    # We are PID 1 of the namespace (or a plain parent): reap everything, remember the program's status.
    status, cpu_used = _reap_until(pid)
    uid = cfg["uid"]
    if uid is not None and not cfg["pidns"]:
        for u in _run_uids(cfg):
            _kill_uid(u)  # no PID namespace to take leftovers down with us
    elif cfg["pidns"] and os.getpid() == 1:
        _kill_namespace()
    rc = os.waitstatus_to_exitcode(status) if status is not None else None
    _report(status_fd, {"returncode": rc, "workdir": workdir, "cpu_s": cpu_used, "warnings": warnings, "seccomp": seccomp})
    return 0


def _run_uids(cfg: dict) -> tuple:
    """The run's uids: main.py's, and where main.py is the harness, the program's and the tests' after it."""
    uid = cfg["uid"]
    if uid is None:
        return ()
    return (uid, uid + 1, uid + 2) if cfg["harness"] else (uid,)


def _report(status_fd: int, report: dict) -> None:
    """One status line for the suite (read back with `ast.literal_eval`)."""
    os.write(status_fd, (repr(report) + "\n").encode())


def _prepare_workdir(cfg: dict, warnings: list) -> str:
    """The program's working directory with its `main.py` (and the files the suite put beside it,
    `cfg["files"]`), owned by the sandbox uid: `/tmp/work` in a private file system where namespaces
    allow it, else the host temp dir."""
    names = (MAIN, *cfg.get("files", ()))
    contents = []
    for name in names:
        with open(os.path.join(cfg["hostdir"], name), "rb") as fh:
            contents.append(fh.read())
    workdir = cfg["hostdir"]
    if cfg["namespaces"]:
        try:
            isolate_fs(cfg, warnings)
            workdir = WORK
        except OSError as exc:
            warnings.append(f"no private /tmp or read-only root: {exc}; program runs in the host temp dir")
    uid = cfg["uid"]
    if workdir == WORK:
        for name, data in zip(names, contents):
            with open(os.path.join(workdir, name), "wb") as fh:
                fh.write(data)
    if uid is not None:
        # a harness's three interpreters make and open files as the program's uid (`_harness_main._become`)
        owner = uid + 1 if cfg["harness"] else uid
        os.chown(workdir, owner, owner)
        for name in names:
            os.chown(os.path.join(workdir, name), uid, uid)
    return workdir


def _program_env(workdir: str) -> dict:
    """The program's whole environment: nothing of the suite's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }


def _fork_program(cfg: dict, workdir: str, status_fd: int, warnings: list) -> tuple:
    """Fork the program's process (limits, no new privileges, the uid drop, the seccomp filter, then
    `execve`); its pid and the names of the calls the filter denies. The child never returns: what
    stops the exec goes to the status fd as a setup error."""
    env = _program_env(workdir)
    ctypes, libc = load_libc()
    import resource  # noqa: F401 - imported while the interpreter's files are still readable

    ctx = _seccomp_filter(ctypes, warnings)
    pid = os.fork()
    if pid == 0:
        try:
            _exec_program(cfg, workdir, env, (ctypes, libc, ctx))
        except BaseException as exc:  # noqa: BLE001 - report anything that stops the exec
            try:
                _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
            finally:
                os._exit(126)
    return pid, SECCOMP_DENIED if ctx is not None else ()


def _exec_program(cfg: dict, workdir: str, env: dict, ctypes_libc: tuple) -> None:
    """In the program's process: its limits, identity and filter, then `python -I -S -B main.py` (no return).

    Where main.py is the harness and the run has uids, it starts as root and gives itself, the
    program's interpreter and the tests' their own uids (`_harness_main._become`) once it has forked
    them: it gets the uids as its arguments. Everything else runs as the run's uid from the start."""
    ctypes, libc, ctx = ctypes_libc
    os.chdir(workdir)
    _set_limits(cfg)
    # before the uid drop: the interpreter's own files may be unreadable afterwards
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    uid = cfg["uid"]
    if uid is not None and not cfg["harness"]:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    elif uid is None and cfg["drop_caps"]:
        _drop_all_caps()
    _load_filter(ctypes, ctx)
    py = cfg["python"]
    args = [MAIN, *map(str, _run_uids(cfg) if cfg["harness"] else ())]
    if cfg["fork_main"] and py == os.path.realpath(sys.executable):
        run_main_here(py, args, env)  # no return
    os.execve(py, [py, "-I", "-S", "-B", *args], env)


def _reap_until(pid: int) -> tuple:
    """Reap children until `pid` ends: its wait status and CPU seconds (None, None if it is gone)."""
    while True:
        try:
            done, st, ru = os.wait4(-1, 0)
        except ChildProcessError:
            return None, None
        if done == pid:
            return st, ru.ru_utime + ru.ru_stime


def _kill_namespace() -> None:
    """As PID 1: kill and reap every other process of the namespace (orphans are all our children),
    so that when the report goes out nothing of the run is left, without waiting for our own exit."""
    while True:
        try:
            os.kill(-1, 9)  # SIGKILL to all of this PID namespace but ourselves
        except OSError:
            pass
        try:
            while True:
                os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main(argv: list) -> int:
    """`isolation.main([config path])`: what the bootstrap command runs."""
    return _boot(argv)


# ----------------------------------------------------------------------------------------------
# Zygote: the same bootstrap without a Python start-up per run
# ----------------------------------------------------------------------------------------------

# linux/sched.h, linux/prctl.h
_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
_PR_SET_PDEATHSIG = 1


def zygote(sock_fd: int) -> int:
    """Serve runs for one suite process: for each request (config path, unshare flags, and the run's
    stdin, stdout, stderr and status fds), fork the run's PID 1 into a new PID namespace, which then
    does what `unshare --mount --net --mount-proc` and the bootstrap do, and answer with its pid (its
    process group).

    Why: starting `unshare` and a Python for the bootstrap cost about a third of a sample's time.
    This process stays small (the stdlib modules the bootstrap needs, nothing of the suite, no
    secret of any run), and each run still gets fresh namespaces, its own limits, filter and uids.
    main.py is a fresh `execve` of the interpreter unless it is a harness that may run in PID 1's
    fork (`fork_main.run_main_here`), which then holds what this process loaded, ctypes included.
    It runs as long as the suite holds the other end of the socket.

    The run's status fd stays open here until its PID 1 is reaped: by then the kernel has killed and
    waited for everything in that namespace, so the suite's end-of-file means "nothing is left".
    """
    import gc
    import resource  # noqa: F401 - loaded once here, not in every run's child
    import select
    import socket

    ctypes, libc = load_libc()
    _seccomp_filter(ctypes, [])  # once here, not in every run (its warnings go to each run's report)
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    wake_r, wake_w = _wake_on_sigchld()
    pending: dict = {}  # run pid -> its status fd
    sock = socket.socket(fileno=sock_fd)
    gc.collect()
    gc.freeze()  # children do not walk (and so copy) our objects' pages when they collect
    while True:
        _reap(pending)
        ready = select.select([sock, wake_r], [], [], 5.0)[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
        if sock not in ready:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 65536, 4)
        except OSError:
            return 0
        if not msg:
            return 0  # the suite went away
        try:
            pid = _fork_in_new_pidns(ctypes, libc, own_pidns)
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            sock.send(repr(-(exc.errno or 1)).encode())
            continue
        if pid == 0:
            # other runs' status fds too: holding one would delay that run's end-of-file to ours
            _run_pid_1(msg, fds, (sock_fd, wake_r, wake_w, own_pidns, *pending.values()))
        for fd in fds[:3]:
            os.close(fd)
        pending[pid] = fds[3]
        sock.send(repr(pid).encode())


def _wake_on_sigchld() -> tuple:
    """A pipe that becomes readable when a child ends (the zygote's select wakes on it)."""
    import signal

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    return wake_r, wake_w


def _fork_in_new_pidns(ctypes, libc, own_pidns: int) -> int:
    """Fork a child that is PID 1 of a new PID namespace (0 in the child, its pid in the zygote)."""
    if libc.unshare(_CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
    try:
        pid = os.fork()
    except OSError:
        pid = -1
        raise
    finally:
        # (here, not in the child) our own next children must be born in our namespace again
        if pid != 0 and libc.setns(own_pidns, _CLONE_NEWPID) != 0:
            os._exit(70)  # cannot happen as root; never fork into a stale namespace
    return pid


def _run_pid_1(msg: bytes, fds: list, zygote_fds: tuple) -> None:
    """In the zygote's child: let go of the zygote's signal handling and fds, run `_zygote_child`, exit
    (never return: the zygote's loop must not go on in a child)."""
    code = 127
    try:
        import gc
        import signal

        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        gc.disable()
        for fd in zygote_fds:
            os.close(fd)
        code = _zygote_child(msg, fds)
    finally:
        os._exit(code)


def _reap(pending: dict) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = pending.pop(pid, None)
        if fd is not None:
            os.close(fd)


def _zygote_child(msg: bytes, fds: list) -> int:
    """PID 1 of a new PID namespace: new session, the run's stdio, new mount (and network)
    namespaces, a /proc of our own, then `_boot`."""
    stdin_fd, out_fd, err_fd, status_fd = fds
    os.set_inheritable(status_fd, False)
    try:
        cfg_path, flags = marshal.loads(msg)
        os.setsid()
        for fd, target in ((stdin_fd, 0), (out_fd, 1), (err_fd, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(os.path.dirname(cfg_path))
        ctypes, libc = load_libc()
        # like `unshare --kill-child`: if the zygote dies, we die, and the namespace with us
        libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        if libc.unshare(flags & ~_CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        # like `unshare --mount-proc`
        mount(libc, ctypes, "none", "/", None, MS_REC | MS_PRIVATE)
        mount(libc, ctypes, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except BaseException as exc:  # noqa: BLE001 - reported, never raised past the fork
        # "zygote:" tells the suite the program never ran: it retries the run through `unshare`
        os.write(status_fd, (repr({"setup_error": f"zygote: {type(exc).__name__}: {exc}"}) + "\n").encode())
        return 126
    try:
        return _boot([cfg_path], status_fd)
    except BaseException:  # noqa: BLE001 - as on the `unshare` path, the traceback goes to the run's stderr
        import traceback

        os.write(2, traceback.format_exc().encode("utf-8", "replace"))
        return 1
