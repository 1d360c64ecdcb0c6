"""Inside the sandbox: the run's own file system, in its private mount namespace.

A private tmpfs over `/tmp` (the host's is hidden) with the working directory `/tmp/work` a tmpfs of
its own (noexec, size-limited), every other mount bind-remounted read-only, the interpreter's prefix
made reachable where an ancestor hides it (pyenv under /root), and `_ctypes` and `/proc` taken away
(see the package docstring).

Stdlib only, like `isolation`, whose bootstrap and zygote use it: the suite hands both modules' code
to the sandbox as code objects run in one namespace, this one first (`spawn.boot_code`), so
`isolation` finds these names there; the suite itself imports them from here.
"""

from __future__ import annotations

import os
import sys

WORK = "/tmp/work"  #: the program's working directory inside the sandbox

# linux/mount.h
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MOUNT_OPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


def load_libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def mount(libc, ctypes, src, target, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo (decoded here without `re`: start-up cost)."""
    parts = path.split("\\")
    out = [parts[0]]
    for part in parts[1:]:
        code = part[:3]
        if len(code) == 3 and all(ch in "01234567" for ch in code):
            out.append(chr(int(code, 8)) + part[3:])
        else:
            out.append("\\" + part)
    return "".join(out)


def isolate_fs(cfg: dict, warnings: list) -> None:
    """A private tmpfs on /tmp (only /tmp/work writable), everything else read-only (our mount namespace only)."""
    ctypes, libc = load_libc()
    mount(libc, ctypes, None, "/", None, MS_REC | MS_PRIVATE)
    size_mb = max(4, int(cfg["max_file_mb"]) * 2)
    mount(libc, ctypes, "evalsuite-sandbox", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=64,mode=755")
    try:
        _expose_prefix(cfg["prefix"], warnings)
    except OSError as exc:
        warnings.append(f"interpreter prefix not exposed: {exc}")
    # the working directory is its own tmpfs so /tmp itself can be read-only, even for a uid-0 program
    os.mkdir(WORK, 0o700)
    # noexec: nothing the program writes can be executed or mapped executable (a compiled helper, an extension module)
    mount(libc, ctypes, "evalsuite-work", WORK, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={size_mb}m,nr_inodes=4096,mode=700")
    mount(libc, ctypes, None, "/tmp", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split() for line in fh]
    failed = []
    for parts in mounts:
        target = unescape(parts[4])
        opts = parts[5].split(",")
        if target in ("/tmp", "/proc") or target.startswith(("/tmp/", "/proc/")):
            continue
        if "ro" in opts:
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for o in opts:
            flags |= _MOUNT_OPT_FLAGS.get(o, 0)
        try:
            mount(libc, ctypes, None, target, None, flags)
        except OSError:
            failed.append(target)
    # mounts shadowed by later mounts on the same path fail harmlessly; the visible ones must not
    visible_rw = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            parts = line.split()
            target = unescape(parts[4])
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
            mount(libc, ctypes, "/dev/null", path, None, MS_BIND)
            mount(libc, ctypes, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        warnings.append(f"ctypes stays importable: {exc}")
    try:
        mount(libc, ctypes, "evalsuite-noproc", "/proc", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4,mode=555")
    except OSError as exc:
        warnings.append(f"/proc stays visible (/proc/self/mem writable): {exc}")


def blocking_ancestor(path: str) -> str | None:
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
    blocker = blocking_ancestor(prefix)
    if blocker is None:
        return
    if not prefix.startswith(blocker + "/"):
        warnings.append(f"interpreter prefix {prefix} is not readable by other users")
        return
    ctypes, libc = load_libc()
    stage = "/tmp/.evalsuite-python"
    os.mkdir(stage, 0o755)
    mount(libc, ctypes, prefix, stage, None, MS_BIND | MS_REC)
    mount(libc, ctypes, "evalsuite-hide", blocker, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=256,mode=755")
    cur = blocker
    for part in prefix[len(blocker) + 1 :].split("/"):
        cur = os.path.join(cur, part)
        os.mkdir(cur)
        os.chmod(cur, 0o755)
    mount(libc, ctypes, stage, prefix, None, MS_BIND | MS_REC)
    libc.umount2(stage.encode(), 2)  # MNT_DETACH
    os.rmdir(stage)
