"""The sandbox: hostile programs end as failures within their limits and leave nothing behind."""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

import psutil
import pytest

from evalsuite import sandbox

REPO = Path(__file__).resolve().parents[1]
FULL = sandbox.mode.machine_mode(False).namespaces  # namespaces available: outside writes fail instead of being hidden


def _leftovers(res: sandbox.SandboxResult) -> list[psutil.Process]:
    """Processes of the sandbox uid, and children of this test process, still alive (the sandbox's
    zygote is a long-lived helper, not part of a run: it is skipped, its children, the runs, are not)."""
    out = [p for p in psutil.Process().children(recursive=True) if p.pid not in sandbox.helper_pids()]
    if res.uid is not None:
        assert res.uid in res.uids
        for p in psutil.process_iter(["uids"]):
            try:
                if p.info["uids"] and p.info["uids"].real in res.uids:
                    out.append(p)
            except psutil.Error:
                pass
    return [p for p in out if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _assert_clean(res: sandbox.SandboxResult) -> None:
    assert res.workdir and not os.path.exists(res.workdir), "the temp dir must be deleted"
    assert _leftovers(res) == []


ESCAPE = f"/tmp/evalsuite-escape-{secrets.token_hex(6)}"
REPO_ESCAPE = str(REPO / f"evalsuite-escape-{secrets.token_hex(6)}")

LOAD_MARGIN_S = 20.0  # a shared, loaded CI machine; a run the limits did not stop takes far longer

# (name, code, limits, status, reason fragment, max seconds on an idle machine)
HOSTILE = [
    ("infinite loop (wall)", "while True:\n    pass\n", {"timeout_s": 1.5, "cpu_s": 30}, "timeout", "wall timeout", 4.0),
    ("infinite loop (cpu)", "while True:\n    pass\n", {"timeout_s": 60, "cpu_s": 1}, "timeout", "cpu limit", 4.0),
    ("unbounded allocation", "xs = []\nwhile True:\n    xs.append(bytearray(10**7))\n", {"memory_mb": 200}, "failed", "MemoryError", 4.0),
    ("huge allocation", "x = bytearray(4 * 1024**3)\n", {"memory_mb": 200}, "failed", "MemoryError", 4.0),
    (
        "fork bomb",
        "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(60)\n",
        {"max_procs": 8},
        "failed",
        "exit 1",
        4.0,
    ),
    (
        "daemonised child outlives the program",
        "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nsys.exit(3)\n",
        {},
        "failed",
        "exit 3",
        4.0,
    ),
    ("write outside: host /tmp", f"open({ESCAPE!r}, 'w').write('escaped')\n", {}, "failed", "exit 1", 4.0),
    ("write outside: repository", f"open({REPO_ESCAPE!r}, 'w').write('escaped')\n", {}, "failed", "exit 1", 4.0),
    ("file size limit", "open('big', 'wb').write(b'x' * (4 * 1024**2))\n", {"max_file_mb": 1}, "failed", "file size limit", 4.0),
    ("stdout flood", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", {"max_file_mb": 1}, "failed", "file size limit", 4.0),
]


@pytest.mark.parametrize("name,code,limits,status,reason,max_s", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_programs_fail_within_limits(name, code, limits, status, reason, max_s):
    if name.startswith("write outside") and not FULL:
        pytest.skip("no mount namespace here: outside writes are only stopped by file permissions")
    t0 = time.monotonic()
    res = sandbox.run_python(code, **limits)
    elapsed = time.monotonic() - t0
    assert (res.status, reason in res.reason) == (status, True), (res.reason, res.stderr[-500:])
    assert elapsed < max_s + LOAD_MARGIN_S
    _assert_clean(res)
    assert not os.path.exists(ESCAPE)
    assert not os.path.exists(REPO_ESCAPE)


def test_network_connect_fails():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.3)
    port = srv.getsockname()[1]
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'escaped')\n"
    try:
        res = sandbox.run_python(code)
        assert (res.status, res.returncode) == ("failed", 1)
        assert "OSError" in res.stderr or "Error" in res.stderr.splitlines()[-1]
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        srv.close()
    _assert_clean(res)


def test_network_can_be_allowed():
    res = sandbox.run_python("import socket\nsocket.socket().close()\nprint('ok')\n", network=True)
    assert (res.status, res.stdout) == ("passed", "ok\n")


# (name, program, tests, status, reason fragment, tests run)
VERDICTS = [
    ("correct", "def add(a, b):\n    return a + b\n", "assert add(1, 2) == 3\n", "passed", "", 1),
    ("wrong", "def add(a, b):\n    return a - b\n", "assert add(1, 2) == 3\n", "failed", "exit 1", None),
    ("os._exit(0) before the asserts", "import os\ndef add(a, b):\n    return 0\nos._exit(0)\n", "assert add(1, 2) == 3\n", "failed", "before the verdict", None),
    ("sys.exit(0) before the asserts", "import sys\ndef add(a, b):\n    return 0\nsys.exit(0)\n", "assert add(1, 2) == 3\n", "failed", "before the verdict", None),
    ("exit inside a test function", "def add(a, b):\n    return 0\n", "import os\ndef test_add():\n    os._exit(0)\n    assert add(1, 2) == 3\n", "failed", "before the verdict", None),
    ("prints a fake verdict", "print('EVALSUITE-VERDICT-' + '0' * 32 + ' 1')\nimport os\nos._exit(0)\n", "assert False\n", "failed", "before the verdict", None),
    ("test functions are called", "def add(a, b):\n    return a + b\n", "def test_a():\n    assert add(1, 1) == 2\ndef test_b():\n    assert add(2, 2) == 4\n", "passed", "", 2),
    ("a failing test function fails", "def add(a, b):\n    return a + b\n", "def test_a():\n    assert add(1, 1) == 3\n", "failed", "exit 1", None),
    ("check(candidate)", "def add(a, b):\n    return a + b\n", "def check(candidate):\n    assert candidate(2, 3) == 5\n", "passed", "", 1),
    (
        "pytest-style",
        "def add(a, b):\n    return a + b\n",
        "import pytest\n@pytest.mark.parametrize('a,b,c', [(1, 2, 3), (0, 0, 0)])\ndef test_add(a, b, c):\n    assert add(a, b) == c\n"
        "def test_raises():\n    with pytest.raises(TypeError):\n        add(1, 'x')\n",
        "passed",
        "",
        3,
    ),
    (
        "unittest",
        "def add(a, b):\n    return a + b\n",
        "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(1, 2), 4)\n",
        "failed",
        "exit 1",
        None,
    ),
    ("__main__ block is not run", "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    raise SystemExit(0)\n", "assert add(1, 2) == 3\n", "passed", "", 1),
]


@pytest.mark.parametrize("name,program,tests,status,reason,n", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_verdicts(name, program, tests, status, reason, n):
    res = sandbox.run_tests(program, tests, entry_point="add")
    assert (res.status, reason in res.reason, res.tests_run) == (status, True, n), (res.reason, res.stderr[-800:])
    assert res.verdict_seen is (status == "passed")
    _assert_clean(res)


def test_stdout_kept_and_verdict_removed():
    res = sandbox.run_tests("print('hello')\n", "print('from tests')\nassert True\n")
    assert (res.status, res.stdout) == ("passed", "hello\nfrom tests\n")


def test_environment_is_scrubbed_and_cwd_private():
    os.environ["EVALSUITE_SECRET_FOR_TEST"] = "leak"
    try:
        res = sandbox.run_python("import os\nprint(sorted(os.environ))\nprint(os.getcwd() == os.environ['HOME'])\n")
    finally:
        del os.environ["EVALSUITE_SECRET_FOR_TEST"]
    assert res.status == "passed"
    names = eval(res.stdout.splitlines()[0])  # noqa: S307 - our own output
    assert "EVALSUITE_SECRET_FOR_TEST" not in names
    assert set(names) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING", "LC_CTYPE"}
    assert res.stdout.splitlines()[1] == "True"


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs root")
def test_runs_as_unprivileged_uid():
    res = sandbox.run_python("import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n")
    assert res.status == "passed"
    assert res.stdout.split()[:2] == [str(res.uid), str(res.uid)]
    assert res.uid >= sandbox.mode.UID_RANGE[0]


def test_parallel_pool_keeps_order_and_caches():
    sandbox.clear_cache()
    jobs = [(f"def f():\n    return {i}\n", f"assert f() == {i if i != 2 else -1}\n", None) for i in range(4)]
    t0 = time.monotonic()
    results = sandbox.run_tests_many(jobs)
    assert [r.status for r in results] == ["passed", "passed", "failed", "passed"]
    again = sandbox.run_tests_many(jobs)
    assert [a is r for a, r in zip(again, results)] == [True] * 4  # served from the cache
    assert time.monotonic() - t0 < 10 + LOAD_MARGIN_S


def test_degraded_mode_warns_and_still_cleans_up(monkeypatch):
    """Without namespaces the run still works, says what is missing, and kills leftovers by uid."""
    mode = sandbox.mode.Mode((), False, False, os.geteuid() == 0, ("network NOT isolated", "no private /tmp"), "rlimits only")
    monkeypatch.setattr(sandbox.mode, "machine_mode", lambda network: mode)
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')\n"
    res = sandbox.run_python(code, timeout_s=5)
    assert (res.status, res.stdout, res.isolation.split("+")[0]) == ("passed", "parent done\n", "rlimits only")
    assert "network NOT isolated" in res.warnings
    time.sleep(0.2)
    _assert_clean(res)


# Issue 16: a run that executes no test is never a pass. Every test-file shape the case format allows,
# crossed with a correct program, a wrong one, one without the entry point and one that exits early.
SHAPES = {
    "plain asserts": ("assert add(1, 2) == 3\nassert add(0, 0) == 0\n", 1),
    "check(candidate), not called": ("def check(candidate):\n    assert candidate(1, 2) == 3\n", 1),
    "check(candidate), called": ("def check(candidate):\n    assert candidate(1, 2) == 3\n\ncheck(add)\n", 2),
    "unittest class": ("import unittest\nclass TestAdd(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(1, 2), 3)\n", 1),
    "pytest functions": (
        "import pytest\n@pytest.mark.parametrize('a,b,c', [(1, 2, 3), (0, 0, 0)])\ndef test_add(a, b, c):\n    assert add(a, b) == c\n",
        2,
    ),
    "pytest class": ("class TestAdd:\n    def test_a(self):\n        assert add(1, 2) == 3\n", 1),
}
PROGRAMS = {
    "correct": ("def add(a, b):\n    return a + b\n", "passed", ""),
    "wrong": ("def add(a, b):\n    return a - b\n", "failed", "exit 1"),
    "no entry point": ("def plus(a, b):\n    return a + b\n", "failed", "entry point 'add' not defined"),
    "exits early": ("import sys\ndef add(a, b):\n    return a + b\nsys.exit(0)\n", "failed", "exited before the verdict"),
}
GRID = [(s, p) for s in SHAPES for p in PROGRAMS]

# (name, program, tests, entry point): assertion-free or never-called tests
NO_TEST = [
    ("the issue's example", "x = 1\n", "def check(candidate): assert candidate(2) == 4\n", "solution", "entry point 'solution' not defined"),
    ("check without an entry point to call it with", "def add(a, b):\n    return a + b\n", "def check(candidate):\n    assert candidate(1, 2) == 3\n", None, "no test ran"),
    ("prints only", "def add(a, b):\n    return a + b\n", "print(add(1, 2))\n", "add", "no test ran"),
    ("test function without assert", "def add(a, b):\n    return a + b\n", "def test_a():\n    add(1, 2)\n", "add", "no test ran"),
    ("check without assert", "def add(a, b):\n    return a + b\n", "def check(candidate):\n    candidate(1, 2)\n", "add", "no test ran"),
    ("assert in a helper never called", "def add(a, b):\n    return a + b\n", "def helper():\n    assert add(1, 2) == 3\n", "add", "no test ran"),
    ("unittest without assertion", "def add(a, b):\n    return a + b\n", "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        add(1, 2)\n", "add", "no test ran"),
    ("empty tests", "def add(a, b):\n    return a + b\n", "", "add", "no test ran"),
]


@pytest.fixture(scope="module")
def grid_results():
    """All runs of the grid and the no-test table, pooled (run_tests_many) to keep the suite fast."""
    jobs = [(PROGRAMS[p][0], SHAPES[s][0], "add") for s, p in GRID] + [(prog, tests, ep) for _, prog, tests, ep, _ in NO_TEST]
    results = sandbox.run_tests_many(jobs, timeout_s=10)
    return dict(zip([*GRID, *(n[0] for n in NO_TEST)], results))


@pytest.mark.parametrize("shape,program", GRID, ids=[f"{s} x {p}" for s, p in GRID])
def test_shapes_crossed_with_programs(grid_results, shape, program):
    res = grid_results[(shape, program)]
    _, status, reason = PROGRAMS[program]
    want_run = SHAPES[shape][1] if status == "passed" else None
    assert (res.status, reason in res.reason, res.tests_run) == (status, True, want_run), (res.reason, res.stderr[-800:])
    assert res.passed is res.verdict_seen


@pytest.mark.parametrize("name,program,tests,entry_point,reason", NO_TEST, ids=[n[0] for n in NO_TEST])
def test_a_run_without_tests_is_a_failure(grid_results, name, program, tests, entry_point, reason):
    res = grid_results[name]
    assert (res.status, res.reason, res.passed) == ("failed", reason, False), res.stderr[-800:]


# Programs that try to make wrong answers pass by tampering with the comparison or the harness.
FORGERIES = [
    ("__eq__ always true", "class A:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return A()\n"),
    ("__eq__ always true, nested", "class A:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\ndef add(a, b):\n    return [A()]\n"),
    ("int subclass comparing with >=", "class A(int):\n    __eq__ = int.__ge__\ndef add(a, b):\n    return A(10**9)\n"),
    ("__ne__ always false", "class A:\n    def __ne__(self, other):\n        return False\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return A()\n"),
    ("patched unittest assertEqual", "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\ndef add(a, b):\n    return 0\n"),
    ("patched unittest reporting", "import unittest.case\nunittest.case._addError = lambda *a, **k: None\nunittest.TestResult.wasSuccessful = lambda self: True\ndef add(a, b):\n    return 0\n"),
    ("patched builtins.abs", "import builtins\nbuiltins.abs = lambda x: 0\ndef add(a, b):\n    return 0\n"),
    ("global shadowing abs", "def abs(x):\n    return 0\ndef add(a, b):\n    return 0\n"),
    ("patches at call time", "def add(a, b):\n    import builtins, unittest\n    builtins.abs = lambda x: 0\n    unittest.TestCase.assertEqual = lambda *a, **k: None\n    return 0\n"),
]
FORGED_TESTS = {
    "assert": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert not (candidate(1, 2) != 3)\n",
    "nested": "assert [add(1, 2)] == [3]\nassert add(1, 2) in [3, 4]\n",
    "unittest": "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(0, 0), 0)\n    def test_b(self):\n        self.assertEqual(add(1, 2), 3)\n",
    "abs": "def test_close():\n    assert abs(add(1, 2) - 3) < 1e-9\n",
}


@pytest.fixture(scope="module")
def forged_results():
    keys = [(name, t) for name, _ in FORGERIES for t in FORGED_TESTS]
    programs = dict(FORGERIES)
    results = sandbox.run_tests_many([(programs[n], FORGED_TESTS[t], "add") for n, t in keys], timeout_s=10)
    return dict(zip(keys, results))


@pytest.mark.parametrize("tests", list(FORGED_TESTS), ids=list(FORGED_TESTS))
@pytest.mark.parametrize("name,program", FORGERIES, ids=[f[0] for f in FORGERIES])
def test_forged_passes_fail(forged_results, name, program, tests):
    res = forged_results[(name, tests)]
    assert res.status == "failed", (res.reason, res.stdout[-300:], res.stderr[-800:])


def test_comparisons_keep_their_meaning_for_honest_values():
    """The equality guard changes nothing for plain values, stdlib types and the program's own classes."""
    program = (
        "from fractions import Fraction\nfrom collections import OrderedDict, namedtuple\nfrom dataclasses import dataclass\n"
        "P = namedtuple('P', 'x y')\n@dataclass\nclass D:\n    v: int\n"
        "def add(a, b):\n    return a + b\n"
    )
    tests = (
        "import math\nassert Fraction(1, 2) == 0.5\nassert OrderedDict(a=1) == {'a': 1}\nassert P(1, 2) == (1, 2)\n"
        "assert D(1) == D(1) and D(1) != D(2)\nassert add(1, 2) != 4\nassert math.nan != math.nan\nassert math.nan in [math.nan] or True\n"
        "assert [1, (2, {'k': {3}})] == [1, (2, {'k': {3}})]\nassert 3 in {3: 'x'} and 5 not in [1, 2]\nassert True == 1\n"
    )
    # the tests use the program's own classes (D, P): a case like this declares `isolation: shared`
    res = sandbox.run_tests(program, tests, "add", isolation="shared")
    assert (res.status, res.tests_run) == ("passed", 1), res.stderr[-800:]


def test_tests_keep_unittest_mock_subtests_and_fixtures():
    """Undoing the program's patches must not undo what the tests themselves set up."""
    program = "import json\ndef load(s):\n    return json.loads(s)\n"
    tests = (
        "import unittest.mock\n"
        "def test_patch():\n    with unittest.mock.patch('json.loads', return_value=3):\n        assert load('x') == 3\n"
        "def test_mock_again():\n    assert unittest.mock.MagicMock()() is not None\n"
        "class T(unittest.TestCase):\n"
        "    @classmethod\n    def setUpClass(cls):\n        cls.data = '[1]'\n"
        "    def setUp(self):\n        self.extra = 2\n"
        "    def test_sub(self):\n        for i in range(2):\n            with self.subTest(i=i):\n                self.assertEqual(load(self.data) + [self.extra], [1, 2])\n"
        "    @unittest.skip('not today')\n    def test_skipped(self):\n        assert False\n"
    )
    # the tests patch the program's json module: a case like this declares `isolation: shared`
    res = sandbox.run_tests(program, tests, "load", isolation="shared")
    assert (res.status, res.tests_run) == ("passed", 3), res.stderr[-800:]


# Speed work (issue 13): the zygote, the precompiled harness and the pool must not change what a run is.

ZYGOTE = FULL and os.geteuid() == 0  # where runs go through the zygote (root, mount+PID namespaces)
ADD_TESTS = "assert add(1, 2) == 3\nassert add(0, 0) == 0\n"
GOOD = "def add(a, b):\n    return a + b\n"


def _neighbours_jobs() -> list[tuple[str, str, str | None, str, str]]:
    """(program, tests, entry point, expected status, reason fragment): hostile jobs between good ones."""
    return [
        (GOOD, ADD_TESTS, "add", "passed", ""),
        ("while True:\n    pass\n", ADD_TESTS, "add", "timeout", "timeout"),
        (GOOD, ADD_TESTS, "add", "passed", ""),
        ("import os\nos.kill(os.getpid(), 11)\n", ADD_TESTS, "add", "failed", "signal SIGSEGV"),
        ("import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(60)\n", ADD_TESTS, "add", "failed", "exit 1"),
        ("def add(a, b):\n    return a - b\n", ADD_TESTS, "add", "failed", "exit 1"),
        ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nimport os\nos._exit(0)\n", ADD_TESTS, "add", "failed", "exited before the verdict"),
        ("xs = []\nwhile True:\n    xs.append(bytearray(10**7))\n", ADD_TESTS, "add", "failed", "MemoryError"),
        (GOOD + "open('/tmp/work/planted.py', 'w').write('x')\n", ADD_TESTS, "add", "passed", ""),
        (GOOD + "import os\nassert not os.path.exists('/tmp/work/planted.py')\n", ADD_TESTS, "add", "passed", ""),
        (GOOD, ADD_TESTS, "add", "passed", ""),
    ]


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "unshare"])
def test_a_sample_never_affects_its_neighbours(monkeypatch, zygote):
    """Timeouts, crashes, fork bombs, daemons, memory hogs and planted files among good samples in one
    run_tests_many call: every job keeps its own verdict, through the zygote and through `unshare`."""
    monkeypatch.setattr(sandbox.process, "USE_ZYGOTE", zygote)
    # a comment makes every job distinct: none is served from the cache, each is a run of its own
    jobs = [(f"# job {i} {zygote}\n" + p, t, e, st, why) for i, (p, t, e, st, why) in enumerate(_neighbours_jobs())]
    results = sandbox.run_tests_many([(p, t, e) for p, t, e, _, _ in jobs], timeout_s=3, cpu_s=30, memory_mb=200, max_procs=8)
    got = [(r.status, reason in r.reason) for r, (_, _, _, _, reason) in zip(results, jobs)]
    assert got == [(status, True) for _, _, _, status, _ in jobs], [(r.status, r.reason) for r in results]
    assert len({r.uid for r in results}) == len(results)  # a fresh uid each
    for r in results:
        assert not os.path.exists(r.workdir)
    leftovers = [p for r in results for p in _leftovers(r)]
    for _ in range(50):  # SIGKILL was sent; give the kernel a moment to finish the exits
        if not leftovers:
            break
        time.sleep(0.1)
        leftovers = [p for r in results for p in _leftovers(r)]
    assert leftovers == []


