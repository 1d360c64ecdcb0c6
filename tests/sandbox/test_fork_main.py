"""A `run_tests` harness starts as a fork of the run's PID 1 (`fork_main.run_main_here`), not a fresh
interpreter: it must run main.py as `python -I -S -B main.py` would, and hold nothing of PID 1 that
a fresh interpreter would not have (no descriptor beyond stdio, no bootstrap names in `__main__`).
Where the program shares the harness's interpreter (`isolation: shared`) it is always a fresh one."""

from __future__ import annotations

import json

import pytest

from evalsuite import sandbox
from evalsuite.sandbox.mode import Limits, plan_run
from evalsuite.scoring.code import LIMITS

#: main.py programs whose run must look the same forked or started fresh
PROGRAMS = {
    "exit status": "print('out')\nimport sys\nsys.exit(3)\n",
    "exit with a message": "import sys\nsys.exit('bye')\n",
    "exit(None)": "raise SystemExit\n",
    "uncaught exception": "def f():\n    raise ValueError('boom')\nprint('before', flush=True)\nf()\n",
    "atexit and a thread": (
        "import atexit, threading, time\natexit.register(lambda: print('at exit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\nprint('main')\n"
    ),
    "recursion depth": "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\nprint(f(0))\n",
    "unflushed stdout": "import sys\nsys.stdout.write('no newline, never flushed')\n",
    "what it sees": (
        "import json, os, sys\nimport __main__\n"
        "print(json.dumps({'file': __file__, 'name': __name__, 'argv0': sys.argv[0], 'argc': len(sys.argv), 'env': dict(os.environ),\n"
        "  'flags': str(sys.flags), 'path': sys.path, 'main': sorted(vars(__main__)), 'cwd': os.getcwd(),\n"
        "  'stdio': [(s.name, s.encoding, s.errors, s.line_buffering) for s in (sys.stdin, sys.stdout, sys.stderr)],\n"
        "  'same': [sys.stdin is sys.__stdin__, sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__],\n"
        "  'input': sys.stdin.read()}))\n"
    ),
}


def _run(code: str, fork: bool, stdin: bytes = b"") -> sandbox.SandboxResult:
    return sandbox.run_python(code, harness=True, fork_main=fork, stdin=stdin, **LIMITS)


@pytest.mark.parametrize("via", ["zygote", "unshare"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_forked_main_runs_as_a_fresh_interpreter_would(monkeypatch, name, via):
    """Through the zygote (PID 1 a fork of it) and through `unshare` (PID 1 the bootstrap's interpreter)."""
    monkeypatch.setattr(sandbox.process, "USE_ZYGOTE", via == "zygote")
    fresh, forked = _run(PROGRAMS[name], False, b"line 1\nline 2\n"), _run(PROGRAMS[name], True, b"line 1\nline 2\n")
    seen = [(r.status, r.returncode, r.stdout, r.stderr) for r in (fresh, forked)]
    assert seen[0] == seen[1]
    if name == "what it sees":
        got = json.loads(forked.stdout)
        assert got["main"] == sorted(["__annotations__", "__builtins__", "__cached__", "__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__", "__main__", "json", "os", "sys"])
        assert got["input"] == "line 1\nline 2\n" and got["argc"] == 4  # main.py and the run's three uids
    if name == "uncaught exception":
        assert forked.stderr.startswith("Traceback") and "isolation" not in forked.stderr  # none of the bootstrap's frames


def test_a_forked_main_holds_no_descriptor_but_stdio():
    """PID 1's status descriptor above all: a program that held it could write the run's status line."""
    code = "import os\nopen_fds = []\nfor fd in range(3, 1024):\n    try:\n        os.fstat(fd)\n        open_fds.append(fd)\n    except OSError:\n        pass\nprint(open_fds)\n"
    for fork in (False, True):
        res = _run(code, fork)
        assert (res.status, res.stdout.strip()) == ("passed", "[]"), (fork, res.stderr)


PROBE = "import sys\ndef loaded():\n    return 'ctypes' in sys.modules\ndef importable():\n    try:\n        import ctypes\n        return True\n    except ImportError:\n        return False\n"


@pytest.mark.parametrize(
    "isolation,fork_main,forked",
    [("process", True, True), ("tests", True, True), ("process", False, False), ("shared", True, False)],
)
def test_which_runs_fork_and_shared_never_does(monkeypatch, isolation, fork_main, forked):
    """A forked harness, and the interpreters it forks, hold PID 1's ctypes (the program's interpreter
    holds only its own memory: docs/security.md); a shared run keeps `_ctypes` out of reach (L5)."""
    monkeypatch.setattr(sandbox.process, "FORK_MAIN", fork_main)
    tests = f"assert loaded() is {forked}\nassert importable() is {forked}\n"
    if isolation == "tests":
        tests = "def test_probe():\n    " + tests.replace("\n", "\n    ")
    res = sandbox.run_tests(PROBE, tests, "loaded", isolation=isolation, **LIMITS)
    assert res.status == "passed", (res.reason, res.stderr[-800:])


@pytest.mark.parametrize("program,status", [("def add(a, b):\n    return a + b\n", "passed"), ("def add(a, b):\n    return a - b\n", "failed")])
def test_the_same_verdict_forked_or_fresh(monkeypatch, program, status):
    got = []
    for fork_main in (True, False):
        monkeypatch.setattr(sandbox.process, "FORK_MAIN", fork_main)
        res = sandbox.run_tests(program, "assert add(2, 3) == 5\nassert add(0, 0) == 0\n", "add", **LIMITS)
        got.append((res.status, res.tests_run, res.reason))
    assert got[0] == got[1] and got[0][0] == status


def test_fork_main_is_for_a_harness_only():
    with pytest.raises(ValueError, match="harness"):
        plan_run(Limits(**LIMITS), fork_main=True)
