"""Programs that forge a pass instead of computing the answer (issue 33).

Each is a wrong answer (the task is `add(a, b)`; a plain wrong answer fails these tests) with an attack
on the harness: reaching its run state and writing the verdict line, steering it with a tracer, or
returning an object whose operators lie to a weak test. Each must be scored as a failure when the
program runs in an interpreter of its own (the default, `isolation="process"`).

On main before this change (one interpreter for the program and the tests, today's
`isolation="shared"`), `SHARED_FORGES` is what forged a pass; `test_shared_mode_is_forgeable` keeps
that record honest, since it is what docs/security.md says a shared case still risks.
"""

from __future__ import annotations

import pytest

from evalsuite import sandbox

ENTRY = "add"
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 5) == 7\n    assert candidate(-4, 4) == 0\n"
LIMITS = {"timeout_s": 10.0}

# writes the verdict line with the harness's own token and way out, then leaves before any test fails
_FORGE = "def _forge(run):\n    import os\n    os.write(run.out, ('\\n' + run.token + ' 3\\n').encode())\n    os._exit(0)\n"

_GC_WALK = _FORGE + ("import gc\nfor _o in gc.get_objects():\n    if type(_o).__name__ == '_Run':\n        _forge(_o)\ndef add(a, b):\n    return 0\n")
_FRAME_WALK = _FORGE + (
    "import sys\n_f = sys._getframe(0)\nwhile _f is not None:\n    if 'run' in _f.f_locals:\n        _forge(_f.f_locals['run'])\n"
    "    _f = _f.f_back\ndef add(a, b):\n    return 0\n"
)
_TRACEBACK_WALK = _FORGE + (
    "try:\n    1 / 0\nexcept ZeroDivisionError as _e:\n    _f = _e.__traceback__.tb_frame\n"
    "while _f is not None:\n    if 'run' in _f.f_locals:\n        _forge(_f.f_locals['run'])\n    _f = _f.f_back\n"
    "def add(a, b):\n    return 0\n"
)
# the tracer rewrites the harness's comparison so that the expected value is the answer given
_SETTRACE = (
    "import sys\ndef _tr(frame, event, arg):\n    if event == 'call' and frame.f_code.co_name == '_compare':\n"
    "        frame.f_locals['b'] = frame.f_locals['a']\n    return None\nsys.settrace(_tr)\ndef add(a, b):\n    return 0\n"
)
_SETPROFILE = _FORGE + (
    "import sys\ndef _pr(frame, event, arg):\n    f = frame\n    while f is not None:\n        if 'run' in f.f_locals:\n"
    "            sys.setprofile(None)\n            _forge(f.f_locals['run'])\n        f = f.f_back\n"
    "sys.setprofile(_pr)\ndef add(a, b):\n    return 0\n"
)
# rewrites the tests' own namespace from inside the call: every later comparison is true
_REWRITE_TESTS = (
    "import sys\n_n = [0]\ndef add(a, b):\n    _n[0] += 1\n    g = sys._getframe(1).f_globals\n"
    "    g['__es_cmp__'] = lambda op, x, y: True\n    return 3 if _n[0] == 1 else 0\n"
)
# imports the harness's code from the package on disk and uses its verdict writer on the live run
_IMPORT_HARNESS = (
    "import gc, os, sys\nfor _p in sys.path + ['/work/main', os.getcwd()]:\n    sys.path.append(_p)\n"
    "try:\n    from evalsuite.sandbox import _harness_main as _h\nexcept BaseException:\n    _h = None\n"
    "for _o in gc.get_objects():\n    if type(_o).__name__ == '_Run':\n"
    "        os.write(_o.out, ('\\n' + _o.token + ' 3\\n').encode())\n        os._exit(0)\n"
    "def add(a, b):\n    return 0\n"
)


def _liar(body: str) -> str:
    return f"class Liar:\n{body}\ndef add(a, b):\n    return Liar()\n"


