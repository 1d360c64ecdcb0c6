"""The suite's side of the test harness: the `main.py` a `run_tests` run executes.

The harness itself is `_harness_main.py`, a stdlib-only module that runs inside the sandbox (see its
docstring for why each step is there). `build_harness` writes the run's data and the harness compiled
by the suite into `main.py`, and instruments the tests here, so a run pays for no compiler and no
`ast`/`unittest` import it does not need; the harness's source goes along for another interpreter version.
"""

from __future__ import annotations

import ast
import builtins
import marshal
import os
import sys
from functools import lru_cache

from ._harness_main import SANDBOX_NAME, instrument

# A minimal stand-in for pytest (the sandbox interpreter runs with -S: no site-packages), enough
# for the test files models write: raises, approx, mark.parametrize, fixture-less tests.
_PYTEST_SHIM = r"""
import sys as _sys, types as _types, math as _math
_pt = _types.ModuleType("pytest")
class _Raises:
    def __init__(self, exc, match=None):
        self.exc, self.match, self.value = exc, match, None
    def __enter__(self):
        return self
    def __exit__(self, et, ev, tb):
        if et is None:
            raise AssertionError(f"DID NOT RAISE {self.exc}")
        if not issubclass(et, self.exc):
            return False
        if self.match is not None:
            import re
            if not re.search(self.match, str(ev)):
                raise AssertionError(f"{ev!r} does not match {self.match!r}")
        self.value = ev
        return True
def _raises(exc, *args, match=None, **kw):
    if args:
        with _Raises(exc, match):
            args[0](*args[1:], **kw)
        return None
    return _Raises(exc, match)
class _Approx:
    def __init__(self, expected, rel=None, abs=None):
        self.e, self.rel, self.abs = expected, rel, abs
    def _eq(self, a, e):
        if isinstance(e, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(e) and all(self._eq(x, y) for x, y in zip(a, e))
        if isinstance(e, dict):
            return isinstance(a, dict) and a.keys() == e.keys() and all(self._eq(a[k], e[k]) for k in e)
        rel = 1e-6 if self.rel is None else self.rel
        ab = 1e-12 if self.abs is None else self.abs
        return _math.isclose(a, e, rel_tol=rel, abs_tol=ab)
    def __eq__(self, other):
        return self._eq(other, self.e)
    def __repr__(self):
        return f"approx({self.e!r})"
class _Mark:
    def parametrize(self, names, values, **kw):
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        def deco(f):
            f.__dict__.setdefault("_es_params", []).insert(0, (names, list(values)))
            return f
        return deco
    def __getattr__(self, name):
        def mark(*a, **k):
            if len(a) == 1 and callable(a[0]) and not k:
                return a[0]
            return lambda f: f
        return mark
def _fixture(*a, **k):
    if len(a) == 1 and callable(a[0]):
        return a[0]
    return lambda f: f
def _fail(msg=""):
    raise AssertionError(msg)
_pt.raises, _pt.approx, _pt.mark, _pt.fixture, _pt.fail = _raises, _Approx, _Mark(), _fixture, _fail
try:
    import pytest as _real_pytest  # noqa: F401
except ImportError:
    _sys.modules["pytest"] = _pt
"""


@lru_cache(maxsize=512)
def _compiled_tests(tests: str) -> bytes | None:
    """The instrumented tests as a marshalled code object (the same tests serve many samples).
    None when they do not compile: the harness then fails on them inside the sandbox, as before."""
    try:
        return marshal.dumps(instrument(tests, ast))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _uses_unittest(tests: str) -> bool:
    """Whether the (trusted) tests can reach unittest: only by naming it."""
    return "unittest" in tests or "TestCase" in tests


_HARNESS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_harness_main.py")
_HARNESS_NAME = "<evalsuite-harness>"  #: the harness's file name in tracebacks (its source is not in the sandbox's linecache)


@lru_cache(maxsize=1)
def _harness_code() -> tuple[str, bytes]:
    """The harness's source and its compiled code, marshalled: compiling it took ~10 ms per run.

    Compiled without its docstrings (optimize=2; the harness has no `assert` of its own to lose):
    they are for readers of the source, and every run parses the code's literal in its `main.py`."""
    with open(_HARNESS_FILE, encoding="utf-8") as fh:
        src = fh.read()
    return src, marshal.dumps(compile(src, _HARNESS_NAME, "exec", dont_inherit=True, optimize=2))


#: how a test run places the program: "process" (an interpreter of its own, called over `_wire`),
#: "tests" (as "process", and the tests untrusted too: a third interpreter that calls the program
#: through the harness and never holds the program, the token or the verdict; test-writing cases) or
#: "shared" (the program and the tests in one interpreter: the program can forge the verdict)
ISOLATIONS = ("process", "tests", "shared")

_WIRE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_wire.py")
_PROGRAM_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_program_main.py")


@lru_cache(maxsize=1)
def _program_side() -> tuple[bytes, str, str]:
    """The program's interpreter's code: the wire's and `_program_main`'s, marshalled, and their sources."""
    with open(_WIRE_FILE, encoding="utf-8") as fh:
        wire_src = fh.read()
    with open(_PROGRAM_FILE, encoding="utf-8") as fh:
        prog_src = fh.read()
    w = compile(wire_src, "<evalsuite-wire>", "exec", dont_inherit=True, optimize=2)
    p = compile(prog_src, "<evalsuite-program>", "exec", dont_inherit=True, optimize=2)
    return marshal.dumps((w, p)), wire_src, prog_src