@pytest.mark.skipif(not ZYGOTE, reason="runs go through the zygote only as root with namespaces")
def test_a_zygote_run_is_a_fresh_isolated_interpreter():
    """What the program sees through the zygote is what `unshare` gave it: PID 2 under our PID 1, an
    empty /proc, no ctypes, its own uid, a fresh /tmp/work, no network, its limits."""
    probe = (
        "import os, sys, resource, socket\n"
        "try:\n    import ctypes\n    ct = 'importable'\nexcept ImportError:\n    ct = 'gone'\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n    net = 'open'\nexcept OSError:\n    net = 'closed'\n"
        "print(os.getpid(), os.getppid(), os.listdir('/proc'), sorted(os.listdir('.')), ct, net, os.getuid(),\n"
        "      resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_NPROC)[0], 'ctypes' in sys.modules)\n"
    )
    first, second = sandbox.run_python(probe, memory_mb=300, max_procs=7), sandbox.run_python(probe, memory_mb=300, max_procs=7)
    for res in (first, second):
        assert res.status == "passed", (res.reason, res.stderr)
        assert res.stdout.split() == ["2", "1", "[]", "['main.py']", "gone", "closed", str(res.uid), "300", "7", "False"]
        assert sandbox.helper_pids()  # it did go through the zygote
    assert first.uid != second.uid and first.pgid != second.pgid


