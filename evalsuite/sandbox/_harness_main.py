"""The test harness as it runs inside the sandbox: the program, then its tests, then the verdict line.

`harness.build_harness` writes a `main.py` that executes this module's code (compiled once by the
suite, or from this source by another interpreter version) in a namespace of its own named
`SANDBOX_NAME`, not `__main__`: the program cannot reach the harness's functions or the token
through `import __main__`. The suite imports the module only for `instrument`; importing it runs nothing.

Stdlib only and nothing a run does not need (the sandbox interpreter runs with -S, and start-up is
paid once per sample): unittest is imported only when the trusted tests name it (before the program,
so its snapshot is clean), `ast` only when the tests did not arrive compiled. No `from __future__`
import: `compile` of the program and the shim would inherit it.

Why each step:
- the token is read from stdin and stdin closed before the program runs: it is in no file or env;
- the program runs first, in its own namespace; whatever it changed in builtins, sys.modules and
  unittest is put back before the tests and before each test (a patched assertEqual or `abs`
  cannot make a test pass);
- the builtins the harness itself calls are taken when it starts, before the program runs;
- the tests run in a copy of the program's names with their own copy of the builtins;
- every assert, assert*/raises/fail call of the tests file counts as a hit, and a test counts
  as run only if it hit one: zero tests run is a failure ("no test ran"), as is a missing entry point;
- `==`, `!=`, `in` in the tests are decided by the expected value's own equality when the other side's
  equality was written by the program (an object whose __eq__ is always true proves nothing);
- unittest cases are run method by method by the harness itself, so no reporting hook can swallow
  a failure: a failing test raises straight through to the interpreter (exit 1, no verdict);
- untrusted tests (`_main_untrusted_tests`) run in an interpreter of their own, forked before the
  token and the program are read, and the verdict is written here from their report and the calls
  this process passed on to the program.
"""

import builtins
import itertools
import marshal
import os
import sys

#: the `__name__` main.py runs this code under (anything else, an import included, only defines it)
SANDBOX_NAME = "__evalsuite_harness__"

# taken when the harness starts, before the program can replace them
_type, _isinstance, _issubclass, _getattr, _callable, _vars = type, isinstance, issubclass, getattr, callable, vars
_len, _all, _any, _zip, _list, _dict, _tuple, _sorted = len, all, any, zip, list, dict, tuple, sorted
_set, _frozenset, _NotImplemented, _BaseException = set, frozenset, NotImplemented, BaseException
_Function = _type(lambda: None)
_STDLIB = os.path.dirname(os.__file__) + os.sep
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set on classes written in Python, not on C types

#: unittest assertions that get the harness's equality check on top of their own
_GUARDED = (
    "assertEqual",
    "assertNotEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSequenceEqual",
    "assertSetEqual",
    "assertIn",
    "assertNotIn",
)


def instrument(tests, ast):
    """The tests compiled with every assert and assert*/raises/fail/warns call counted (`__es_hit__`)
    and single `==`, `!=`, `in`, `not in` comparisons judged by the harness (`__es_cmp__`).

    Shared by the suite (which compiles the trusted tests once, `harness._compiled_tests`) and the
    harness (its fallback on another interpreter version); `ast` is passed in so that neither imports it
    before it is needed."""

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


class _Run:
    """What the steps of one run share, all taken before the program runs."""

    __slots__ = ("token", "out", "write", "unittest", "test_case", "skip_test", "entry_point", "snapshot", "hits", "failure", "error", "timeout")

    def __init__(self, channel, unittest, entry_point):
        #: the token, stdout as it was (the program may close or redirect fd 1) and os.write as it was
        self.token, self.out, self.write = channel
        self.unittest, self.entry_point = unittest, entry_point
        self.test_case, self.skip_test = (unittest.TestCase, unittest.SkipTest) if unittest is not None else (None, None)
        self.snapshot = _snapshot(unittest)
        self.hits = [0]  #: assertions run so far
        self.failure = self.error = self.timeout = None  #: why the run failed, timed out or could not be judged (isolated runs)


def _read_token():
    """The run's token, the first line of stdin; stdin then reads /dev/null (the program never sees it)."""
    t = sys.stdin.readline().strip()
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    return t


def _verdict(run, text):
    """The last line of stdout: the token and the number of tests run, or FAIL and why."""
    try:
        sys.stdout.flush()
    except _BaseException:
        pass
    text = " ".join(text.splitlines()) or "FAIL the harness has no verdict"  # one line, never blank
    run.write(run.out, ("\n" + run.token + " " + text + "\n").encode())


def _show_sources(program, tests):
    """Tracebacks show the lines of solution.py and tests.py, where linecache is loaded anyway (with
    unittest: traceback needs it); not worth its import otherwise."""
    linecache = sys.modules.get("linecache")
    for fn, text in (("solution.py", program), ("tests.py", tests)):
        if linecache is not None:
            linecache.cache[fn] = (_len(text), None, text.splitlines(True), fn)


