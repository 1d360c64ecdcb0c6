"""A `run_tests` run: a short main.py with the run's data, the harness's code in a file beside it
(`harness.bin`), and a harness that leaves without the interpreter's shutdown only when nothing
could still run after its verdict."""

from __future__ import annotations

import secrets
import sys

import pytest

from evalsuite import sandbox
from evalsuite.sandbox import harness as harness_mod

ADD_TESTS = "assert add(1, 2) == 3\nassert add(0, 0) == 0\n"
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return 0\n"


def test_run_tests_main_py_holds_the_runs_data_and_the_harness_is_beside_it():
    main, files = harness_mod.harness_run(GOOD, ADD_TESTS, "add")
    assert list(files) == [harness_mod.HARNESS_FILE]
    assert len(main) < 8000, len(main)  # the self-contained main.py is ~300 KB of literals
    assert len(sandbox.build_harness(GOOD, ADD_TESTS, "add")) > 100_000
    assert repr(GOOD) in main and files[harness_mod.HARNESS_FILE] == harness_mod.harness_run(BAD, "assert True\n", None)[1][harness_mod.HARNESS_FILE]


@pytest.mark.parametrize("isolation", ["process", "shared", "tests"])
@pytest.mark.parametrize("program,status", [(GOOD, "passed"), (BAD, "failed")])
def test_the_file_beside_main_py_runs_every_isolation(program, status, isolation):
    tests = "def test_add():\n    " + ADD_TESTS.replace("\n", "\n    ") if isolation == "tests" else ADD_TESTS
    res = sandbox.run_tests(program, tests, "add", isolation=isolation)
    assert res.status == status, (res.reason, res.stderr[-800:])


@pytest.mark.parametrize("program,status", [(GOOD, "passed"), (BAD, "failed")])
def test_the_harness_file_falls_back_to_its_source_on_another_interpreter_version(program, status):
    main, files = harness_mod.harness_run(program, ADD_TESTS, "add")
    assert main.count(f"sys.hexversion == {sys.hexversion}") == 1 and main.count(f"'version': {sys.hexversion},") == 1
    other = main.replace(f"sys.hexversion == {sys.hexversion}", "sys.hexversion == 0").replace(f"'version': {sys.hexversion},", "'version': 0,")
    token = "EVALSUITE-VERDICT-" + secrets.token_hex(8)
    res = sandbox.run_python(other, verdict_token=token, stdin=(token + "\n").encode(), files=files)
    assert res.status == status, res.stderr[-800:]
    if status == "failed":
        assert "<evalsuite-harness>" in res.stderr and "AssertionError" in res.stderr


@pytest.mark.parametrize("name", ["main.py", "sandbox.cfg", "../x", "a/b", ".hidden", ""])
def test_a_file_beside_main_py_needs_a_plain_name_of_its_own(name):
    broken = sandbox.zygote.zygote_state["broken"]
    with pytest.raises(ValueError):
        sandbox.run_python("print(1)\n", files={name: b"x"})
    assert sandbox.zygote.zygote_state["broken"] == broken  # refused before the run: the zygote is not given up


LATE = [
    ("an atexit hook", "import atexit\natexit.register(lambda: print('late'))\n"),
    ("a thread", "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()\n"),
]


@pytest.mark.parametrize("what,code", LATE, ids=[w for w, _ in LATE])
def test_output_after_the_verdict_still_fails_where_the_harness_could_leave_early(what, code):
    """The harness skips the interpreter's shutdown only when nothing could run in it: tests that leave
    an atexit hook or a thread printing after the verdict still fail, as before."""
    res = sandbox.run_tests(GOOD, code + ADD_TESTS, "add")
    assert res.status == "failed", (what, res.reason, res.stdout[-300:])
    assert "late" in res.stdout


def test_a_failing_test_still_ends_with_its_traceback_and_exit_1():
    res = sandbox.run_tests(BAD, ADD_TESTS, "add")
    assert (res.status, res.reason) == ("failed", "exit 1")
    assert res.stderr.rstrip().endswith("AssertionError") and 'File "tests.py", line 1' in res.stderr


def test_the_garbage_collector_is_on_for_the_program_and_for_the_tests():
    """main.py turns it off while the harness loads; the harness turns it back on before it forks."""
    program = "import gc\ndef add(a, b):\n    return a + b\ndef collecting():\n    return gc.isenabled()\n"
    tests = "import gc\nassert gc.isenabled()\nassert collecting() is True\n"
    res = sandbox.run_tests(program, tests, "add")
    assert res.status == "passed", (res.reason, res.stderr[-800:])


def test_a_failing_untrusted_test_ends_with_its_traceback_and_exit_1():
    """The tests' interpreter shows a failing test's traceback through sys.excepthook, as the harness
    does in the other modes (it imported `traceback` for it, most of a failing run's time)."""
    tests = "def test_add():\n    " + ADD_TESTS.replace("\n", "\n    ")
    res = sandbox.run_tests(BAD, tests, "add", isolation="tests")
    assert (res.status, res.reason) == ("failed", "exit 1")
    assert res.stderr.rstrip().endswith("AssertionError") and 'File "tests.py", line 2, in test_add' in res.stderr
