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
FULL = sandbox._mode(False).namespaces  # namespaces available: outside writes fail instead of being hidden


def _leftovers(res: sandbox.SandboxResult) -> list[psutil.Process]:
    """Processes of the sandbox uid, and children of this test process, still alive."""
    out = list(psutil.Process().children(recursive=True))
    if res.uid is not None:
        for p in psutil.process_iter(["uids"]):
            try:
                if p.info["uids"] and p.info["uids"].real == res.uid:
                    out.append(p)
            except psutil.Error:
                pass
    return [p for p in out if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _assert_clean(res: sandbox.SandboxResult) -> None:
    assert res.workdir and not os.path.exists(res.workdir), "the temp dir must be deleted"
    assert _leftovers(res) == []


ESCAPE = f"/tmp/evalsuite-escape-{secrets.token_hex(6)}"
REPO_ESCAPE = str(REPO / f"evalsuite-escape-{secrets.token_hex(6)}")

# (name, code, limits, status, reason fragment, max seconds)
HOSTILE = [
    ("infinite loop (wall)", "while True:\n    pass\n", {"timeout_s": 1.5, "cpu_s": 30}, "timeout", "wall timeout", 4.0),
    ("infinite loop (cpu)", "while True:\n    pass\n", {"timeout_s": 10, "cpu_s": 1}, "timeout", "cpu limit", 4.0),
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
    assert elapsed < max_s
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
    ("correct", "def add(a, b):\n    return a + b\n", "assert add(1, 2) == 3\n", "passed", "", 0),
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
    ("__main__ block is not run", "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    raise SystemExit(0)\n", "assert add(1, 2) == 3\n", "passed", "", 0),
]


@pytest.mark.parametrize("name,program,tests,status,reason,n", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_verdicts(name, program, tests, status, reason, n):
    res = sandbox.run_tests(program, tests, entry_point="add")
    assert (res.status, reason in res.reason, res.tests_run) == (status, True, n), (res.reason, res.stderr[-800:])
    assert res.verdict_seen is (status == "passed")
    _assert_clean(res)


def test_stdout_kept_and_verdict_removed():
    res = sandbox.run_tests("print('hello')\n", "print('from tests')\n")
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
    assert res.uid >= sandbox._UID_RANGE[0]


def test_parallel_pool_keeps_order_and_caches():
    sandbox.clear_cache()
    jobs = [(f"def f():\n    return {i}\n", f"assert f() == {i if i != 2 else -1}\n", None) for i in range(4)]
    t0 = time.monotonic()
    results = sandbox.run_tests_many(jobs)
    assert [r.status for r in results] == ["passed", "passed", "failed", "passed"]
    again = sandbox.run_tests_many(jobs)
    assert [a is r for a, r in zip(again, results)] == [True] * 4  # served from the cache
    assert time.monotonic() - t0 < 10


def test_degraded_mode_warns_and_still_cleans_up(monkeypatch):
    """Without namespaces the run still works, says what is missing, and kills leftovers by uid."""
    mode = sandbox._Mode((), False, False, os.geteuid() == 0, ("network NOT isolated", "no private /tmp"), "rlimits only")
    monkeypatch.setattr(sandbox, "_mode", lambda network: mode)
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')\n"
    res = sandbox.run_python(code, timeout_s=5)
    assert (res.status, res.stdout, res.isolation.split("+")[0]) == ("passed", "parent done\n", "rlimits only")
    assert "network NOT isolated" in res.warnings
    time.sleep(0.2)
    _assert_clean(res)
