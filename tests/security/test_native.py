"""Native code and malformed replies against the verdict (issue 40).

Each program is a wrong answer to `add(a, b)` (it returns 0) with an attack on the harness:

- native helpers (built here with the machine's gcc, or compiled by the program inside the sandbox)
  that read the harness's memory for the token (`process_vm_readv`), take its stdout (`pidfd_open`
  + `pidfd_getfd`), write a verdict line and make it `exit_group(0)` (`ptrace`);
- probes of each of those primitives on the harness, which must all be refused;
- replies on the program's own channel: a blank or malformed failure reason, a reply that decodes
  to far more memory than it takes on the wire.

Each must end `failed` or `timeout`, through `run_tests` and through the `code.pass` scorer.
`FORGED_BEFORE` records which of them forged a pass on the code before this change (run there).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

from evalsuite import sandbox
from evalsuite.cases.caseset import Case, Expect
from evalsuite.scoring import SCORERS, ScoreInput
from evalsuite.scoring import code as _code  # noqa: F401 - registers the code scorers

ENTRY = "add"
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 5) == 7\ncheck(add)\n"
LIMITS = {"timeout_s": 20.0}
HELPER_C = (Path(__file__).parent / "native_helper.c").read_text()
GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not on this machine: the native helpers cannot be built")

#: what forged a pass (status "passed") on the code before this change, recorded by running each there:
#: the three native forgers also scored 1.0 in `code.pass`; the memory flood ended `error` (unscored).
#: (The replies were then tuples, `("object", " ")`; they are `Message`s now, sent the same way.)
FORGED_BEFORE = {"compiled helper", "memfd helper", "extension module", "blank reason", "newline reason"}

# the program's prelude: run the attack once, on the first call, then answer wrongly
_ONCE = (
    "import os, sys\n_done = []\n"
    "def _seeds():\n    return [hex(id(object())), hex(id('x' * 100000)), hex(id(sys))]\n"
    "def _spawn(exe, mode):\n    target = os.getppid()\n    pid = os.fork()\n    if pid == 0:\n"
    "        try:\n            os.execve(exe, ['helper', mode, str(target)] + _seeds(), {})\n"
    "        finally:\n            os._exit(127)\n    os.waitpid(pid, 0)\n"
    "def add(a, b):\n    if not _done:\n        _done.append(1)\n        _attack()\n    return 0\n"
)


def _compiled_in_sandbox(mode: str) -> str:
    return _ONCE + (
        f"_SRC = {HELPER_C!r}\n"
        "def _attack():\n    with open('h.c', 'w') as fh:\n        fh.write(_SRC)\n"
        "    if os.system('gcc -O1 -o h h.c') == 0:\n"
        f"        _spawn(os.path.abspath('h'), {mode!r})\n"
    )


def _memfd(binary: bytes, mode: str) -> str:
    return _ONCE + (
        f"_BIN = {base64.b64encode(binary).decode()!r}\n"
        "def _attack():\n    import base64\n    fd = os.memfd_create('h', 0)\n    os.write(fd, base64.b64decode(_BIN))\n"
        f"    _spawn(fd, {mode!r})\n"
    )


def _extension(lib: bytes) -> str:
    return _ONCE + (
        f"_LIB = {base64.b64encode(lib).decode()!r}\n"
        "def _attack():\n    import base64, importlib.util\n    path = os.path.abspath('ext.so')\n"
        "    with open(path, 'wb') as fh:\n        fh.write(base64.b64decode(_LIB))\n"
        "    try:\n        importlib.util.module_from_spec(importlib.util.spec_from_file_location('ext', path))\n"
        "    except BaseException as exc:\n        print('load:', type(exc).__name__, exc)\n"
    )


# the program writes its own reply on its channel (whatever descriptor takes it), then waits
_OWN_REPLY = (
    "import os\n"
    "def _s(x):\n    b = x.encode()\n    return b's' + len(b).to_bytes(4, 'big') + b\n"
    "def _send(body):\n    msg = len(body).to_bytes(4, 'big') + body\n    for fd in range(3, 64):\n"
    "        try:\n            os.write(fd, msg)\n            break\n        except OSError:\n            pass\n"
    "    r, _ = os.pipe()\n    os.read(r, 1)\n"
)


def _reason_reply(reason: str) -> str:
    return _OWN_REPLY + f"def add(a, b):\n    _send(b'M' + _s('object') + _s({reason!r}))\n"


# Message("ok", value=[set()] * 3_000_000, args=None, kw=None): 15 MB on the wire, over 600 MB once decoded
_FLOOD = _OWN_REPLY + ("def add(a, b):\n    n = 3_000_000\n    _send(b'M' + _s('ok') + b'l' + n.to_bytes(4, 'big') + b'S\\x00\\x00\\x00\\x00' * n + b'NN')\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The helper as an executable and as a shared library, built with gcc on this machine."""
    if GCC is None:
        return {}
    d = tmp_path_factory.mktemp("native")
    src = d / "h.c"
    src.write_text(HELPER_C)
    subprocess.run([GCC, "-O1", "-o", str(d / "h"), str(src)], check=True)
    subprocess.run([GCC, "-O1", "-shared", "-fPIC", "-DAS_LIB", "-o", str(d / "h.so"), str(src)], check=True)
    return {"exe": (d / "h").read_bytes(), "lib": (d / "h.so").read_bytes()}