@pytest.mark.skipif(not ZYGOTE, reason="runs go through the zygote only as root with namespaces")
def test_a_dead_zygote_is_replaced():
    assert sandbox.run_tests(GOOD, ADD_TESTS, "add").status == "passed"
    (old,) = sandbox.helper_pids()
    os.kill(old, 9)
    psutil.Process(old).wait(timeout=10)
    res = sandbox.run_tests(GOOD, ADD_TESTS, "add")
    assert res.status == "passed", res.reason
    assert sandbox.helper_pids() and old not in sandbox.helper_pids()


@pytest.mark.parametrize("program,status", [(GOOD, "passed"), ("def add(a, b):\n    return 0\n", "failed")])
def test_harness_falls_back_to_its_source_on_another_interpreter_version(program, status):
    """The compiled harness and tests are only used by the interpreter version that compiled them;
    another one compiles the harness's source and instruments the tests itself, to the same verdict."""
    import sys

    h = sandbox.build_harness(program, ADD_TESTS, "add")
    assert h.count(f"sys.hexversion == {sys.hexversion}") == 1 and h.count(f"'version': {sys.hexversion},") == 1
    other = h.replace(f"sys.hexversion == {sys.hexversion}", "sys.hexversion == 0").replace(f"'version': {sys.hexversion},", "'version': 0,")
    token = "EVALSUITE-VERDICT-" + secrets.token_hex(8)
    res = sandbox.run_python(other, verdict_token=token, stdin=(token + "\n").encode())
    assert (res.status, res.tests_run if status == "passed" else None) == (status, 1 if status == "passed" else None), res.stderr[-800:]
    if status == "failed":
        assert "<evalsuite-harness>" in res.stderr  # the traceback names the harness, not 60 KB of literals


