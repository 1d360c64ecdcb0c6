"""Inside the sandbox: main.py run in a fork of the run's PID 1 rather than a fresh interpreter.

`isolation._exec_program` calls `run_main_here` in place of `execve(python -I -S -B main.py ...)` for a
`run_tests` harness whose program runs in an interpreter of its own (`cfg["fork_main"]`): the flags
are this interpreter's own (the bootstrap and the zygote start with `-I -S -B`), and everything else a
fresh interpreter would differ in is made the same here. Stdlib only, like `mounts` and `isolation`:
the suite hands its code to the sandbox with theirs (`spawn.boot_code`), this one before `isolation`.
"""

from __future__ import annotations

import os
import sys


def run_main_here(py: str, argv: list, env: dict) -> None:
    """Run main.py in this interpreter, a fork of the run's PID 1, as `python -I -S -B main.py` would
    in a fresh one (the flags are this interpreter's own: the bootstrap and the zygote start with
    them), then exit with the status that would: no interpreter start-up per run (~10 ms of CPU).

    Only for a harness whose untrusted code runs in interpreters of its own (`cfg["fork_main"]`,
    `process.run_python(fork_main=True)`): this process holds what PID 1 loaded (ctypes among it,
    which `_ctypes`'s removal cannot take back from a loaded module), and so do the interpreters it
    forks; each holds only its own memory and none of the run's secrets, which arrive after the fork.
    What it must not keep: any descriptor beyond stdin, stdout and stderr (the status fd above all),
    the bootstrap's environment, arguments, `__main__` and stdio objects."""
    import gc
    import io

    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        raw.name = f"<{name}>"
        buf = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        # as the interpreter makes them: its encoding and errors, "\n" lines, stderr always line-buffered
        text = io.TextIOWrapper(buf, encoding=old.encoding, errors=old.errors, newline="\n", line_buffering=fd == 2 or raw.isatty())
        setattr(sys, name, text)
        setattr(sys, f"__{name}__", text)
    os.closerange(3, 1 << 16)
    os.environ.clear()
    os.environ.update(env)
    sys.argv, sys.orig_argv = list(argv), [py, "-I", "-S", "-B", *argv]
    main = type(sys)("__main__")
    path = os.path.join(os.getcwd(), argv[0])  # the interpreter makes the script's path absolute
    main.__dict__.update({"__file__": path, "__cached__": None, "__annotations__": {}, "__builtins__": sys.modules["builtins"]})
    sys.modules["__main__"] = main
    gc.enable()  # as in a fresh interpreter (the zygote's children start with it off)
    # main.py's code runs under this stack's frames, not at the bottom: the same depth left to recurse
    depth, frame = 2, sys._getframe().f_back  # this frame and the call of `exec`, then each one below
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(sys.getrecursionlimit() + depth)
    code = 0
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except BaseException as exc:  # noqa: BLE001 - as the interpreter ends on an uncaught exception
        tb = exc.__traceback__
        exc.__traceback__ = tb.tb_next if tb is not None else None  # main.py's frames, not this one
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    os._exit(_finalize(code))


def _exit_status(code) -> int:
    """The exit status `sys.exit(code)` gives the interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _finalize(code: int) -> int:
    """What the interpreter's exit does that a harness may rely on: wait for its threads, run the atexit
    callbacks, flush stdout (120 if it cannot, as the interpreter) and stderr."""
    if "threading" in sys.modules:
        try:
            sys.modules["threading"]._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            code = 120 if stream is sys.stdout and code == 0 else code
    return code