def _program(name: str, built: dict) -> str:
    makers = {
        "compiled helper": lambda: _compiled_in_sandbox("forge"),
        "memfd helper": lambda: _memfd(built["exe"], "forge"),
        "extension module": lambda: _extension(built["lib"]),
        "probes from a memfd helper": lambda: _memfd(built["exe"], "probe"),
        "blank reason": lambda: _reason_reply(" "),
        "empty reason": lambda: _reason_reply(""),
        "newline reason": lambda: _reason_reply("\n"),
        "reason with a fake count": lambda: _reason_reply("x\n3"),
        "memory flood": lambda: _FLOOD,
    }
    return makers[name]()


NATIVE = ["compiled helper", "memfd helper", "extension module", "probes from a memfd helper"]
REPLIES = ["blank reason", "empty reason", "newline reason", "reason with a fake count", "memory flood"]


def _score(program: str):
    case = Case(id="add", scenario="code", kind="completion", prompt="Write add(a, b).", expect=Expect(entry_point=ENTRY, tests=TESTS))
    inp = ScoreInput(case=case, text=f"```python\n{program}```", sample=0, variant="v", error=None)
    (score,) = SCORERS.get("code.pass").fn(inp)
    return score


@needs_gcc
@pytest.mark.parametrize("name", NATIVE)
def test_native_attack_is_a_failure(name, built):
    res = sandbox.run_tests(_program(name, built), TESTS, ENTRY, **LIMITS)
    assert res.status in ("failed", "timeout"), (name, res.status, res.reason, res.stdout[-500:], res.stderr[-800:])
    assert res.tests_run is None


@needs_gcc
def test_every_primitive_on_the_harness_is_refused(built):
    """The probe tries each primitive on the harness once: each is refused (EPERM, or ESRCH where
    the harness is out of sight), none is `ok`."""
    res = sandbox.run_tests(_program("probes from a memfd helper", built), TESTS, ENTRY, **LIMITS)
    seen = dict(line.split(": ", 1) for line in res.stdout.splitlines() if ": " in line)
    for primitive in ("process_vm_readv", "pidfd_getfd", "ptrace_seize", "ptrace_attach", "kill_0"):
        assert seen.get(primitive) in ("EPERM", "ESRCH", "EACCES"), (primitive, seen, res.stderr[-500:])


@pytest.mark.parametrize("name", REPLIES)
def test_malformed_reply_is_a_failure(name):
    res = sandbox.run_tests(_program(name, {}), TESTS, ENTRY, **LIMITS)
    assert res.status == "failed", (name, res.status, res.reason, res.stderr[-500:])
    assert res.reason, name