@pytest.mark.parametrize(
    "raw,path",
    [("/plain", "/plain"), ("/a\\040b", "/a b"), ("/x\\134y\\011z", "/x\\y\tz"), ("/n\\012", "/n\n"), ("/odd\\9z", "/odd\\9z"), ("/end\\04", "/end\\04")],
)
def test_mountinfo_paths_are_unescaped(raw, path):
    from evalsuite.sandbox import mounts

    assert mounts.unescape(raw) == path


@pytest.mark.skipif(not ZYGOTE, reason="runs go through the zygote only as root with namespaces")
def test_a_zygote_that_cannot_set_up_namespaces_hands_over_to_unshare(monkeypatch):
    """If the zygote's child cannot unshare (here: an invalid flag), the program has not run: the run
    is retried through `unshare`, passes, and later runs skip the zygote."""
    monkeypatch.setitem(sandbox.zygote.zygote_state, "broken", None)
    flags = sandbox.zygote.unshare_flags
    monkeypatch.setattr(sandbox.zygote, "unshare_flags", lambda plan: flags(plan) | 0x00000001)  # not a namespace flag: EINVAL
    res = sandbox.run_tests("# handed over\n" + GOOD, ADD_TESTS, "add")
    assert (res.status, res.tests_run) == ("passed", 1), (res.reason, res.stderr[-500:])
    assert "zygote: OSError" in sandbox.zygote.zygote_state["broken"]
    assert sandbox.process.zygote_for(sandbox.process.plan_run(sandbox.Limits())) is None


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "unshare"])
def test_stdin_the_program_never_reads_cannot_hold_up_the_wall_timeout(monkeypatch, zygote):
    """More stdin than a pipe holds, to a program that never reads it: the wall timeout still ends
    the run (stdin was written with a blocking write before the wait began, so the run ended only when
    the program did, as a pass); a program that reads it gets all of it."""
    monkeypatch.setattr(sandbox.process, "USE_ZYGOTE", zygote)
    data = b"x" * (4 << 20)
    res = sandbox.run_python("import time\ntime.sleep(20)\n", stdin=data, timeout_s=1.5, cpu_s=30)
    assert (res.status, res.reason) == ("timeout", "wall timeout (1.5 s)"), (res.status, res.reason)
    res = sandbox.run_python("import sys\nprint(len(sys.stdin.buffer.read()))\n", stdin=data, timeout_s=30)
    assert (res.status, res.stdout) == ("passed", f"{len(data)}\n"), (res.reason, res.stderr[-500:])


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "unshare"])
def test_a_bootstrap_that_fails_says_why(monkeypatch, zygote):
    """An exception in the bootstrap (here: a uid chown rejects) is an error whose reason shows the
    traceback, through the zygote as through `unshare` (the zygote's child used to exit silently:
    the reason was "sandbox bootstrap ended with None: " and nothing else)."""
    import dataclasses

    monkeypatch.setattr(sandbox.process, "USE_ZYGOTE", zygote)
    plan = sandbox.process.plan_run
    monkeypatch.setattr(sandbox.process, "plan_run", lambda lim, **kw: dataclasses.replace(plan(lim, **kw), uid=2**40))
    res = sandbox.run_python("print('never runs')\n")
    # the traceback names the bootstrap function (its source lines show only where the checkout is visible in the sandbox: not under /tmp)
    assert res.status == "error" and "OverflowError" in res.reason and "in _boot" in res.reason, res.reason
    assert "never runs" not in res.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs programs as a uid of their own, killed by uid")