@lru_cache(maxsize=512)
def _referenced_names(tests: str, entry_point: str | None) -> tuple[str, ...]:
    """The names the tests read that they may take from the program (the entry point first)."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = ast.Module(body=[], type_ignores=[])
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names -= set(dir(builtins))
    names.discard(entry_point or "")
    return ((entry_point,) if entry_point else ()) + tuple(sorted(names))


#: the file beside main.py that holds the harness's code for `harness_run` (`spawn.write_inputs` puts it there)
HARNESS_FILE = "harness.bin"


def _payload(program: str, tests: str, entry_point: str | None, isolation: str) -> dict:
    """The run's data for the harness (`_harness_main.main`), the program's interpreter's code left out
    (`_isolated_code`: the same for every run)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation {isolation!r}: expected one of {', '.join(ISOLATIONS)}")
    shim = _PYTEST_SHIM if "pytest" in tests else ""
    isolated = None
    if isolation != "shared":
        isolated = {
            "names": _referenced_names(tests, entry_point),  #: the names the tests may take from the program
            "untrusted_tests": isolation == "tests",  #: the tests run in an interpreter of their own too
        }
    if isolation == "tests":
        program = ""  # it comes on stdin, after the token (`run_tests`): the tests can read main.py
    return {
        "program": program,
        "tests": tests,
        "tests_code": _compiled_tests(tests),  #: the tests instrumented, marshalled (None: the harness instruments them)
        "version": sys.hexversion,  #: the interpreter version that compiled the code objects
        "entry_point": entry_point,
        "shim": shim,  #: the pytest stand-in, where the tests name pytest
        "unittest": _uses_unittest(tests),
        "isolated": isolated,  #: None: the program runs in the harness's interpreter (isolation "shared")
    }


@lru_cache(maxsize=1)
def _isolated_code() -> dict:
    """What an isolated run's harness adds to `_payload()["isolated"]`: the same for every run."""
    codes, wire_src, prog_src = _program_side()
    return {
        "codes": codes,  #: the wire's and the program's interpreter's code, marshalled
        "wire_source": wire_src,  #: their sources, for another interpreter version
        "program_source": prog_src,
    }


#: main.py's first line: no collection while the harness loads (`_harness_main._collect_again` turns it back on)
_GC_OFF = "import gc\ngc.disable()\n"


def _exec_line(code: str, source: str) -> str:
    """main.py's last line: the harness's code (`code`, an expression) where this interpreter version
    compiled it, else compiled from its source (`source`), run in a namespace of its own."""
    return (
        f"exec(marshal.loads({code}) if sys.hexversion == {sys.hexversion} else compile({source}, {_HARNESS_NAME!r}, 'exec'), "
        f"{{'__name__': {SANDBOX_NAME!r}, '_es_payload': _es_payload}})\n"
    )


@lru_cache(maxsize=1)
def _inline_tail() -> str:
    """The part of a self-contained main.py after the run's data: the same for every run, so built once."""
    src, code = _harness_code()
    return f"_es_code = {code!r}\n_es_source = {src!r}\nimport marshal, sys\n" + _exec_line("_es_code", "_es_source")


def build_harness(program: str, tests: str, entry_point: str | None = None, isolation: str = "process") -> str:
    """The test program: the tests, the program (in an interpreter of its own unless `isolation` is
    "shared"), then the verdict line. With "tests" the program is left out: `run_tests` sends it on
    stdin after the token, once the tests' interpreter has been forked without it.

    It holds the run's data and the harness compiled by the suite (run when the sandbox's interpreter
    is this one, the usual case), with the harness's source as the fallback for another version: one
    file, nothing else needed (`harness_run` is the same run with the harness's code in a file beside it).
    """
    payload = _payload(program, tests, entry_point, isolation)
    if payload["isolated"] is not None:
        payload["isolated"].update(_isolated_code())
    # the literals on lines of their own: a traceback shows the short `exec` line, not 60 KB of them;
    # the harness gets a namespace of its own (the program can `import __main__`, not reach into it)
    return _GC_OFF + f"_es_payload = {payload!r}\n" + _inline_tail()


@lru_cache(maxsize=1)
def _harness_blob() -> bytes:
    """`HARNESS_FILE`: the harness's code and source, and the program's interpreter's (`_isolated_code`),
    marshalled as plain bytes and strings in a dict (a format every interpreter version reads)."""
    src, code = _harness_code()
    return marshal.dumps({"code": code, "source": src, "isolated": _isolated_code()}, 4)


#: main.py's lines after the run's data in a `harness_run`: the harness from `HARNESS_FILE`
_FILE_TAIL = (
    "import marshal, sys\n"
    f"with open({HARNESS_FILE!r}, 'rb') as _es_file:\n"
    "    _es_blob = marshal.load(_es_file)\n"
    "if _es_payload['isolated'] is not None:\n"
    "    _es_payload['isolated'].update(_es_blob['isolated'])\n"
)


def harness_run(program: str, tests: str, entry_point: str | None = None, isolation: str = "process") -> tuple[str, dict[str, bytes]]:
    """`build_harness`'s run as a short main.py and the file beside it (`HARNESS_FILE`) that holds the
    harness's code: what `run_tests` runs. The same for every run, that file spares the suite writing
    and the sandbox's interpreter parsing ~300 KB of literals per run (a few ms of each run's time)."""
    payload = _payload(program, tests, entry_point, isolation)
    main = _GC_OFF + f"_es_payload = {payload!r}\n" + _FILE_TAIL + _exec_line("_es_blob['code']", "_es_blob['source']")
    return main, {HARNESS_FILE: _harness_blob()}