def test_flood_names_the_bound():
    res = sandbox.run_tests(_FLOOD, TESTS, ENTRY, **LIMITS)
    assert res.status == "failed" and "decodes to over" in res.reason, (res.status, res.reason)


def test_blank_reason_is_quoted_as_the_programs():
    res = sandbox.run_tests(_reason_reply(" "), TESTS, ENTRY, **LIMITS)
    assert res.status == "failed" and "' '" in res.reason and "program" in res.reason, res.reason


@pytest.mark.parametrize("name", NATIVE + REPLIES)
def test_code_pass_scores_the_attack_zero(name, built):
    if name in NATIVE and GCC is None:
        pytest.skip("gcc is not on this machine: the native helpers cannot be built")
    score = _score(_program(name, built))
    assert score.value == 0.0 and score.details["status"] in ("failed", "timeout"), (name, score.details)


# ---------------------------------------------------------------------------------------------
# each layer on its own
# ---------------------------------------------------------------------------------------------

ROOT_NS = sandbox.isolation_summary()["root"] and sandbox.isolation_summary()["isolation"].startswith("namespaces")
FILTERED = bool(sandbox.isolation_summary().get("seccomp"))


@pytest.mark.skipif(not sandbox.isolation_summary()["root"], reason="only root gives the program and the tests uids of their own")
def test_the_program_and_the_tests_run_under_uids_of_their_own():
    """The harness, the program's interpreter and the tests' each have their own uid (SandboxResult.uids)."""
    prog = "import os\ndef add(a, b):\n    print('program', os.getuid(), os.getgid(), os.getgroups())\n    return a + b\n"
    tests = "import os\nprint('tests', os.getuid(), os.getgid())\ndef test_add():\n    assert add(1, 2) == 3\n"
    res = sandbox.run_tests(prog, tests, ENTRY, isolation="tests", **LIMITS)
    harness, program, tested = res.uids
    assert res.status == "passed" and res.uid == harness and len({harness, program, tested}) == 3, res
    assert f"program {program} {program} []" in res.stdout and f"tests {tested} {tested}" in res.stdout, res.stdout
    assert f"+uids {harness}/{program}/{tested}" in res.isolation


@pytest.mark.skipif(not FILTERED, reason="libseccomp is not on this machine")
def test_a_denied_call_fails_with_eperm_and_the_program_goes_on():
    """The filter refuses, it does not kill: honest code that probes for a call still runs."""
    code = (
        "import os\nfor name, call in [('pidfd_open', lambda: os.pidfd_open(os.getpid()))]:\n"
        "    try:\n        call()\n        print(name, 'ok')\n    except OSError as exc:\n        print(name, exc.errno)\nprint('still here')\n"
    )
    res = sandbox.run_python(code, timeout_s=10)
    assert res.status == "passed" and res.stdout.split("\n")[:2] == ["pidfd_open 1", "still here"], (res.stdout, res.stderr)
    assert res.isolation.endswith("+seccomp") and "seccomp" not in " ".join(res.warnings)


@needs_gcc
@pytest.mark.skipif(not FILTERED, reason="libseccomp is not on this machine")
def test_the_filter_alone_refuses_the_primitives_on_a_process_of_the_same_uid(built):
    """Without the uid layer (the target is the program's own child, same uid, dumpable), the filter
    still refuses ptrace, process_vm_readv and pidfds; a signal, which it allows, gets through."""
    code = (
        f"import base64, os, sys\n_BIN = {base64.b64encode(built['exe']).decode()!r}\n"
        "child = os.fork()\nif child == 0:\n    os.read(os.pipe()[0], 1)\n"
        "fd = os.memfd_create('h', 0)\nos.write(fd, base64.b64decode(_BIN))\npid = os.fork()\nif pid == 0:\n"
        "    os.execve(fd, ['helper', 'probe', str(child), hex(id(sys))], {})\nos.waitpid(pid, 0)\nos.kill(child, 9)\n"
    )
    res = sandbox.run_python(code, timeout_s=20)
    seen = dict(line.split(": ", 1) for line in res.stdout.splitlines() if ": " in line)
    assert seen.get("kill_0") == "ok", (seen, res.stderr[-500:])
    for primitive in ("process_vm_readv", "pidfd_open", "pidfd_getfd", "ptrace_seize", "ptrace_attach"):
        assert seen.get(primitive) == "EPERM", (primitive, seen)