def test_degraded_mode_kills_daemons_left_at_the_wall_timeout(monkeypatch):
    """Without a PID namespace, a wall timeout kills the process group and then every process of the
    run's uid, with an interpreter that uid can reach (the suite's own may be under /root, as pyenv's
    is: the kill then failed to start and a `setsid` daemon outlived the run)."""
    mode = sandbox.mode.Mode((), False, False, True, ("network NOT isolated", "no private /tmp"), "rlimits only")
    monkeypatch.setattr(sandbox.mode, "machine_mode", lambda network: mode)
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ntime.sleep(60)\n"
    res = sandbox.run_python(code, timeout_s=2, cpu_s=30)
    assert (res.status, res.reason) == ("timeout", "wall timeout (2 s)")
    leftovers = _leftovers(res)
    for _ in range(50):  # SIGKILL was sent; give the kernel a moment to finish the exits
        if not leftovers:
            break
        time.sleep(0.1)
        leftovers = _leftovers(res)
    for p in leftovers:  # do not leave them to the rest of the session
        p.kill()
    assert leftovers == []


def test_runs_in_flight_never_share_a_uid(monkeypatch):
    """Each root run draws a random uid; one still held by a run in flight is drawn again, and a
    finished run's uid is free for the next."""
    from evalsuite.sandbox import mode

    draws = iter([5, 5, 5, 7, 5])
    monkeypatch.setattr(mode.secrets, "randbelow", lambda n: next(draws))
    uids = mode.Uids()
    first = uids.claim()
    second = uids.claim()  # draws 5 twice (held), then 7
    # in blocks of four: the harness's, the program's and the tests' uids (issue 40)
    assert first == mode.UID_RANGE[0] + 4 * 5 and second == mode.UID_RANGE[0] + 4 * 7
    uids.release(first)
    assert uids.claim() == first  # free again
    assert uids.in_use == {first, second}


