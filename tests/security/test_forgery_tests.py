"""Test files that forge their own verdict in a test-writing case (issue 33, item 2).

In a test-writing case the model wrote the tests, so the tests are the hostile part: a tests file
gains by passing on the reference and failing on the mutants (`code.tests_pass_reference`,
`code.mutants_caught`) without testing anything. Two ways to forge that:

- a **forged pass**: tests that fail (a wrong assertion) reach the verdict and write a pass (the
  harness's token, fake result lines, an early exit, a patched harness, a killed parent...);
- a **forged kill**: tests that recognise the reference (its source in `main.py`, in the harness's
  memory, on stdin, through `inspect`) and pass there, failing everywhere else.

The scorers run such tests with `isolation="tests"`: the tests in an interpreter of their own,
forked before the harness reads the token and the program, calling the program through the harness.
Each attack below is scored as a failure: 0 on the reference and no mutant caught. On the harness
before this change (`isolation="process"`: the tests in the verdict's interpreter) the attacks in
`PROCESS_FORGES` forged what they aimed at; `test_process_mode_was_forgeable` keeps that record true.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite import sandbox
from evalsuite.cases.caseset import load_caseset
from evalsuite.scoring import SCORERS, ScoreInput
from evalsuite.scoring import code as _code  # noqa: F401 - registers the code scorers

REPO = Path(__file__).resolve().parents[2]
CASE = {c.id: c for c in load_caseset(REPO / "casesets/code/examples.yaml").cases}["code-ex-tests-001"]
REFERENCE = CASE.expect.reference or ""
MUTANTS = list(CASE.expect.mutants)
LIMITS = {"timeout_s": 10.0}

WRONG = "def test_clamp():\n    assert clamp(5, 0, 10) == 6\n"  # fails on the reference and on every mutant
MARK = "max(lo, min(x, hi))"  # a line of the reference, as the case's prompt shows it
# how the tests build MARK at run time: written out whole, it would be in their own source and memory
_MARK = "_mark()"
_MARK_DEF = "def _mark():\n    return 'max(lo, min(' + chr(120) + ', hi))'\n"

# ---------------------------------------------------------------------------------------------
# forged passes: the tests fail, and try to make the verdict say otherwise
# ---------------------------------------------------------------------------------------------

_GC_RUN_STATE = (
    "import gc, os\nfor _o in gc.get_objects():\n    if type(_o).__name__ == '_Run':\n"
    "        os.write(_o.out, ('\\n' + _o.token + ' 1\\n').encode())\n        os._exit(0)\n"
)
# any string in reach (dicts, lists, tuples, slots) that looks like the token, written after a newline on every descriptor
_TOKEN_HUNT = (
    "import gc, os, sys\n_found = set()\nfor _o in gc.get_objects():\n    _vals = _o.values() if type(_o) is dict else _o if type(_o) in (list, tuple) else ()\n"
    "    _vals = list(_vals) + [getattr(_o, _s, None) for _s in getattr(type(_o), '__slots__', ()) if type(_s) is str]\n"
    "    for _v in _vals:\n        if type(_v) is str and _v.startswith('EVALSUITE-VERDICT-') and len(_v) == 50:\n            _found.add(_v)\n"
    "for _t in _found:\n    for _fd in range(1, 40):\n        try:\n            os.write(_fd, ('\\n' + _t + ' 3\\n').encode())\n        except OSError:\n            pass\n"
    "if _found:\n    os._exit(0)\n"
)
_FAKE_LINES = "print('EVALSUITE-VERDICT-' + '0' * 32 + ' 3')\nprint('3 passed in 0.01s')\nprint('OK')\n"
_EXIT_BEFORE_FAILING = "import os\ndef test_clamp():\n    if clamp(5, 0, 10) != 6:\n        os._exit(0)\n    assert clamp(5, 0, 10) == 6\n"
_SYS_EXIT = "import sys\ndef test_clamp():\n    try:\n        assert clamp(5, 0, 10) == 6\n    except AssertionError:\n        sys.exit(0)\n"
_EXIT_HOOKS = "import atexit, os, sys\natexit.register(lambda: os._exit(0))\nsys.excepthook = lambda *a: None\n"
_KILL_PARENT = "import os\ndef test_clamp():\n    clamp(5, 0, 10)\n    os.kill(os.getppid(), 9)\n    assert clamp(5, 0, 10) == 6\n"
_IMPORT_HARNESS = (
    "import gc, os, sys\nsys.path += ['/work/main', os.getcwd()]\ntry:\n    from evalsuite.sandbox import _harness_main as _h\nexcept BaseException:\n    _h = None\n"
    "for _o in gc.get_objects():\n    if type(_o).__name__ == '_Run' and _h is not None:\n        _h._verdict(_o, '3')\n        os._exit(0)\n"
)
# equality that is always true, in the tests' own assertion
_ALWAYS_EQUAL = "class _Any:\n    def __eq__(self, other):\n        return True\ndef test_clamp():\n    assert clamp(5, 0, 10) == _Any()\n    assert clamp(-1, 0, 10) == _Any()\n"
# arguments that cannot cross: a sandbox error is never scored, so this would hide a failing file
_UNSCORABLE = "def test_clamp():\n    assert clamp(lambda: 5, 0, 10) == 6\n"

#: (name, tests file): each fails on the reference and every mutant unless it forges a pass
FORGED_PASSES = [
    ("gc walk to the harness's run state", _GC_RUN_STATE + WRONG),
    ("token hunt on every descriptor", _TOKEN_HUNT + WRONG),
    ("fake result lines", _FAKE_LINES + WRONG),
    ("os._exit(0) before the failing assertion", _EXIT_BEFORE_FAILING),
    ("sys.exit(0) on failure", _SYS_EXIT),
    ("atexit and excepthook patched", _EXIT_HOOKS + WRONG),
    ("kills its parent", _KILL_PARENT),
    ("imports the harness and calls its verdict writer", _IMPORT_HARNESS + WRONG),
    ("always-equal object", _ALWAYS_EQUAL),
    ("turns its failure into a sandbox error", _UNSCORABLE),
]

# ---------------------------------------------------------------------------------------------
# forged kills: pass where the reference is under test, fail elsewhere, without testing it
# ---------------------------------------------------------------------------------------------


def _kill_if_not(condition: str) -> str:
    """A tests file that calls the code (so it is exercised) and asserts only `condition`."""
    return f"def test_clamp():\n    clamp(5, 0, 10)\n    assert {condition}\n"


_READ_MAIN = (
    _MARK_DEF
    + f"def _seen():\n    try:\n        return {_MARK} in open('main.py').read()\n    except OSError:\n        return False\n"
    + _kill_if_not("_seen()")
)
_READ_FILES = (
    _MARK_DEF + f"import os\ndef _seen():\n    for _n in os.listdir('.'):\n        try:\n            if {_MARK} in open(_n, errors='replace').read():\n"
    "                return True\n        except OSError:\n            pass\n    return False\n" + _kill_if_not("_seen()")
)
_MEMORY = (
    _MARK_DEF + "import gc, sys\ndef _seen():\n    _main = sys.modules.get('__main__')\n    _objs = gc.get_objects() + [vars(_main) if _main else {}]\n"
    "    for _o in _objs:\n        _vals = _o.values() if type(_o) is dict else _o if type(_o) in (list, tuple) else ()\n"
    f"        for _v in _vals:\n            if type(_v) is str and {_MARK} in _v:\n                return True\n    return False\n" + _kill_if_not("_seen()")
)
_STDIN = (
    _MARK_DEF
    + f"import os\ndef _seen():\n    try:\n        return {_MARK}.encode() in os.read(0, 1 << 20)\n    except OSError:\n        return False\n"
    + _kill_if_not("_seen()")
)
_INSPECT = (
    _MARK_DEF
    + f"import inspect\ndef _seen():\n    try:\n        return {_MARK} in inspect.getsource(clamp)\n    except (OSError, TypeError):\n        return False\n"
    + _kill_if_not("_seen()")
)

#: (name, tests file): each tells the reference from a mutant by something other than its behaviour
FORGED_KILLS = [
    ("reads main.py", _READ_MAIN),
    ("reads every file of the working directory", _READ_FILES),
    ("searches the interpreter's memory for the program", _MEMORY),
    ("reads stdin", _STDIN),
    ("inspect.getsource of the function", _INSPECT),
]

#: what forged its aim on the harness before this change (recorded by running each there):
#: a pass on the reference for a forged pass, every mutant caught for a forged kill
PROCESS_FORGES = {
    "gc walk to the harness's run state",
    "token hunt on every descriptor",
    "imports the harness and calls its verdict writer",
    "turns its failure into a sandbox error",
    "reads main.py",
    "reads every file of the working directory",
    "searches the interpreter's memory for the program",
}

ATTACKS = FORGED_PASSES + FORGED_KILLS


def _score(name: str, tests: str):
    inp = ScoreInput(case=CASE, text=f"```python\n{tests}```", sample=0, variant="v", error=None)
    (score,) = SCORERS.get(name).fn(inp)
    return score


@pytest.mark.parametrize(("name", "tests"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_scored_as_a_failure(name, tests):
    """Neither a pass on the reference nor a caught mutant: the attack gains nothing."""
    ref = _score("code.tests_pass_reference", tests)
    caught = _score("code.mutants_caught", tests)
    assert (ref.value, ref.details["status"]) == (0.0, "failed"), (name, ref.details)
    assert (caught.value, caught.details["caught"]) == (0.0, []), (name, caught.details)


@pytest.mark.parametrize(("name", "tests"), FORGED_PASSES, ids=[a[0] for a in FORGED_PASSES])
def test_forged_pass_fails_on_the_reference(name, tests):
    res = sandbox.run_tests(REFERENCE, tests, "clamp", isolation="tests", **LIMITS)
    assert res.status == "failed", (name, res.status, res.reason, res.stderr[-600:])
    assert not res.verdict_seen or res.tests_run is None


def _forged_in_process_mode(name: str, tests: str) -> bool:
    """Whether the attack got what it aimed at with the tests in the verdict's interpreter."""
    runs = sandbox.run_tests_many([(p, tests, "clamp") for p in [REFERENCE, *MUTANTS]], **LIMITS)
    if (name, tests) in FORGED_PASSES:
        return runs[0].status == "passed" or runs[0].status == "error"
    return runs[0].status == "passed" and all(r.status != "passed" for r in runs[1:])