def _snapshot(unittest):
    """The builtins, sys.modules and unittest's classes and modules as they are before the program runs."""
    ut = []
    if unittest is not None:
        ut = [
            unittest,
            unittest.case,
            unittest.result,
            unittest.runner,
            unittest.loader,
            unittest.suite,
            unittest.TestCase,
            unittest.TestResult,
            unittest.TestLoader,
            unittest.TestSuite,
            unittest.FunctionTestCase,
        ]
    return _dict(_vars(builtins)), _dict(sys.modules), [(o, _dict(_vars(o))) for o in ut]


def _restore(run):
    """Undo what the program changed in the builtins, sys.modules and unittest."""
    b_snap, mod_snap, ut_snap = run.snapshot
    b = _vars(builtins)
    for k in [k for k in b if k not in b_snap]:
        del b[k]
    b.update(b_snap)
    mods = sys.modules
    for k, v in mod_snap.items():
        if mods.get(k) is not v:
            mods[k] = v
    for o, snap in ut_snap:
        _restore_attributes(o, snap)


def _restore_attributes(o, snap):
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


def _program_eq(t):
    """Whether equality of type t was written by the program (not a C type or the stdlib)."""
    for k in t.__mro__:
        d = _vars(k)
        if "__eq__" in d or "__ne__" in d:
            if not k.__flags__ & _HEAP:
                return False
            f = d["__eq__"] if "__eq__" in d else d["__ne__"]
            code = _getattr(f, "__code__", None)
            if code is not None:
                return not code.co_filename.startswith(_STDLIB)
            return _getattr(f, "__objclass__", None) is not k
    return False


def _eq(a, b, depth=0):
    """`a == b`, unless one side's equality is the program's: then the other side's must agree too."""
    r = a == b
    if not r or depth > 50:
        return r
    pa, pb = _program_eq(_type(a)), _program_eq(_type(b))
    if pa and pb:
        return r
    if pa or pb:
        plain, other = (b, a) if pa else (a, b)
        r2 = _type(plain).__eq__(plain, other)
        if r2 is _NotImplemented or not r2:
            return False
    if _isinstance(a, (_list, _tuple)) and _isinstance(b, (_list, _tuple)):
        return _all(_eq(x, y, depth + 1) for x, y in _zip(a, b))
    if _isinstance(a, _dict) and _isinstance(b, _dict):
        return _all(k in b and _eq(v, b[k], depth + 1) for k, v in a.items())
    if _isinstance(a, (_set, _frozenset)) and _isinstance(b, (_set, _frozenset)):
        if _any(_program_eq(_type(x)) for x in a) or _any(_program_eq(_type(x)) for x in b):
            return _all(_any(_eq(x, y, depth + 1) for y in b) for x in a) and _all(_any(_eq(y, x, depth + 1) for x in a) for y in b)
    return r


def _contains(x, c):
    r = x in c
    if r and _isinstance(c, (_list, _tuple, _set, _frozenset, _dict)):
        return _any(y is x or _eq(y, x) for y in c)
    return r


def _compare(op, a, b):
    """The tests' `==`, `!=`, `in` and `not in` (`__es_cmp__` in the instrumented tests)."""
    if op == "Eq":
        return _eq(a, b)
    if op == "NotEq":
        if not (_program_eq(_type(a)) or _program_eq(_type(b))):
            return a != b
        return not _eq(a, b)
    if op == "In":
        return _contains(a, b)
    return not _contains(a, b)


def _hit_counter(hits):
    def hit():
        hits[0] += 1

    return hit


def _load_tests(tests, tests_code, version):
    """The instrumented tests: as the suite compiled them, or instrumented here on another interpreter version."""
    if tests_code is not None and version == sys.hexversion:
        return marshal.loads(tests_code)
    import ast

    return instrument(tests, ast)


def _tests_namespace(run, ns):
    """The program's names for the tests, less those that shadow a builtin, and a copy of the builtins."""
    ep, b_snap = run.entry_point, run.snapshot[0]
    tns = {k: v for k, v in ns.items() if k == ep or k not in b_snap}
    tns.update({"__name__": "__solution__", "__builtins__": _dict(b_snap), "__es_hit__": _hit_counter(run.hits), "__es_cmp__": _compare})
    return tns


def _from_tests(f):
    return _isinstance(f, _Function) and f.__code__.co_filename == "tests.py"


def _counted(run, /, f, *args, **kw):
    """Call one test; 1 if it hit an assertion, else 0."""
    _restore(run)
    before = run.hits[0]
    f(*args, **kw)
    return 1 if run.hits[0] > before else 0