@pytest.mark.skipif(not ZYGOTE, reason="runs go through the zygote only as root with namespaces")
def test_a_zygote_run_that_breaks_while_waited_for_is_killed_before_the_unshare_retry(monkeypatch):
    """An error while waiting on a zygote run sends the run to `unshare`; the zygote's run is killed
    first (it used to be left running, so the program ran twice at once)."""
    monkeypatch.setitem(sandbox.zygote.zygote_state, "broken", None)
    killed, real_read = [], sandbox.zygote.read_until_eof
    real_killpg = sandbox.zygote.killpg

    def broken_read(fd, timeout_s, stdin):
        monkeypatch.setattr(sandbox.zygote, "read_until_eof", real_read)  # once
        raise OSError("poll failed")

    monkeypatch.setattr(sandbox.zygote, "read_until_eof", broken_read)
    monkeypatch.setattr(sandbox.zygote, "killpg", lambda pgid: (killed.append(pgid), real_killpg(pgid)))
    res = sandbox.run_python("import time\ntime.sleep(0.2)\nprint('ran')\n", timeout_s=20)
    assert (res.status, res.stdout) == ("passed", "ran\n"), (res.reason, res.stderr[-500:])
    assert len(killed) == 1 and "OSError: poll failed" in sandbox.zygote.zygote_state["broken"]
    assert _gone_or_zombie(killed[0])  # the zygote's run is dead (the zygote reaps it in its own time)


