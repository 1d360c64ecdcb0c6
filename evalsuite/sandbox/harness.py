"""The test harness: the program and its tests in one sandboxed interpreter, and a verdict only
when every test ran (see the package docstring for why each step is there).

`build_harness` writes the `main.py` a run executes; the harness and the instrumented tests arrive
compiled by the suite, so a run pays for no compiler and no `ast`/`unittest` import it does not need.
"""

from __future__ import annotations

import ast
import marshal
import sys
from functools import lru_cache

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

# The harness the program and its tests run in (main.py inside the sandbox). Why each step:
# - the token is read from stdin and stdin closed before the program runs: it is in no file or env;
# - the program runs first, in its own namespace; whatever it changed in builtins, sys.modules and
#   unittest is put back before the tests and before each test (a patched assertEqual or `abs`
#   cannot make a test pass);
# - the tests run in a copy of the program's names with their own copy of the builtins;
# - every assert, assert*/raises/fail call of the tests file counts as a hit, and a test counts
#   as run only if it hit one: zero tests run is a failure ("no test ran"), as is a missing entry point;
# - `==`, `!=`, `in` in the tests are decided by the expected value's own equality when the other side's
#   equality was written by the program (an object whose __eq__ is always true proves nothing);
# - unittest cases are run method by method by the harness itself, so no reporting hook can swallow
#   a failure: a failing test raises straight through to the interpreter (exit 1, no verdict);
# - start-up is paid once per sample, so nothing is imported that the run does not need: the tests
#   arrive instrumented and compiled (marshal, from the suite, same interpreter version; else they are
#   instrumented here with `ast`), and unittest is imported (before the program, so its snapshot is
#   clean) only when the trusted tests name it.
_HARNESS = r'''
import os as _es_os, sys as _es_sys
def _es_token():
    t = _es_sys.stdin.readline().strip()
    fd = _es_os.open(_es_os.devnull, _es_os.O_RDONLY)
    _es_os.dup2(fd, 0)
    _es_os.close(fd)
    return t
__ES_INSTRUMENT__
def _es_main(_tok=_es_token(), _out=_es_os.dup(1), _write=_es_os.write):
    _program, _tests, _tests_code, _version, _ep, _shim, _use_unittest = _es_payload
    import builtins, itertools, marshal
    if _use_unittest:
        import unittest
    _type, _isinstance, _issubclass, _getattr, _callable, _vars = type, isinstance, issubclass, getattr, callable, vars
    _len, _all, _any, _zip, _list, _dict, _tuple, _sorted = len, all, any, zip, list, dict, tuple, sorted
    _set, _frozenset, _NotImplemented, _BaseException = set, frozenset, NotImplemented, BaseException
    _Function = _type(_es_token)
    _stdlib = _es_os.path.dirname(_es_os.__file__) + _es_os.sep
    _HEAP = 1 << 9
    _TestCase, _SkipTest = (unittest.TestCase, unittest.SkipTest) if _use_unittest else (None, None)
    _stderr = _es_sys.stderr
    linecache = _es_sys.modules.get("linecache")  # only loaded with unittest (traceback): not worth its import
    for _fn, _text in (("solution.py", _program), ("tests.py", _tests)):
        if linecache is not None:
            linecache.cache[_fn] = (_len(_text), None, _text.splitlines(True), _fn)

    def verdict(text):
        try:
            _es_sys.stdout.flush()
        except _BaseException:
            pass
        _write(_out, ("\n" + _tok + " " + text + "\n").encode())

    _b_snap = _dict(_vars(builtins))
    _mod_snap = _dict(_es_sys.modules)
    _ut = [unittest, unittest.case, unittest.result, unittest.runner, unittest.loader, unittest.suite,
           unittest.TestCase, unittest.TestResult, unittest.TestLoader, unittest.TestSuite, unittest.FunctionTestCase] if _use_unittest else []
    _ut_snap = [(o, _dict(_vars(o))) for o in _ut]

    def restore():
        b = _vars(builtins)
        for k in [k for k in b if k not in _b_snap]:
            del b[k]
        b.update(_b_snap)
        mods = _es_sys.modules
        for k, v in _mod_snap.items():
            if mods.get(k) is not v:
                mods[k] = v
        for o, snap in _ut_snap:
            cur = _vars(o)
            # names added to a class may override its bases; names added to a module are submodules
            # the tests imported (unittest.mock) and must stay
            for k in [k for k in cur if k not in snap and _isinstance(o, _type)]:
                try:
                    delattr(o, k)
                except (AttributeError, TypeError):
                    pass
            for k, v in snap.items():
                if cur.get(k) is not v:
                    try:
                        setattr(o, k, v)
                    except (AttributeError, TypeError):
                        pass

    def program_eq(t):
        """Whether equality of type t was written by the program (not a C type or the stdlib)."""
        for k in t.__mro__:
            d = _vars(k)
            if "__eq__" in d or "__ne__" in d:
                if not k.__flags__ & _HEAP:
                    return False
                f = d["__eq__"] if "__eq__" in d else d["__ne__"]
                code = _getattr(f, "__code__", None)
                if code is not None:
                    return not code.co_filename.startswith(_stdlib)
                return _getattr(f, "__objclass__", None) is not k
        return False

    def eq(a, b, depth=0):
        r = a == b
        if not r or depth > 50:
            return r
        pa, pb = program_eq(_type(a)), program_eq(_type(b))
        if pa and pb:
            return r
        if pa or pb:
            plain, other = (b, a) if pa else (a, b)
            r2 = _type(plain).__eq__(plain, other)
            if r2 is _NotImplemented or not r2:
                return False
        if _isinstance(a, (_list, _tuple)) and _isinstance(b, (_list, _tuple)):
            return _all(eq(x, y, depth + 1) for x, y in _zip(a, b))
        if _isinstance(a, _dict) and _isinstance(b, _dict):
            return _all(k in b and eq(v, b[k], depth + 1) for k, v in a.items())
        if _isinstance(a, (_set, _frozenset)) and _isinstance(b, (_set, _frozenset)):
            if _any(program_eq(_type(x)) for x in a) or _any(program_eq(_type(x)) for x in b):
                return _all(_any(eq(x, y, depth + 1) for y in b) for x in a) and _all(_any(eq(y, x, depth + 1) for x in a) for y in b)
        return r

    def contains(x, c):
        r = x in c
        if r and _isinstance(c, (_list, _tuple, _set, _frozenset, _dict)):
            return _any(y is x or eq(y, x) for y in c)
        return r

    def compare(op, a, b):
        if op == "Eq":
            return eq(a, b)
        if op == "NotEq":
            if not (program_eq(_type(a)) or program_eq(_type(b))):
                return a != b
            return not eq(a, b)
        if op == "In":
            return contains(a, b)
        return not contains(a, b)

    hits = [0]

    def hit():
        hits[0] += 1

    if _tests_code is not None and _version == _es_sys.hexversion:
        tests_code = marshal.loads(_tests_code)
    else:
        import ast

        tests_code = _es_instrument(_tests, ast)

    ns = {"__name__": "__solution__", "__builtins__": builtins}
    exec(compile(_program, "solution.py", "exec"), ns)
    restore()
    if _ep is not None and _ep not in ns:
        verdict("FAIL entry point %r not defined" % (_ep,))
        return
    if _shim:
        exec(compile(_shim, "pytest_shim.py", "exec"), {})
    tns = {k: v for k, v in ns.items() if k == _ep or k not in _b_snap}
    tns.update({"__name__": "__solution__", "__builtins__": _dict(_b_snap), "__es_hit__": hit, "__es_cmp__": compare})

    def from_tests(f):
        return _isinstance(f, _Function) and f.__code__.co_filename == "tests.py"

    def counted(f, *args, **kw):
        """Call one test; 1 if it hit an assertion, else 0."""
        restore()
        before = hits[0]
        f(*args, **kw)
        return 1 if hits[0] > before else 0

    def run_params(f):
        params = _getattr(f, "_es_params", None)
        if not params:
            return counted(f)
        grids = [[_dict(_zip(names, v if _len(names) > 1 else (v,))) for v in values] for names, values in params]
        n = 0
        for combo in itertools.product(*grids):
            kw = {}
            for d in combo:
                kw.update(d)
            n += counted(f, **kw)
        return n

    def guarded(inst, name):
        orig = _getattr(inst, name)
        negate = "Not" in name

        def check(first, second, *a, **k):
            orig(first, second, *a, **k)
            same = contains(first, second) if name.endswith("In") else eq(first, second)
            if same == negate:
                raise inst.failureException(f"{name}: the program's own __eq__ decided this comparison")
        return check

    def run_unittest(cls):
        if _getattr(cls, "__unittest_skip__", False):
            return 0
        n = 0
        restore()
        cls.setUpClass()
        try:
            for name in unittest.TestLoader().getTestCaseNames(cls):
                inst = cls(name)
                for g in ("assertEqual", "assertNotEqual", "assertListEqual", "assertTupleEqual", "assertDictEqual",
                          "assertSequenceEqual", "assertSetEqual", "assertIn", "assertNotIn"):
                    setattr(inst, g, guarded(inst, g))
                method = _getattr(inst, name)
                if _getattr(method, "__unittest_skip__", False):
                    continue
                expecting = _getattr(method, "__unittest_expecting_failure__", False)
                restore()
                before = hits[0]
                try:
                    inst.setUp()
                    try:
                        method()
                    finally:
                        inst.tearDown()
                        inst.doCleanups()
                except _SkipTest:
                    continue
                except _BaseException:
                    if not expecting:
                        raise
                    continue
                if expecting:
                    raise AssertionError(f"{cls.__name__}.{name}: expected to fail, passed")
                n += 1 if hits[0] > before else 0
        finally:
            cls.tearDownClass()
        return n

    restore()
    before = hits[0]
    exec(tests_code, tns)
    n = 1 if hits[0] > before else 0
    check = tns.get("check")
    if _ep is not None and from_tests(check):
        n += counted(check, ns[_ep])
    for name, obj in _list(tns.items()):
        if name.startswith("test") and from_tests(obj):
            n += run_params(obj)
        elif _TestCase is not None and _isinstance(obj, _type) and _issubclass(obj, _TestCase):
            if _any(from_tests(v) for v in _vars(obj).values()):
                n += run_unittest(obj)
        elif name.startswith("Test") and _isinstance(obj, _type) and _any(from_tests(v) for v in _vars(obj).values()):
            for m in _sorted(_vars(obj)):
                if m.startswith("test") and _callable(_getattr(obj, m)):
                    inst = obj()
                    if hasattr(inst, "setup_method"):
                        inst.setup_method(_getattr(inst, m))
                    n += run_params(_getattr(inst, m))
    verdict(str(n) if n else "FAIL no test ran")
_es_main()
'''