def _run_params(run, f):
    """One test function, once per combination of its `mark.parametrize` values."""
    params = _getattr(f, "_es_params", None)
    if not params:
        return _counted(run, f)
    grids = [[_dict(_zip(names, v if _len(names) > 1 else (v,))) for v in values] for names, values in params]
    n = 0
    for combo in itertools.product(*grids):
        kw = {}
        for d in combo:
            kw.update(d)
        n += _counted(run, f, **kw)
    return n


def _guarded(inst, name):
    """`inst.<name>` (an assertEqual or assertIn relative), and then the harness's own equality check."""
    orig = _getattr(inst, name)
    negate = "Not" in name

    def check(first, second, *a, **k):
        orig(first, second, *a, **k)
        same = _contains(first, second) if name.endswith("In") else _eq(first, second)
        if same == negate:
            raise inst.failureException(f"{name}: the program's own __eq__ decided this comparison")

    return check


def _run_unittest(run, cls):
    """A unittest.TestCase, method by method; the number of test methods that hit an assertion."""
    if _getattr(cls, "__unittest_skip__", False):
        return 0
    n = 0
    _restore(run)
    cls.setUpClass()
    try:
        for name in run.unittest.TestLoader().getTestCaseNames(cls):
            n += _run_unittest_method(run, cls, name)
    finally:
        cls.tearDownClass()
    return n


def _run_unittest_method(run, cls, name):
    """One test method with its setUp, tearDown and cleanups: 1 if it hit an assertion, else 0.
    A failure raises (an expected failure that passes too), a skip counts 0."""
    inst = cls(name)
    for g in _GUARDED:
        setattr(inst, g, _guarded(inst, g))
    method = _getattr(inst, name)
    if _getattr(method, "__unittest_skip__", False):
        return 0
    expecting = _getattr(method, "__unittest_expecting_failure__", False)
    _restore(run)
    before = run.hits[0]
    try:
        inst.setUp()
        try:
            method()
        finally:
            inst.tearDown()
            inst.doCleanups()
    except run.skip_test:
        return 0
    except _BaseException:
        if not expecting:
            raise
        return 0
    if expecting:
        raise AssertionError(f"{cls.__name__}.{name}: expected to fail, passed")
    return 1 if run.hits[0] > before else 0


def _run_test_class(run, cls):
    """A pytest-style `Test*` class: a fresh instance per `test*` method (with its `setup_method`)."""
    n = 0
    for m in _sorted(_vars(cls)):
        if m.startswith("test") and _callable(_getattr(cls, m)):
            inst = cls()
            if hasattr(inst, "setup_method"):
                inst.setup_method(_getattr(inst, m))
            n += _run_params(run, _getattr(inst, m))
    return n


def _run_tests(run, tests_code, tns, ns):
    """The tests file's body, `check(candidate)`, then its test functions and classes; the number of
    tests that hit an assertion (a failing one raises)."""
    _restore(run)
    before = run.hits[0]
    exec(tests_code, tns)
    n = 1 if run.hits[0] > before else 0
    ep, check = run.entry_point, tns.get("check")
    if ep is not None and _from_tests(check):
        n += _counted(run, check, ns[ep])
    test_case = run.test_case
    for name, obj in _list(tns.items()):
        if name.startswith("test") and _from_tests(obj):
            n += _run_params(run, obj)
        elif test_case is not None and _isinstance(obj, _type) and _issubclass(obj, test_case):
            if _any(_from_tests(v) for v in _vars(obj).values()):
                n += _run_unittest(run, obj)
        elif name.startswith("Test") and _isinstance(obj, _type) and _any(_from_tests(v) for v in _vars(obj).values()):
            n += _run_test_class(run, obj)
    return n


def _run_uids():
    """(harness, program, tests): the uids this run's interpreters take, where the harness started as
    root (`isolation._exec_program` passes them as arguments); None where it started as its own uid."""
    args = sys.argv[1:4]
    return _tuple(int(a) for a in args) if _len(args) == 3 else None


def _become(uids, which):
    """Take the run's uid number `which` for good (dropping root's capabilities with it): the harness
    once it has forked the other interpreters, each of those before anything of the run is in it.

    The real and saved uid (and gid) are the interpreter's own: they decide who may signal, trace or
    read it, and none of the three may touch another (the harness may signal the program, to stop
    it). The effective uid, the one files are made and opened with, is the program's in all three:
    a file the tests make for the program is the program's to read, as in one interpreter."""
    if uids is not None:
        uid, files = uids[which], uids[1]
        os.setgroups([])
        os.setresgid(uid, files, uid)
        os.setresuid(uid, files, uid)