def _gone_or_zombie(pid: int, wait_s: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


# Issue 33: the program in an interpreter of its own, the tests calling it over plain data.

ISOLATED = [
    # (name, program, tests, status, reason fragment)
    (
        "a builtin exception crosses by type",
        "def add(a, b):\n    raise ValueError('bad ' + str(a))\n",
        "import pytest\ndef test_a():\n    with pytest.raises(ValueError, match='bad 1'):\n        add(1, 2)\n",
        "passed",
        "",
    ),
    (
        "the program's own exception crosses by name",
        "class Invalid(Exception):\n    pass\ndef add(a, b):\n    raise Invalid('no')\n",
        "import pytest\ndef test_a():\n    with pytest.raises(Invalid):\n        add(1, 2)\n    try:\n        add(1, 2)\n    except Exception as e:\n"
        "        assert type(e).__name__ == 'Invalid' and str(e) == 'no'\n",
        "passed",
        "",
    ),
    (
        "module-level values and helpers the tests reference",
        "LIMIT = {'max': [1, 2]}\ndef helper(x):\n    return x * 2\ndef add(a, b):\n    return a + b\n",
        "assert LIMIT == {'max': [1, 2]} and helper(2) == 4 and add(1, 2) == 3\n",
        "passed",
        "",
    ),
    (
        "arguments changed in place come back",
        "def add(a, b):\n    a.append(b)\n    a[0]['k'].add(3)\n    return None\n",
        "xs = [{'k': {1}}]\nassert add(xs, 2) is None\nassert xs == [{'k': {1, 3}}, 2]\n",
        "passed",
        "",
    ),
    (
        "a program-defined object is a failure",
        "class Box:\n    pass\ndef add(a, b):\n    return Box()\n",
        "assert add(1, 2) is not None\n",
        "failed",
        "is not plain data",
    ),
    (
        "a subclass of a plain type is a failure",
        "class Three(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\ndef add(a, b):\n    return Three(0)\n",
        "assert add(1, 2) == 3\n",
        "failed",
        "is not plain data",
    ),
    (
        "a callable argument is the case's error, not the answer's failure",
        "def add(a, b):\n    return a() + b\n",
        "assert add(lambda: 1, 2) == 3\n",
        "error",
        "isolation: shared",
    ),
    (
        "the program's sys.exit in a call is an early exit",
        "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        "assert add(1, 2) == 3\n",
        "failed",
        "exited before the verdict",
    ),
    ("the program crashing in a call", "import os\ndef add(a, b):\n    os.kill(os.getpid(), 11)\n", "assert add(1, 2) == 3\n", "failed", "signal SIGSEGV"),
]


@pytest.mark.parametrize(("name", "program", "tests", "status", "reason"), ISOLATED, ids=[i[0] for i in ISOLATED])
def test_isolated_program_behaves_as_called_in_process(name, program, tests, status, reason):
    res = sandbox.run_tests(program, tests, "add")
    assert (res.status, reason in res.reason) == (status, True), (res.reason, res.stderr[-800:])


def test_isolated_program_output_keeps_its_order_with_the_tests():
    program = "print('loaded')\ndef add(a, b):\n    print('called', a)\n    return a + b\n"
    res = sandbox.run_tests(program, "print('before')\nassert add(1, 2) == 3\nprint('after')\n", "add")
    assert (res.status, res.stdout) == ("passed", "loaded\nbefore\ncalled 1\nafter\n"), res.stderr[-500:]


def test_shared_isolation_is_kept_and_names_itself():
    program = "class Box:\n    def __init__(self, v):\n        self.v = v\ndef make(v):\n    return Box(v)\n"
    tests = "assert make(3).v == 3 and isinstance(make(1), Box)\n"
    assert sandbox.run_tests(program, tests, "make").status == "failed"
    assert sandbox.run_tests(program, tests, "make", isolation="shared").status == "passed"
    with pytest.raises(ValueError, match="isolation 'none'"):
        sandbox.run_tests(program, tests, "make", isolation="none")


def test_a_reply_the_harness_cannot_hold_is_the_programs_failure():
    """A reply the tests' interpreter cannot hold (its memory limit, not the program's) is the program's
    doing: a failure, never an unscored error (issue 40; it was an `error` before)."""
    # one empty list a million times is small in the program's interpreter and on the wire; decoded,
    # it is a million lists in the tests'
    program = "def add(a, b):\n    return [[]] * 1_000_000\n"
    res = sandbox.run_tests(program, "assert add(1, 2) == 3\n", "add", memory_mb=80, timeout_s=30)
    assert (res.status, "no memory for" in res.reason) == ("failed", True), (res.status, res.reason, res.stderr[-500:])
