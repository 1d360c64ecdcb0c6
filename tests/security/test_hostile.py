"""Hostile programs, written as a model might write them, run through the sandbox (issue 12).

Each must end as a failure within its limits, and the host must be untouched: planted files intact,
the planted secret in no output, no connection accepted, no process left (by the sandbox uid, the
run's process group and a marker in the command line), the suite and a bystander process alive.

The campaign runs twice: with the isolation this machine gives (namespaces where `unshare` works)
and forced into the degraded mode used when `unshare` is missing (rlimits, process group, uid drop
as root). A check that only namespaces can give is skipped with its reason in the other mode, and a
program whose attack would hurt the caller's own files or processes is not run where nothing
separates the program from the caller (no namespaces and not root).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from evalsuite import sandbox

TESTS = "def check(candidate):\n    assert candidate(13) == 169\n    assert candidate(-15) == 225\n"  # the task: square(x)
ENTRY = "square"
LIMITS = {"timeout_s": 6.0, "memory_mb": 256, "max_procs": 16, "max_file_mb": 4}
MARGIN_S = 20.0  # set-up and tear-down on a loaded machine; a run that is not killed takes far longer

# What a program's attack needs the sandbox to have to be stopped (see Mode.allows):
CONTAINED = "contained"  # namespaces or a uid of its own: the program is not the caller
NAMESPACES = "namespaces"  # private mounts, network and PID namespace


@dataclass(frozen=True)
class Hostile:
    name: str
    code: str  #: a str.format template over Host's fields
    status: str
    reason: str  #: fragment of SandboxResult.reason; `|` separates the alternatives of the two isolations (shared|process)
    limits: dict = field(default_factory=dict)
    needs: str | None = None  #: CONTAINED: not run without it (it would hurt the caller)


HOSTILE = [
    Hostile(
        "fork bomb",
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.05)\n",
        "timeout",
        "wall timeout",
        {"timeout_s": 3.0},
    ),
    Hostile("memory bomb", "blocks = []\nwhile True:\n    blocks.append(bytearray(32 * 1024 * 1024))\n", "failed", "MemoryError: memory limit"),
    Hostile("CPU spin", "def square(x):\n    while True:\n        x += 1\n", "timeout", "cpu limit", {"cpu_s": 1, "timeout_s": 60.0}),
    Hostile("sleep forever", "import time\ntime.sleep(10 ** 6)\n", "timeout", "wall timeout", {"timeout_s": 2.0}),
    Hostile(
        "gigabytes of output",
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(4096):\n    sys.stdout.write(chunk)\n    sys.stderr.write(chunk)\n",
        "failed",
        "file size limit",
        {"max_file_mb": 2},
    ),
    Hostile(
        "write outside the temp dir",
        "import os\nwritten = []\nfor d in {write_targets!r}:\n    p = os.path.join(d, {escape_name!r})\n    try:\n"
        "        with open(p, 'w') as fh:\n            fh.write('escaped')\n        written.append(p)\n    except OSError as exc:\n"
        "        print('refused', d, exc)\nprint('written', written)\ndef square(x):\n    return x + x\n",
        "failed",
        "exit 1",
        needs=CONTAINED,
    ),
    Hostile(
        "delete files in the working and home directories",
        "import os, shutil\nfor p in {canary_files!r}:\n    try:\n        os.remove(p)\n    except OSError as exc:\n        print('kept', p, exc)\n"
        "for d in {canary_dirs!r}:\n    shutil.rmtree(d, ignore_errors=True)\n"
        "for d in (os.getcwd(), os.path.expanduser('~')):\n    for name in os.listdir(d):\n        try:\n            os.remove(os.path.join(d, name))\n"
        "        except OSError:\n            pass\ndef square(x):\n    return 0\n",
        "failed",
        "exit 1",
        needs=CONTAINED,
    ),
    Hostile(
        "read the parent's environment secrets",
        "import glob, os, sys\nfound = dict(os.environ)\nfor p in ['/proc/self/environ', '/proc/1/environ', f'/proc/{{os.getppid()}}/environ',"
        " '/proc/{suite_pid}/environ'] + glob.glob('/proc/*/environ'):\n    try:\n        found[p] = open(p, 'rb').read().decode('latin-1')\n"
        "    except OSError as exc:\n        found[p] = str(exc)\nprint(found)\nprint(found, file=sys.stderr)\n"
        "def square(x):\n    return os.environ.get({secret_name!r}, 'no secret')\n",
        "failed",
        "exit 1",
    ),
    Hostile(
        "connect to a server on 127.0.0.1",
        "import socket\nfor host in ('127.0.0.1', 'localhost'):\n    try:\n        s = socket.create_connection((host, {port}), timeout=1)\n"
        "        s.sendall(b'escaped')\n        print('connected', host)\n    except OSError as exc:\n        print('refused', host, exc)\n",
        "failed",
        "entry point 'square' not defined",
    ),
    Hostile(
        "kill the parent process",
        "import os, signal\nfor pid in (os.getppid(), 1, {suite_pid}, {suite_parent_pid}, {bystander_pid}):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError as exc:\n        print(pid, exc)\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as exc:\n    print(-1, exc)\n",
        "failed",
        "entry point 'square' not defined|signal SIGKILL",  # in its own interpreter, its parent is the tests'
        needs=CONTAINED,
    ),
    Hostile(
        "daemon that outlives the test",
        "import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n    os._exit(0)\n"
        "def square(x):\n    return 0\n",
        "failed",
        "exit 1",
    ),
    Hostile(
        "exhaust file descriptors",
        "import os, socket\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError as exc:\n"
        "    print('fds', len(fds), exc)\nsocks = []\ntry:\n    while True:\n        socks.append(socket.socket())\nexcept OSError as exc:\n"
        "    print('sockets', len(socks), exc)\ndef square(x):\n    return -1\n",
        "failed",
        "exit 1",
    ),
    Hostile(
        "ctypes: shell, setuid, kill, unshare",
        "import ctypes\nlibc = ctypes.CDLL(None)\nprint('setuid', libc.setuid(0))\nprint('unshare', libc.unshare(0x00020000 | 0x10000000))\n"
        "libc.system(b'touch {outside_dir}/ctypes-escape; kill -9 {suite_pid} {bystander_pid}')\nlibc.kill({suite_pid}, 9)\n"
        "def square(x):\n    return 0\n",
        "failed",
        "exit 1",
        needs=CONTAINED,
    ),
    Hostile(
        "ctypes: rewrite the expected constants so a wrong answer compares equal",
        "import ctypes, inspect, unittest\nfor n in (169, 225):\n    ctypes.c_uint32.from_address(id(n) + 3 * ctypes.sizeof(ctypes.c_ssize_t)).value = 5\n"
        "def square(x):\n    return 5\n",
        "failed",
        "exit 1",
        needs=NAMESPACES,
    ),
    Hostile(
        "/proc/self/mem: rewrite the expected constants",
        "import inspect, os, struct, unittest\nfd = os.open('/proc/self/mem', os.O_RDWR)\nfor n in (169, 225):\n    os.lseek(fd, id(n) + 24, 0)\n"
        "    os.write(fd, struct.pack('I', 5))\ndef square(x):\n    return 5\n",
        "failed",
        "exit 1",
        needs=NAMESPACES,
    ),
    Hostile("sys.exit(0) looking like success", "import sys\ndef square(x):\n    return 0\nsys.exit(0)\n", "failed", "exited before the verdict"),
    Hostile(
        "printing passed",
        "import os\nprint('4 passed in 0.01s')\nprint('EVALSUITE-VERDICT-' + '0' * 32 + ' 4')\nos._exit(0)\n",
        "failed",
        "exited before the verdict",
    ),
    Hostile(
        "object whose __eq__ is always true",
        "class Anything:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\ndef square(x):\n    return Anything()\n",
        "failed",
        "exit 1|is not plain data",
    ),
    Hostile(
        "overriding assertion reporting",
        "import atexit, builtins, os, sys, unittest\nsys.excepthook = lambda *a: print('all tests passed')\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {{}})\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "atexit.register(os._exit, 0)\ndef square(x):\n    return 0\n",
        "failed",
        "exited before the verdict|exit 1",  # in its own interpreter, its hooks never reach the tests'
    ),
    Hostile(
        "posix.system",
        "import posix\nprint(posix.system('touch {outside_dir}/posix-escape; kill -9 {suite_pid} {bystander_pid}; echo ${secret_name}'))\n"
        "def square(x):\n    return 0\n",
        "failed",
        "exit 1",
        needs=CONTAINED,
    ),
    Hostile(
        "importlib.reload(os)",
        "import importlib, os\nos = importlib.reload(os)\nprint(os.system('touch {outside_dir}/reload-escape; kill -9 {bystander_pid}'))\n"
        "os.execv('/bin/sh', ['/bin/sh', '-c', 'echo $PPID'])\n",
        "failed",
        "exited before the verdict",
        needs=CONTAINED,
    ),
    Hostile(
        "_posixsubprocess.fork_exec",
        "import _posixsubprocess, os, sys\nr, w = os.pipe()\n"
        "cmd = b'touch {outside_dir}/fork-exec-escape; kill -9 {bystander_pid}; exec ' + sys.executable.encode() + b' -c \"import time; time.sleep(600)\" {marker}'\n"
        "args = [b'/bin/sh', b'-c', cmd]\ncommon = [args, [b'/bin/sh'], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w, False, True, -1, None, None, None, -1, None]\n"
        "try:\n    pid = _posixsubprocess.fork_exec(*common, True)\nexcept TypeError:\n    pid = _posixsubprocess.fork_exec(*common)\nprint('started', pid)\n"
        "def square(x):\n    return 1\n",
        "failed",
        "exit 1",
        needs=CONTAINED,
    ),
]


@dataclass(frozen=True)
class Mode:
    """The isolation a campaign ran under."""

    label: str
    namespaces: bool
    root: bool

    def allows(self, needs: str | None) -> bool:
        return needs is None or (needs == CONTAINED and (self.namespaces or self.root)) or (needs == NAMESPACES and self.namespaces)


@dataclass
class Host:
    """What the hostile programs aim at, planted by the test, and what they did to it."""

    secret_name: str
    secret: str
    canary_files: dict[str, str]
    canary_dirs: list[str]
    outside_dir: str
    write_targets: list[str]
    escape_name: str
    port: int
    accepted: list
    bystander_pid: int
    suite_pid: int
    suite_parent_pid: int
    marker: str

    def fields(self) -> dict:
        return {**vars(self), "canary_files": sorted(self.canary_files)}


@dataclass
class Campaign:
    mode: Mode
    host: Host
    results: dict[str, sandbox.SandboxResult]
    children_before: set[int]


def _serve(srv: socket.socket, accepted: list, stop: threading.Event) -> None:
    srv.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, addr = srv.accept()
        except OSError:
            continue
        accepted.append(addr)
        conn.close()


def _marked(marker: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or ()):
                out.append(p)
        except psutil.Error:
            pass
    return out


def _kill_marked(marker: str) -> None:
    for p in _marked(marker):
        try:
            p.kill()
        except psutil.Error:
            pass


MODES = ["this machine", "this machine without the zygote", "without namespaces"]


@pytest.fixture(scope="module", params=MODES)
def campaign(request, tmp_path_factory):
    """Plant the targets, run every hostile program (4 at a time), then hand over what happened."""
    token = secrets.token_hex(8)
    cwd, home = Path.cwd(), Path.home()
    outside = Path(tmp_path_factory.mktemp("outside"))
    os.chmod(outside, 0o700)
    targets = [d for d in dict.fromkeys((cwd, home)) if d.is_dir() and os.access(d, os.W_OK)]  # CI may have no usable HOME
    files = {str(d / f".evalsuite-canary-{token}"): f"canary {d} {token}\n" for d in (*targets, outside)}
    dirs = [str(d / f".evalsuite-canary-dir-{token}") for d in targets]
    for p, text in files.items():
        Path(p).write_text(text)
    for d in dirs:
        os.mkdir(d, 0o755)
        (Path(d) / "keep.txt").write_text(token)
    escape = f"evalsuite-escape-{token}"
    secret_name = f"EVALSUITE_SECURITY_SECRET_{token.upper()}"
    os.environ[secret_name] = "sk-" + secrets.token_hex(16)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    accepted: list = []
    stop = threading.Event()
    server = threading.Thread(target=_serve, args=(srv, accepted, stop), daemon=True)
    server.start()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", f"bystander-{token}"], start_new_session=True)
    host = Host(
        secret_name=secret_name,
        secret=os.environ[secret_name],
        canary_files=files,
        canary_dirs=dirs,
        outside_dir=str(outside),
        write_targets=[str(outside), str(cwd), str(home), str(Path(sandbox.__file__).parent), "/var/tmp", "/dev/shm", "/etc"],
        escape_name=escape,
        port=srv.getsockname()[1],
        accepted=accepted,
        bystander_pid=bystander.pid,
        suite_pid=os.getpid(),
        suite_parent_pid=os.getppid(),
        marker=f"evalsuite-daemon-{token}",
    )
    real = sandbox.mode.machine_mode(False)
    if request.param.startswith("this machine"):
        mode = Mode(real.label, real.namespaces, real.root)
    else:
        degraded = sandbox.mode.Mode((), False, False, real.root, ("forced: no namespaces",), "rlimits only")
        mode = Mode(degraded.label, False, degraded.root)
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    runnable = [h for h in HOSTILE if mode.allows(h.needs)]
    try:
        with pytest.MonkeyPatch.context() as mp:
            if request.param == "without namespaces":
                mp.setattr(sandbox.mode, "machine_mode", lambda network: degraded)
            # the zygote (the default where it applies) and the `unshare` path must hold the same line
            mp.setattr(sandbox.process, "USE_ZYGOTE", request.param != "this machine without the zygote")
            with ThreadPoolExecutor(max_workers=4) as pool:
                futures = {h.name: pool.submit(sandbox.run_tests, h.code.format(**host.fields()), TESTS, ENTRY, **{**LIMITS, **h.limits}) for h in runnable}
                results = {name: f.result() for name, f in futures.items()}
        yield Campaign(mode, host, results, children_before)
    finally:
        stop.set()
        server.join(timeout=5)
        srv.close()
        bystander.kill()
        bystander.wait()
        _kill_marked(host.marker)
        del os.environ[secret_name]
        for p in files:
            Path(p).unlink(missing_ok=True)
        for d in dirs:
            for f in Path(d).glob("*") if os.path.isdir(d) else ():
                f.unlink()
            if os.path.isdir(d):
                os.rmdir(d)
        for d in host.write_targets:
            Path(d, escape).unlink(missing_ok=True)


# warnings the sandbox gives when it could not take a memory writer away (see _remove_memory_writers)
MISSING_PROTECTION = {"ctypes": "ctypes stays importable", "/proc/self/mem": "/proc stays visible"}


def _result(campaign: Campaign, h: Hostile) -> sandbox.SandboxResult:
    if not campaign.mode.allows(h.needs):
        pytest.skip(f"{campaign.mode.label} as {'root' if campaign.mode.root else 'non-root'}: needs {h.needs}; not run")
    res = campaign.results[h.name]
    for prefix, warning in MISSING_PROTECTION.items():
        missing = [w for w in res.warnings if w.startswith(warning)]
        if h.name.startswith(prefix + ":") and "rewrite" in h.name and missing:
            pytest.skip(f"this machine refused the protection: {missing[0]}")
    return res


def test_at_least_15_programs():
    assert len(HOSTILE) >= 15 and len({h.name for h in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize("h", HOSTILE, ids=[h.name for h in HOSTILE])
def test_hostile_program_fails_within_its_limits(campaign, h):
    res = _result(campaign, h)
    assert (res.status, any(r in res.reason for r in h.reason.split("|"))) == (h.status, True), (res.reason, res.stdout[-400:], res.stderr[-800:])
    assert not res.passed and not res.verdict_seen
    assert res.duration_s < {**LIMITS, **h.limits}["timeout_s"] + MARGIN_S
    assert len(res.stdout) <= sandbox.OUTPUT_LIMIT + 100 and len(res.stderr) <= sandbox.OUTPUT_LIMIT + 100
    assert not os.path.exists(res.workdir), "the host temp dir is deleted"


def _left(res: sandbox.SandboxResult) -> list[tuple[str, int]]:
    """Live (not zombie) processes of the run's uid, process group or session."""
    left = []
    for p in psutil.process_iter(["uids", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue  # killed, waiting for its reaper: it can no longer run
            if res.uid is not None and p.info["uids"] and res.uid in (p.info["uids"].real, p.info["uids"].effective):
                left.append(("uid", p.pid))
            if res.pgid is not None and (os.getpgid(p.pid) == res.pgid or os.getsid(p.pid) == res.pgid):
                left.append(("process group", p.pid))
        except (psutil.Error, OSError):
            pass
    return left


@pytest.mark.parametrize("h", HOSTILE, ids=[h.name for h in HOSTILE])
def test_no_process_left(campaign, h):
    res = _result(campaign, h)
    left = _left(res)
    for _ in range(50):  # SIGKILL was sent; give the kernel a moment to finish the exits
        if not left:
            break
        time.sleep(0.1)
        left = _left(res)
    assert left == []


def test_no_daemon_or_child_survives(campaign):
    """The double-forked daemon and the fork_exec'd sleeper (marked in their argv) are gone, and the
    suite has no child it did not have before the campaign."""
    if campaign.mode.root or campaign.mode.namespaces:
        assert _marked(campaign.host.marker) == []
    else:
        pytest.skip("no namespaces and not root: a setsid daemon of the caller's uid can outlive the run")
    now = {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}
    assert now - campaign.children_before - sandbox.helper_pids() == set()


def test_planted_files_intact(campaign):
    if not (campaign.mode.namespaces or campaign.mode.root):
        pytest.skip("no namespaces and not root: the program runs as the caller and may touch the caller's files")
    h = campaign.host
    assert {p: Path(p).read_text() if os.path.exists(p) else None for p in h.canary_files} == h.canary_files
    assert [os.listdir(d) for d in h.canary_dirs] == [["keep.txt"]] * len(h.canary_dirs)
    assert sorted(os.listdir(h.outside_dir)) == sorted(Path(p).name for p in h.canary_files if Path(p).parent == Path(h.outside_dir))


def test_no_file_written_outside(campaign):
    h = campaign.host
    protected = [h.outside_dir, str(Path.cwd()), str(Path.home()), str(Path(sandbox.__file__).parent), "/etc"]
    if campaign.mode.namespaces:
        protected += ["/var/tmp", "/dev/shm"]  # world-writable: only a private mount namespace protects them
    elif not campaign.mode.root:
        pytest.skip("no namespaces and not root: the program may write wherever the caller may")
    assert [d for d in protected if os.path.exists(os.path.join(d, h.escape_name))] == []
    assert [n for n in os.listdir(h.outside_dir) if "escape" in n] == []


def test_secret_in_no_output(campaign):
    if not (campaign.mode.namespaces or campaign.mode.root):
        pytest.skip("no namespaces and not root: the program may read /proc/<suite pid>/environ as the caller")
    h = campaign.host
    leaks = [name for name, r in campaign.results.items() if h.secret in r.stdout or h.secret in r.stderr or h.secret in r.reason]
    assert leaks == []
    env_reader = campaign.results["read the parent's environment secrets"]
    assert h.secret_name not in env_reader.stdout  # not even the variable's name reached the sandbox


def test_no_connection_accepted(campaign):
    if not campaign.mode.namespaces:
        pytest.skip("no network namespace here: the sandbox cannot stop connections to 127.0.0.1")
    assert campaign.host.accepted == []
    assert "refused 127.0.0.1" in campaign.results["connect to a server on 127.0.0.1"].stdout


def test_suite_and_bystander_alive(campaign):
    h = campaign.host
    assert psutil.pid_exists(h.suite_pid) and psutil.Process(h.bystander_pid).status() != psutil.STATUS_ZOMBIE
    assert psutil.pid_exists(h.suite_parent_pid)
    os.kill(h.bystander_pid, 0)  # still ours to signal: it was not replaced


def test_file_descriptors_were_capped(campaign):
    out = campaign.results["exhaust file descriptors"].stdout
    opened = int(out.split("fds ", 1)[1].split()[0])
    assert 0 < opened <= 256