def main(payload):
    """Run the program, then its tests; the verdict line comes last, and only if the harness got there."""
    _collect_again()
    program, tests, tests_code, version = payload["program"], payload["tests"], payload["tests_code"], payload["version"]
    ep, shim, use_unittest, isolated = payload["entry_point"], payload["shim"], payload["unittest"], payload["isolated"]
    uids = _run_uids()
    if isolated is None:
        _become(uids, 0)  # the program runs here: nothing of root may be left to it
    # the program's interpreter first, so that it never holds the token or the verdict's way out
    prog = _start_program(isolated, version, uids) if isolated is not None else None
    if isolated is not None and isolated["untrusted_tests"]:
        _main_untrusted_tests(payload, prog, uids)
        return
    if isolated is not None:
        _become(uids, 0)
    channel = (_read_token(), os.dup(1), os.write)  # then the verdict's token and way out
    unittest = None
    if use_unittest:
        import unittest
    _show_sources(program, tests)
    run = _Run(channel, unittest, ep)
    tests_code = _load_tests(tests, tests_code, version)
    if isolated is not None:
        _main_isolated(run, program, tests_code, shim, prog)
        return
    ns = {"__name__": "__solution__", "__builtins__": builtins}
    exec(compile(program, "solution.py", "exec"), ns)
    _restore(run)
    if ep is not None and ep not in ns:
        _verdict(run, f"FAIL entry point {ep!r} not defined")
        return
    if shim:
        exec(compile(shim, "pytest_shim.py", "exec"), {})
    n = _run_tests(run, tests_code, _tests_namespace(run, ns), ns)
    _verdict(run, str(n) if n else "FAIL no test ran")


# ----------------------------------------------------------------------------------------------
# Isolated runs: the program in an interpreter of its own (`_program_main`), called over `_wire`
# ----------------------------------------------------------------------------------------------

_OUT_FILE = "program.out"  #: the program's stdout (`_program_main._OUT_FILE`)


class _Stop(BaseException):
    """Ends the tests at once: the run's verdict is decided (`_Run.failure` or `_Run.error`)."""


_exc_classes: dict = {}  #: exception types made for names the program raised, by name


def _exc_class(name):
    """The exception type the tests see for one the program raised: the builtin of that name, or
    a subclass of Exception made here with that name (`raises` by name still works)."""
    b = _getattr(builtins, name, None) if _isinstance(name, str) else None
    if _isinstance(b, _type) and _issubclass(b, _BaseException):
        return b
    name = name if _isinstance(name, str) and name.isidentifier() else "ProgramError"
    if name not in _exc_classes:
        _exc_classes[name] = _type(name, (Exception,), {"__module__": "solution"})
    return _exc_classes[name]


def _raise_as(name, msg):
    cls = _exc_class(name)
    try:
        exc = cls(msg)
    except _BaseException:
        exc = _exc_class(name + "_")(msg)  # a builtin that wants other arguments (UnicodeDecodeError)
    raise exc


def _program_child(req_r, resp_w, close, wire, program_code, uids):
    """The forked child that becomes the program's interpreter (`_program_main`); never returns.

    Forked before the run's token is read and before any test runs: it holds no way to the verdict
    (its stdin and stdout become the channel, the run's stdout is never in it) and nothing of the
    tests' interpreter that the program could change. It runs as a uid of its own, not the harness's."""
    code = 1
    try:
        _child_signals()
        os.dup2(req_r, 0)
        os.dup2(resp_w, 1)
        for fd in (req_r, resp_w, *close, *_wake):
            os.close(fd)
        _become(uids, 1)
        g = {"__name__": "__evalsuite_program__"}
        exec(program_code, g)
        g["main"](wire)
        code = 0
    finally:
        os._exit(code)