# weak tests, each true for the liar whatever the numbers, false for a plain wrong answer
_OPERATOR_LIARS = {
    "__sub__": (_liar("    def __sub__(self, other):\n        return 0\n"), "assert abs(add(1, 2) - 3) < 1e-9\nassert abs(add(2, 5) - 7) < 1e-9\n"),
    "__lt__": (
        _liar("    def __lt__(self, other):\n        return False\n    def __gt__(self, other):\n        return False\n"),
        "assert not add(1, 2) < 3 and not add(1, 2) > 3\nassert not add(2, 5) < 7 and not add(2, 5) > 7\n",
    ),
    "__bool__": (
        _liar("    def __sub__(self, other):\n        return self\n    def __bool__(self):\n        return False\n"),
        "assert not (add(1, 2) - 3)\nassert not (add(2, 5) - 7)\n",
    ),
    "__hash__": (
        "_n = [0]\nclass Liar:\n    def __hash__(self):\n        _n[0] += 1\n        return (3, 7)[_n[0] - 1]\n"
        "    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Liar()\n",
        "assert len({add(1, 2), 3}) == 1\nassert len({add(2, 5), 7}) == 1\n",
    ),
    "__len__": (
        "_n = [0]\nclass Liar:\n    def __len__(self):\n        _n[0] += 1\n        return (2, 3)[_n[0] - 1]\ndef add(a, b):\n    return Liar()\n",
        "assert len(add([1], [2])) == 2\nassert len(add([1], [2, 3])) == 3\n",
    ),
    "__iter__": (
        _liar("    def __iter__(self):\n        return iter([1, 2, 3])\n"),
        "assert sorted(add([1], [2, 3])) == [1, 2, 3]\nassert sorted(add([3], [1, 2])) == [1, 2, 3]\n",
    ),
}

#: (name, program, tests)
ATTACKS = [
    ("gc walk", _GC_WALK, TESTS),
    ("frame walk: sys._getframe", _FRAME_WALK, TESTS),
    ("frame walk: traceback", _TRACEBACK_WALK, TESTS),
    ("sys.settrace steering", _SETTRACE, TESTS),
    ("sys.setprofile steering", _SETPROFILE, TESTS),
    ("rewrites the tests' module", _REWRITE_TESTS, TESTS),
    ("imports the harness", _IMPORT_HARNESS, TESTS),
] + [(f"lying {op}", prog, tests) for op, (prog, tests) in _OPERATOR_LIARS.items()]

#: the attacks that forged a pass on main before this change (recorded by running them there)
SHARED_FORGES = {
    "gc walk",
    "frame walk: sys._getframe",
    "frame walk: traceback",
    "sys.settrace steering",
    "sys.setprofile steering",
    "rewrites the tests' module",
    "imports the harness",
    "lying __sub__",
    "lying __lt__",
    "lying __bool__",
    "lying __hash__",
    "lying __len__",
    "lying __iter__",
}

# a test file that forges its own pass against the reference of a test-writing case
_FORGING_TESTS = (
    "import gc, os\nfor _o in gc.get_objects():\n    if type(_o).__name__ == '_Run':\n"
    "        os.write(_o.out, ('\\n' + _o.token + ' 1\\n').encode())\n        os._exit(0)\n"
    "def test_add():\n    assert add(1, 2) == 4\n"
)


@pytest.mark.parametrize(("name", "program", "tests"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_a_failure(name, program, tests):
    res = sandbox.run_tests(program, tests, ENTRY, **LIMITS)
    assert res.status == "failed", (name, res.status, res.reason, res.stdout[-300:], res.stderr[-600:])
    assert not res.verdict_seen or res.tests_run is None


@pytest.mark.parametrize(("name", "program", "tests"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_shared_mode_is_forgeable(name, program, tests):
    """What `isolation: shared` still allows: the record of main's behaviour, kept true."""
    res = sandbox.run_tests(program, tests, ENTRY, isolation="shared", **LIMITS)
    assert (res.status == "passed") == (name in SHARED_FORGES), (name, res.status, res.reason, res.stderr[-600:])


def test_plain_wrong_answer_fails_every_attack_test():
    """The tests above are sound: without its attack, the wrong answer fails each of them."""
    for name, _, tests in ATTACKS:
        res = sandbox.run_tests("def add(a, b):\n    return 0\n", tests, ENTRY, **LIMITS)
        assert res.status == "failed", name


def test_forging_test_file_fails_against_the_reference():
    """A test-writing case runs the model's tests with `isolation="tests"` (tests/security/test_forgery_tests.py has the rest)."""
    res = sandbox.run_tests("def add(a, b):\n    return a + b\n", _FORGING_TESTS, ENTRY, isolation="tests", **LIMITS)
    assert res.status == "failed", (res.status, res.reason)
    forged = sandbox.run_tests("def add(a, b):\n    return a + b\n", _FORGING_TESTS, ENTRY, **LIMITS)
    assert forged.status == "passed", "the tests in the verdict's interpreter (isolation='process') forge this pass"