@pytest.mark.skipif(not ROOT_NS, reason="the private /tmp/work needs namespaces")
def test_nothing_written_in_the_work_directory_can_be_executed():
    code = (
        "import os\nwith open('x', 'w') as fh:\n    fh.write('#!/bin/sh\\necho ran\\n')\nos.chmod('x', 0o755)\n"
        "try:\n    os.execv(os.path.abspath('x'), ['x'])\nexcept OSError as exc:\n    print('refused', exc.errno)\n"
    )
    res = sandbox.run_python(code, timeout_s=10)
    assert res.stdout.strip() == "refused 13", (res.stdout, res.stderr)  # EACCES: /tmp/work is noexec


def test_rlimits_only_without_root_says_the_verdict_is_forgeable(monkeypatch):
    """No uids of their own and /proc in sight: every run says so in its warnings, and the score in its details."""
    from evalsuite.sandbox import mode

    plain = mode.Mode(prefix=(), namespaces=False, pidns=False, root=False, warnings=(), label="rlimits only")
    monkeypatch.setattr(mode, "machine_mode", lambda network: plain)
    res = sandbox.run_tests("def add(a, b):\n    return a + b\n", TESTS, ENTRY, **LIMITS)
    assert sandbox.forgeable(res.warnings) and "/proc/<harness>/mem" in sandbox.forgeable(res.warnings), res.warnings
    assert sandbox.forgeable(mode.plan_run(mode.Limits()).warnings)
    score = _score("def add(a, b):\n    return a + b\n")
    assert score.details["verdict"].startswith("verdict forgeable"), score.details


def test_the_record_of_what_forged_before_names_attacks_above():
    """`FORGED_BEFORE` (docs/security.md's "before" column) names only attacks this file runs."""
    assert FORGED_BEFORE <= set(NATIVE + REPLIES)


@pytest.mark.parametrize("isolation", ["process", "tests"])
def test_a_private_file_the_tests_make_is_the_programs_to_read(isolation):
    """The three interpreters make files as the program's uid: a 0700 temp dir of the tests is readable
    by the program, as in one interpreter (code-refac-with-open does this)."""
    prog = "def first(path):\n    with open(path) as fh:\n        return fh.readline().strip()\n"
    tests = (
        "import os, tempfile\ndef test_first():\n    d = tempfile.mkdtemp()\n    p = os.path.join(d, 'a.txt')\n"
        "    with open(p, 'w') as fh:\n        fh.write('one\\ntwo\\n')\n    assert first(p) == 'one'\n"
    )
    res = sandbox.run_tests(prog, tests, "first", isolation=isolation, **LIMITS)
    assert res.status == "passed", (res.reason, res.stderr[-800:])


@pytest.mark.skipif(not FILTERED, reason="libseccomp is not on this machine")
def test_the_filter_holds_in_the_program_and_in_the_tests_interpreter():
    """Loaded before the harness's `execve`, the filter is inherited by the interpreters it forks."""
    denied = "def _denied():\n    try:\n        os.pidfd_open(os.getppid())\n    except PermissionError:\n        return True\n    return False\n"
    prog = "import os\n" + denied + "def add(a, b):\n    return a + b if _denied() else 0\n"
    tests = "import os\n" + denied + "def test_add():\n    assert _denied()\n    assert add(1, 2) == 3\n"
    res = sandbox.run_tests(prog, tests, ENTRY, isolation="tests", **LIMITS)
    assert res.status == "passed", (res.reason, res.stderr[-800:])