# The tests' instrumentation, shared by the suite (which compiles the trusted tests once, see
# _compiled_tests) and the harness (its fallback when the sandbox's interpreter is another version).
# Every assert and assert*/raises/fail/warns call first counts a hit; single `==`, `!=`, `in`,
# `not in` comparisons go through the harness's `__es_cmp__`.
_INSTRUMENT = r"""
def _es_instrument(tests, ast):
    class Instrument(ast.NodeTransformer):
        def _hit(self, node):
            return ast.copy_location(ast.Call(ast.Name("__es_hit__", ast.Load()), [], []), node)

        def visit_Assert(self, node):
            self.generic_visit(node)
            return [ast.copy_location(ast.Expr(self._hit(node)), node), node]

        def visit_Call(self, node):
            self.generic_visit(node)
            f = node.func
            if isinstance(f, ast.Attribute) and (f.attr.startswith("assert") or f.attr in ("raises", "fail", "warns")):
                return ast.copy_location(ast.BoolOp(ast.Or(), [self._hit(node), node]), node)
            return node

        def visit_Compare(self, node):
            self.generic_visit(node)
            op = type(node.ops[0]).__name__
            if len(node.ops) == 1 and op in ("Eq", "NotEq", "In", "NotIn"):
                return ast.copy_location(ast.Call(ast.Name("__es_cmp__", ast.Load()), [ast.Constant(op), node.left, node.comparators[0]], []), node)
            return node

    tree = Instrument().visit(ast.parse(tests, "tests.py"))
    return compile(ast.fix_missing_locations(tree), "tests.py", "exec", dont_inherit=True)
"""
_instrument_ns: dict = {}
exec(compile(_INSTRUMENT, "<evalsuite-instrument>", "exec", dont_inherit=True), _instrument_ns)