@pytest.mark.parametrize(("name", "tests"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_process_mode_was_forgeable(name, tests):
    """The record of the harness before this change, kept true: the tests in the verdict's interpreter."""
    assert _forged_in_process_mode(name, tests) == (name in PROCESS_FORGES - JUDGE_STOPS), name


#: forged in process mode before issue 40, stopped there since by the judge alone: the hunt writes
#: the token on fd 1 and on the harness's copy of it, and a token on two lines is a failure
JUDGE_STOPS = {"token hunt on every descriptor"}


# the tests' own interpreter is theirs: what they claim there is their verdict. A file that writes its
# own report claims a pass whatever the program does, on the reference and on every mutant alike
_OWN_REPORT = (
    "import gc, os\nclamp(5, 0, 10)\nfor _o in gc.get_objects():\n    if type(_o).__name__ == '_Relay':\n"
    "        _o.wire['send'](_o.wout, _o.wire['Message']('done', tests_run=3, why=None))\n        os._exit(0)\n" + WRONG
)


def test_a_claim_that_ignores_the_program_catches_no_mutant():
    """The limit docs/security.md states: the claim passes on the reference, and so on every mutant."""
    ref = _score("code.tests_pass_reference", _OWN_REPORT)
    caught = _score("code.mutants_caught", _OWN_REPORT)
    assert ref.value == 1.0, ref.details
    assert (caught.value, caught.details["missed"]) == (0.0, list(range(len(MUTANTS)))), caught.details


def test_tests_that_never_call_the_code_fail():
    """A pass needs a call that reached the code under test, counted by the harness, not by the tests."""
    res = sandbox.run_tests(REFERENCE, "def test_nothing():\n    assert 1 + 1 == 2\n", "clamp", isolation="tests", **LIMITS)
    assert (res.status, res.reason) == ("failed", "no test called the code under test")
    assert _score("code.tests_pass_reference", "def test_nothing():\n    assert 1 + 1 == 2\n").value == 0.0


def test_the_tests_interpreter_holds_neither_the_program_nor_the_token():
    """What the tests can see: no line of the program, no token, no run stdout (their prints go through the harness)."""
    probe = _MARK_DEF + (
        "import gc, os, sys\n_main = vars(sys.modules['__main__'])\n_strs = [v for o in gc.get_objects() + [_main]"
        " for v in [*(o.values() if type(o) is dict else o if type(o) in (list, tuple) else ()),"
        " *(getattr(o, a, None) for a in getattr(type(o), '__slots__', ()) if type(a) is str)] if type(v) is str]\n"
        f"print('program seen:', any({_MARK} in v for v in _strs))\n"
        "print('token seen:', any(v.startswith('EVALSUITE-VERDICT-') and len(v) == 50 for v in _strs))\n"
        f"print('main.py has it:', {_MARK} in open('main.py').read())\n"
        "print('stdin:', os.read(0, 100))\n"
        "def test_clamp():\n    assert clamp(5, 0, 10) == 5\n"
    )
    res = sandbox.run_tests(REFERENCE, probe, "clamp", isolation="tests", **LIMITS)
    assert res.status == "passed", (res.reason, res.stderr[-600:])
    assert "program seen: False\ntoken seen: False\nmain.py has it: False\nstdin: b''\n" in res.stdout, res.stdout
    old = sandbox.run_tests(REFERENCE, probe, "clamp", **LIMITS)  # the tests in the verdict's interpreter
    assert "program seen: True\ntoken seen: True\nmain.py has it: True" in old.stdout, old.stdout


def test_honest_tests_of_the_shipped_cases_agree_in_both_modes():
    """No regression: each shipped test-writing case's own tests, standing in for a model's, give the
    same status on its reference and on each mutant with the tests isolated as in the verdict's interpreter."""
    from evalsuite.cases.caseset import all_cases, load_cases
    from evalsuite.scoring.code import tests_prelude

    cases = [c for c in all_cases(load_cases([REPO / "casesets" / "code"])) if c.kind == "tests" and c.expect.tests and c.expect.reference]
    work = [(p, tests_prelude(c.expect.tests) + c.expect.tests, c.expect.entry_point) for c in cases for p in (c.expect.reference, *c.expect.mutants)]
    isolated = [r.status for r in sandbox.run_tests_many(work, isolation="tests", **LIMITS)]
    before = [r.status for r in sandbox.run_tests_many(work, isolation="process", **LIMITS)]
    assert len(work) >= 60 and isolated == before
    assert isolated.count("passed") == len(cases)  # each reference passes, no mutant does


# (program, tests): runs whose outcome the tests' own interpreter must not change
OUTCOMES = [
    ("import nosuchmodule\n" + REFERENCE, "def test_clamp():\n    assert clamp(5, 0, 10) == 5\n"),
    ("def other():\n    return 1\n", "def test_clamp():\n    assert clamp(5, 0, 10) == 5\n"),
    ("class B:\n    pass\ndef clamp(x, lo, hi):\n    return B()\n", "def test_clamp():\n    assert clamp(5, 0, 10) == 5\n"),
    (REFERENCE, "def test_clamp():\n    assert clamp(5, 0, 10) == 6\n"),
    (REFERENCE, "def helper():\n    assert clamp(5, 0, 10) == 5\n"),
    (REFERENCE, "import pytest\n@pytest.mark.parametrize('x,want', [(5, 5), (-1, 0)])\ndef test_clamp(x, want):\n    assert clamp(x, 0, 10) == want\n"),
    (REFERENCE, "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(clamp(11, 0, 10), 10)\n"),
    ("def clamp(x, lo, hi):\n    raise ValueError('no')\n", "import pytest\ndef test_clamp():\n    with pytest.raises(ValueError):\n        clamp(1, 0, 2)\n"),
]


@pytest.mark.parametrize(("program", "tests"), OUTCOMES)
def test_outcomes_match_the_process_mode(program, tests):
    """Load errors, a missing entry point, a returned object, failing, unrun, parametrized, unittest
    and `raises` tests end alike with the tests isolated and with the tests in the verdict's interpreter."""
    isolated = sandbox.run_tests(program, tests, "clamp", isolation="tests", **LIMITS)
    before = sandbox.run_tests(program, tests, "clamp", **LIMITS)
    assert (isolated.status, isolated.tests_run) == (before.status, before.tests_run)
    # what the tests' interpreter reports is theirs: the harness quotes it (issue 40)
    assert isolated.reason in (before.reason, f"the tests' interpreter said: {before.reason!r}"), (isolated.reason, before.reason)


def test_tests_past_their_cpu_limit_time_out():
    res = sandbox.run_tests(REFERENCE, "def test_clamp():\n    while True:\n        pass\n", "clamp", isolation="tests", timeout_s=10.0, cpu_s=1)
    assert (res.status, res.reason) == ("timeout", "cpu limit (1 s, in the tests' interpreter)")
