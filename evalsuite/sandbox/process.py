"""One sandboxed run, start to end: its plan (`mode`), its execution through the zygote or
`unshare` (`zygote`, `spawn`), and its result (`judge`). `run_python` is the one entry point.

Either way the program runs in fresh namespaces, in a fresh interpreter or, for a `run_tests`
harness that keeps the program out of its own interpreter, in a fork of the run's PID 1 (see the
package docstring).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from .judge import Outcome, SandboxResult, parse_status, result_of
from .mode import UIDS, Limits, Plan, plan_run
from .spawn import check_file_names, execute_unshare
from .zygote import execute_zygote, zygote_broken, zygote_for

log = logging.getLogger(__name__)

#: run through the zygote (isolation.zygote) where it applies: root, mount+PID(+net) namespaces
USE_ZYGOTE = True
#: let `run_python(fork_main=True)` start main.py as a fork of the run's PID 1 (False: always a fresh interpreter)
FORK_MAIN = True

_logged: set[str] = set()


def _execute(plan: Plan, hostdir: str, code: str, stdin: bytes, files: Mapping[str, bytes] | None) -> Outcome:
    """The run through the zygote where it applies, else (or when the zygote could not set it up: the
    program had not started) through `unshare`; either way over only when nothing of it is left."""
    z = zygote_for(plan) if USE_ZYGOTE else None
    if z is not None:
        try:
            out = execute_zygote(z, plan, hostdir, code, stdin, files)
        except (OSError, ValueError) as exc:
            zygote_broken(f"{type(exc).__name__}: {exc}")
        else:
            boot, setup_error = parse_status(out.status_lines)
            why = setup_error or ""
            if not why.startswith("zygote:") or boot:
                return out
            # the zygote could not set up namespaces that `unshare` could (the program never ran)
            zygote_broken(why)
    return execute_unshare(plan, hostdir, code, stdin, files)


def _log_new(warnings: Sequence[str]) -> None:
    for w in warnings:
        if w not in _logged:
            _logged.add(w)
            log.warning("sandbox: %s", w)


def run_python(
    code: str,
    *,
    verdict_token: str | None = None,
    stdin: bytes = b"",
    harness: bool = False,
    fork_main: bool = False,
    files: Mapping[str, bytes] | None = None,
    **limits: Any,
) -> SandboxResult:
    """Run `code` as `main.py` in the sandbox, under `Limits(**limits)` (timeout_s, memory_mb, cpu_s,
    max_procs, max_file_mb, network), with `files` (name: content) beside it in its working directory.

    Passed means exit status 0 and, when `verdict_token` is given, that token as the last line of
    stdout, followed by a positive count of the tests that ran. `harness=True` only for `main.py`s
    that `build_harness` wrote: as root, such a run starts main.py as root and it gives itself, the
    program and the tests uids of their own once it has forked them. `fork_main=True` (with `harness`)
    only where the harness runs no untrusted code in its own interpreter (`run_tests` but for
    `isolation="shared"`): main.py then starts as a fork of the run's PID 1 instead of a fresh
    interpreter, which holds what PID 1 loaded, ctypes included (`fork_main.run_main_here`).
    """
    check_file_names(files)
    plan = plan_run(Limits(**limits), harness=harness, fork_main=fork_main and FORK_MAIN)
    try:
        hostdir = tempfile.mkdtemp(prefix="evalsuite-sbx-")
        try:
            out = _execute(plan, hostdir, code, stdin, files)
        finally:
            shutil.rmtree(hostdir, ignore_errors=True)
    finally:
        UIDS.release(plan.uid)  # the run's processes are all gone by now (see _execute)
    result = result_of(plan, out, verdict_token, hostdir)
    _log_new(result.warnings)
    return result