class _Program:
    """An interpreter forked by the harness, as the harness holds it: a pid, the channel, its stdout
    file. The program's (`_program_child`), or the tests' where they are untrusted (`_tests_child`)."""

    __slots__ = ("run", "wire", "pid", "wout", "rin", "outfd", "poller", "label")

    def __init__(self, wire, child, out_file=_OUT_FILE, label="program's", uid=None):
        self.run, self.wire, self.label = None, wire, label
        req_r, self.wout = os.pipe()
        self.rin, resp_w = os.pipe()
        os.close(os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        if uid is not None:
            os.chown(out_file, uid, uid)  # the child writes it as its own uid
        self.outfd = os.open(out_file, os.O_RDONLY)
        self.pid = os.fork()
        if self.pid == 0:
            child(req_r, resp_w, (self.wout, self.rin, self.outfd))
        os.close(req_r)
        os.close(resp_w)
        self._watch(self.pid)

    def _watch(self, pid):
        """Poll the channel and, where the other side is our child, the SIGCHLD wake-up pipe (pidfds
        are among the calls the sandbox's filter denies)."""
        import select

        self.poller = select.poll()
        self.poller.register(self.rin, select.POLLIN)
        if _wake:
            self.poller.register(_wake[0], select.POLLIN)

    def wait_reply(self):
        """Until a reply starts or the program's interpreter has ended (EOFError), whoever else holds the channel."""
        while True:
            ready = [fd for fd, _ in self.poller.poll()]
            if self.rin in ready:
                return
            if _wake and _wake[0] in ready:
                os.read(_wake[0], 512)
                if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    raise EOFError("the program's interpreter ended")

    def forward(self):
        """What the program printed since the last look, into the run's stdout (in order with the tests')."""
        chunks = []
        while True:
            b = os.read(self.outfd, 1 << 16)
            if not b:
                break
            chunks.append(b)
        if chunks:
            sys.stdout.flush()
            data = b"".join(chunks)
            while data:
                data = data[os.write(1, data) :]

    def exchange(self, msg, what):
        """Send `msg`, return the reply; the run fails (or errs) when the channel cannot carry it."""
        run, wire = self.run, self.wire
        if run.failure or run.error:
            raise _Stop()
        try:
            wire["send"](self.wout, msg)
        except wire["WireError"] as exc:
            run.error = f"{what}: an argument is not plain data ({exc}); the case needs isolation: shared"
            raise _Stop() from None
        except OSError:
            pass  # the program's interpreter is gone: the reply says so
        try:
            self.wait_reply()
            reply = wire["recv"](self.rin)
        except (EOFError, OSError):
            run.failure = f"exited before the verdict (the program's interpreter ended during {what}: {self.ended()})"
            raise _Stop() from None
        except wire["WireError"] as exc:
            run.failure = f"the program's interpreter sent a bad reply during {what}: {exc}"
            raise _Stop() from None
        except MemoryError:  # the reply's doing (`_wire` bounds what it decodes to): not an error
            run.failure = f"the program's interpreter sent a reply to {what} that the harness has no memory for"
            raise _Stop() from None
        finally:
            self.forward()
        if _type(reply) is not wire["Message"]:
            run.failure = f"the program's interpreter sent a bad reply during {what}"
            raise _Stop()
        return reply

    def ended(self):
        """How the program's interpreter ended ("exit 0", "signal SIGSEGV"), once it has; past its CPU
        limit the run is a timeout (`_Run.timeout`), as a program in the tests' interpreter would be."""
        try:
            _, status, usage = os.wait4(self.pid, 0)
        except OSError:
            return "ended"
        code = os.waitstatus_to_exitcode(status)
        if code >= 0:
            return f"exit {code}"
        import resource
        import signal

        cpu, limit = usage.ru_utime + usage.ru_stime, resource.getrlimit(resource.RLIMIT_CPU)[0]
        if -code == signal.SIGXCPU or (-code == signal.SIGKILL and limit >= 0 and cpu >= limit - 0.05):
            self.run.timeout = f"cpu limit ({limit} s, in the {self.label} interpreter)"
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"

    def raised(self, name, msg, what):
        """The program raised `name`: raise it here, or end the run where it meant leaving (sys.exit)."""
        if name == "SystemExit":
            self.run.failure = f"exited before the verdict (the program called sys.exit during {what})"
            raise _Stop()
        _raise_as(name, msg)

    def call(self, name, args, kw):
        reply = self.exchange(self.wire["Message"]("call", name=name, args=args, kw=kw), f"{name}()")
        kind = reply.kind
        if kind == "ok" and _type(reply.args) is tuple and _type(reply.kw) is dict:
            _sync(_list(args), _list(reply.args))
            _sync(kw, reply.kw)
            return reply.value
        if kind == "ok":
            return reply.value
        if kind == "raise":
            self.raised(reply.type, reply.message, f"{name}()")
        ok = kind == "object" and _type(reply.why) is str
        # the program's words, quoted: its reason is never the verdict line's own text
        self.run.failure = f"the program's interpreter said: {reply.why!r}" if ok else f"bad reply to {name}(): a {kind!r} message"
        raise _Stop()

    def close(self):
        """Kill the program's interpreter and collect the last of its output."""
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except OSError:
            pass  # already reaped (`ended`)
        self.forward()


def _sync(old, new, depth=0):
    """Make `old` (an argument the tests passed) what the program's call left its copy as, in place,
    as a call in one interpreter would have; False where that takes replacing `old` (immutable, or
    of another type now)."""
    t = _type(old)
    if t is not _type(new) or depth > 100:
        return False
    if t is _list:
        for i in range(min(_len(old), _len(new))):
            if old[i] is not new[i] and not _sync(old[i], new[i], depth + 1):
                old[i] = new[i]
        del old[_len(new) :]
        old.extend(new[_len(old) :])
        return True
    if t is _dict:
        for k in [k for k in old if k not in new]:
            del old[k]
        for k, v in new.items():
            if k not in old or not _sync(old[k], v, depth + 1):
                old[k] = v
        return True
    if t is _set:
        old.clear()
        old.update(new)
        return True
    return False


def _proxy(program, name):
    """What the tests call for one of the program's callables."""

    def call(*args, **kw):
        return program.call(name, args, kw)

    call.__name__ = call.__qualname__ = name
    return call


def _isolated_names(program, kinds):
    """The program's names as the tests see them: proxies, plain values, exception types, stdlib modules."""
    ns = {}
    for name, kind in kinds.items():
        if _type(name) is not str or _type(kind) is not tuple or not kind:
            continue
        if kind[0] == "call":
            ns[name] = _proxy(program, name)
        elif kind[0] == "value" and _len(kind) == 2:
            ns[name] = kind[1]
        elif kind[0] == "exception" and _len(kind) == 2:
            ns[name] = _exc_class(kind[1])
        elif kind[0] == "module" and _len(kind) == 2 and _type(kind[1]) is str:
            try:
                ns[name] = __import__(kind[1])
            except _BaseException:
                pass
    return ns


_wake: list = []  #: the pipe a SIGCHLD writes to (read end, write end), once the harness forks


def _watch_children():
    """Wake the harness's polls when one of its children ends (`_signal`: no enum import). Called
    before the harness forks: `select`, which `_Program` polls with, is imported here too, since an
    import after a fork writes to pages the child still shares (~1 ms of copying a run)."""
    import _signal
    import select  # noqa: F401 - see above

    _wake.extend(os.pipe())
    os.set_blocking(_wake[1], False)
    _signal.set_wakeup_fd(_wake[1])
    _signal.signal(_signal.SIGCHLD, lambda *_: None)


def _child_signals():
    """In a forked child: the harness's SIGCHLD handling is not its own."""
    import _signal

    _signal.set_wakeup_fd(-1)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)