@lru_cache(maxsize=512)
def _compiled_tests(tests: str) -> bytes | None:
    """The instrumented tests as a marshalled code object (the same tests serve many samples).
    None when they do not compile: the harness then fails on them inside the sandbox, as before."""
    try:
        return marshal.dumps(_instrument_ns["_es_instrument"](tests, ast))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _uses_unittest(tests: str) -> bool:
    """Whether the (trusted) tests can reach unittest: only by naming it."""
    return "unittest" in tests or "TestCase" in tests


_HARNESS_NAME = "<evalsuite-harness>"


@lru_cache(maxsize=1)
def _harness_code() -> tuple[str, bytes]:
    """The harness's source and its compiled code, marshalled: compiling it took ~10 ms per run."""
    src = _HARNESS.replace("__ES_INSTRUMENT__", _INSTRUMENT.strip())
    return src, marshal.dumps(compile(src, _HARNESS_NAME, "exec", dont_inherit=True))


def build_harness(program: str, tests: str, entry_point: str | None = None) -> str:
    """The test program: solution and tests run in one process, then the verdict line is written.

    It holds the run's data and the harness compiled by the suite (run when the sandbox's interpreter
    is this one, the usual case), with the harness's source as the fallback for another version.
    """
    shim = _PYTEST_SHIM if "pytest" in tests else ""
    payload = (program, tests, _compiled_tests(tests), sys.hexversion, entry_point, shim, _uses_unittest(tests))
    src, code = _harness_code()
    # the literals on lines of their own: a traceback shows the short `exec` line, not 60 KB of them
    return (
        f"_es_payload = {payload!r}\n"
        f"_es_code = {code!r}\n"
        f"_es_source = {src!r}\n"
        "import marshal, sys\n"
        f"exec(marshal.loads(_es_code) if sys.hexversion == {sys.hexversion} else compile(_es_source, {_HARNESS_NAME!r}, 'exec'))\n"
    )