def _start_program(isolated, version, uids):
    """The program's interpreter, forked (its code compiled here on another interpreter version);
    the OSError that stopped it, if it could not start."""
    codes, wire_src, prog_src, names = isolated["codes"], isolated["wire_source"], isolated["program_source"], isolated["names"]
    _watch_children()
    if version != sys.hexversion:
        w = compile(wire_src, "<evalsuite-wire>", "exec", dont_inherit=True)
        codes = marshal.dumps((w, compile(prog_src, "<evalsuite-program>", "exec", dont_inherit=True)))
    wire = {"__name__": "_wire"}
    wire_code, program_code = marshal.loads(codes)  # both here, before the fork: the child does not unmarshal again
    exec(wire_code, wire)
    try:
        uid = uids[1] if uids is not None else None
        return _Program(wire, lambda req_r, resp_w, close: _program_child(req_r, resp_w, close, wire, program_code, uids), uid=uid), names
    except OSError as exc:
        return exc, names


def _main_isolated(run, program, tests_code, shim, started):
    """The tests here, the program in its own interpreter; the verdict from here only."""
    prog, names = started
    if _isinstance(prog, OSError):
        _verdict(run, f"ERROR the program's sandbox did not start: {prog}")
        return
    prog.run = run
    n = 0
    try:
        kinds = _load(run, prog, program, names)
        if shim:
            exec(compile(shim, "pytest_shim.py", "exec"), {})
        ns = _isolated_names(prog, kinds)
        tns = _tests_namespace(run, ns)
        n = _run_tests(run, tests_code, tns, ns)
    except _Stop:
        pass
    finally:
        prog.close()
    if run.error:
        _verdict(run, "ERROR " + run.error)
    elif run.timeout:
        _verdict(run, "TIMEOUT " + run.timeout)
    elif run.failure:
        _verdict(run, "FAIL " + run.failure)
    else:
        _verdict(run, str(n) if n else "FAIL no test ran")


# ----------------------------------------------------------------------------------------------
# Untrusted tests (test-writing cases): the tests in an interpreter of their own too
# ----------------------------------------------------------------------------------------------

_TESTS_OUT = "tests.out"  #: the tests' stdout, where they are untrusted


def _close_all_but(keep):
    """Close every file descriptor of this process but those in `keep`."""
    lo, hi = 0, os.sysconf("SC_OPEN_MAX")
    for k in _sorted(keep):
        if lo < k:  # never an empty range: closerange(0, 0) closes every descriptor
            os.closerange(lo, k)
        lo = k + 1
    os.closerange(lo, hi)


class _Relay(_Program):
    """The program as the untrusted tests' interpreter holds it: every call goes to the harness, which
    passes it on to the program's interpreter; this side holds neither the program nor its process."""

    __slots__ = ()

    def __init__(self, wire, rin, wout):
        self.run, self.wire, self.label = None, wire, "harness's"
        self.rin, self.wout, self.outfd, self.pid = rin, wout, -1, os.getppid()
        self._watch(self.pid)  # not our child: its end is the channel's end

    def exchange(self, msg, what):
        _flush_stdout()  # what the tests printed before the call comes before what the program prints
        return _Program.exchange(self, msg, what)

    def forward(self):
        pass  # the harness copies this interpreter's output

    def ended(self):
        return "the harness ended"

    def close(self):
        pass


def _flush_stdout():
    try:
        sys.stdout.flush()
    except _BaseException:
        pass


def _tests_side(payload, wire, rin, wout):
    """The untrusted tests' run: the program's names from the harness, the tests, then a report of
    (tests run, why not passed) for the harness to judge. Returns the exit status."""
    tests, tests_code, version, ep, shim = payload["tests"], payload["tests_code"], payload["version"], payload["entry_point"], payload["shim"]
    unittest = None
    if payload["unittest"]:
        import unittest
    run = _Run((None, -1, None), unittest, ep)
    relay = _Relay(wire, rin, wout)
    relay.run = run
    tests_code = _load_tests(tests, tests_code, version)
    ready = wire["recv"](rin)
    kinds = ready.kinds if _type(ready) is wire["Message"] and ready.kind == "ready" and _type(ready.kinds) is dict else {}
    if shim:
        exec(compile(shim, "pytest_shim.py", "exec"), {})
    ns = _isolated_names(relay, kinds)
    n = 0
    try:
        n = _run_tests(run, tests_code, _tests_namespace(run, ns), ns)
    except _Stop:
        pass
    _flush_stdout()  # before the report: the harness stops this interpreter once it has it
    wire["send"](wout, wire["Message"]("done", tests_run=n, why=run.failure or run.error or run.timeout))
    return 0


def _tests_child(req_r, resp_w, payload, wire, uids):
    """The forked child that runs the untrusted tests; never returns. Forked before the harness reads
    the token and the program: it holds neither, nor the run's stdout (its own goes to a file the
    harness copies), nor any way to the program's interpreter but through the harness."""
    code = 1
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        fd = os.open(_TESTS_OUT, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 1)
        _child_signals()
        _close_all_but((0, 1, 2, req_r, resp_w))
        _wake.clear()
        _become(uids, 2)
        code = _tests_side(payload, wire, req_r, resp_w)
    except SystemExit as exc:
        code = exc.code if _type(exc.code) is int else 0 if exc.code is None else 1
    except _BaseException as exc:
        # a failing test: its traceback as the other modes show one, through sys.excepthook (the
        # interpreter's own display: importing `traceback` here took ~10 ms, most of a failing run's time)
        sys.excepthook(_type(exc), exc, exc.__traceback__)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _read_stdin():
    """The run's token and the program: all of stdin (the program is not in main.py, which the tests
    can read); stdin then reads /dev/null."""
    chunks = []
    while True:
        b = os.read(0, 1 << 16)
        if not b:
            break
        chunks.append(b)
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    token, _, program = b"".join(chunks).partition(b"\n")
    return token.decode().strip(), program.decode("utf-8", "surrogatepass")


def _is_call(msg, wire):
    return _type(msg) is wire["Message"] and msg.kind == "call" and _type(msg.name) is str and _type(msg.args) is tuple and _type(msg.kw) is dict


def _relay(run, prog, tests, kinds):
    """Pass the tests' calls on to the program until the tests report: their (tests run, why not
    passed), or None where their interpreter ended without a report. `run.hits` counts the calls
    that reached one of the program's callables."""
    wire = tests.wire
    while True:
        try:
            tests.wait_reply()
            msg = wire["recv"](tests.rin)
        except (EOFError, OSError):
            return None
        except (wire["WireError"], MemoryError) as exc:
            run.failure = f"the tests' interpreter sent what the harness does not take: {type(exc).__name__}"
            raise _Stop() from None
        finally:
            tests.forward()
        if _is_call(msg, wire):
            if kinds.get(msg.name) == ("call",):
                run.hits[0] += 1
            reply = prog.exchange(msg, f"{msg.name}()")
            try:
                wire["send"](tests.wout, reply)
            except OSError:
                pass  # the tests' interpreter is gone: the next read says so
        elif _type(msg) is wire["Message"] and msg.kind == "done":
            return (msg.tests_run, msg.why)
        else:
            run.failure = "the tests' interpreter sent a message the harness does not know"
            raise _Stop()


def _load(run, prog, program, names):
    """Load the program in its interpreter: {name: kind} of the names the tests reference. Raises
    what the program raised while loading, or stops the run where the entry point is missing."""
    reply = prog.exchange(prog.wire["Message"]("load", program=program, names=names), "loading")
    if reply.kind == "load_error":
        prog.close()
        prog.raised(reply.type, reply.message, "loading")
    kinds = reply.kinds if reply.kind == "ready" and _type(reply.kinds) is dict else {}
    ep = run.entry_point
    if ep is not None and ep not in kinds:
        run.failure = f"entry point {ep!r} not defined"
        raise _Stop()
    return kinds


def _load_for_tests(run, prog, program, names, tests):
    """Load the program in its interpreter and tell the tests its names; {name: kind}."""
    kinds = _load(run, prog, program, names)
    try:
        tests.wire["send"](tests.wout, tests.wire["Message"]("ready", kinds=kinds))
    except OSError:
        pass  # the tests' interpreter is gone: the relay says so
    return kinds


def _judge_report(run, report, kinds, tests):
    """The verdict's text from the tests' report and what the harness itself saw; an int where the
    tests' interpreter ended with an error status of its own (a test failed), which the harness then
    exits with, as the tests' interpreter would have in the other modes.

    Nothing here is an `error`: once the tests have run, whatever stopped the run may be their doing
    (an argument that cannot cross, a reply too large for the harness), and an error is never scored."""
    if run.error:
        return "FAIL " + run.error
    if report is None and not (run.failure or run.timeout):
        try:
            os.kill(tests.pid, 9)  # where it closed the channel and lives on; an exit status stays as it was
        except OSError:
            pass
        how = tests.ended()
        if not run.timeout:
            if how.startswith("exit ") and how != "exit 0":
                return int(how[5:])
            run.failure = f"exited before the verdict (the tests' interpreter ended without its report: {how})"
    if run.timeout:
        return "TIMEOUT " + run.timeout
    if run.failure:
        return "FAIL " + run.failure
    n, why = report
    if why is not None or _type(n) is not int:
        return "FAIL " + (f"the tests' interpreter said: {why!r}" if _type(why) is str else "the tests' interpreter sent a bad report")
    if n <= 0:
        return "FAIL no test ran"
    if run.hits[0] == 0 and ("call",) in kinds.values():
        return "FAIL no test called the code under test"
    return str(n)


def _main_untrusted_tests(payload, started, uids):
    """Untrusted tests: they run in an interpreter of their own, forked before the harness reads the
    token and the program, and call the program through the harness; the verdict is this process's,
    from their report and what it saw pass between them."""
    ep = payload["entry_point"]
    prog, names = started
    tproc = prog
    if not _isinstance(prog, OSError):
        wire = prog.wire
        try:
            uid = uids[2] if uids is not None else None
            tproc = _Program(wire, lambda req_r, resp_w, close: _tests_child(req_r, resp_w, payload, wire, uids), _TESTS_OUT, "tests'", uid)
        except OSError as exc:
            tproc = exc
    _become(uids, 0)
    token, program = _read_stdin()  # only now: the tests' interpreter holds neither
    run = _Run((token, os.dup(1), os.write), None, ep)
    if _isinstance(tproc, OSError):
        if not _isinstance(prog, OSError):
            prog.close()
        _verdict(run, f"ERROR the sandbox of the program or of the tests did not start: {tproc}")
        return
    prog.run = tproc.run = run
    report, kinds = None, {}
    try:
        kinds = _load_for_tests(run, prog, program, names, tproc)
        report = _relay(run, prog, tproc, kinds)
    except _Stop:
        pass
    except _BaseException:  # the program raised while loading: it fails as in the other modes
        tproc.close()
        raise
    finally:
        prog.close()
    text = _judge_report(run, report, kinds, tproc)
    tproc.close()
    if _type(text) is int:  # a test failed the usual way (an assertion): exit as the tests' interpreter did
        sys.stdout.flush()
        os._exit(text)
    _verdict(run, text)


def _collect_again():
    """The garbage collector back on: main.py turns it off while the harness loads (its objects made
    a collection or two, each walking them all, for nothing). Not `gc.freeze`: the tests of an
    isolated run see what a collection sees (`gc.get_objects`), the run's data included, as before."""
    import gc

    gc.enable()


def _may_leave_now(payload):
    """Whether the harness may end with `os._exit`, skipping the interpreter's shutdown (freeing every
    object and module: ~2 ms a run): only where the program runs in an interpreter of its own (its
    objects are not here), nothing could still run at shutdown (no atexit callback, no thread) and
    stdout flushes (else the interpreter's own exit reports that)."""
    if payload["isolated"] is None or "threading" in sys.modules:
        return False
    import atexit

    if atexit._ncallbacks():
        return False
    try:
        sys.stdout.flush()
    except _BaseException:
        return False
    return True


def _leave(code):
    try:
        sys.stderr.flush()
    except _BaseException:
        pass
    os._exit(code)


if __name__ == SANDBOX_NAME:
    try:
        main(globals()["_es_payload"])
    except Exception as _exc:
        # a failing test (an assertion) ends the run as an uncaught exception ends the interpreter:
        # its traceback through sys.excepthook, exit status 1
        if not _may_leave_now(globals()["_es_payload"]):
            raise
        sys.excepthook(_type(_exc), _exc, _exc.__traceback__)
        _leave(1)
    if _may_leave_now(globals()["_es_payload"]):
        _leave(0)
