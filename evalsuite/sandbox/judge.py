"""How a run ended: what came back from the sandbox (`Outcome`) judged into a `SandboxResult`.

A pass needs exit status 0 and, when the run had a verdict token, that token as the last line of
stdout with a test count that is not 0; the first rule of `_judge` that matches decides.
"""

from __future__ import annotations

import ast
import signal
from dataclasses import dataclass

from .mode import Limits, Plan

#: statuses a run can end with
STATUSES = ("passed", "failed", "timeout", "error")
OUTPUT_LIMIT = 8000  #: characters of stdout/stderr kept (head and tail)


@dataclass(frozen=True)
class SandboxResult:
    """How one sandboxed program ended."""

    status: str  #: "passed", "failed", "timeout" or "error" (the sandbox itself failed)
    stdout: str  #: truncated to OUTPUT_LIMIT characters (head and tail kept)
    stderr: str  #: truncated likewise
    returncode: int | None  #: negative: killed by that signal
    duration_s: float
    verdict_seen: bool  #: the per-run token was printed after the tests (False when none was asked for)
    reason: str = ""  #: why it failed: "exit 1", "signal 9", "wall timeout", "cpu limit", "exited before the verdict", ...
    warnings: tuple[str, ...] = ()  #: protections that were missing on this machine
    isolation: str = ""  #: e.g. "namespaces(mount,net,pid)+uid 1234567" or "rlimits only"
    workdir: str = ""  #: the host temp dir (already deleted)
    tests_run: int | None = None  #: tests that ran and executed an assertion (run_tests only)
    cpu_s: float | None = None  #: CPU seconds the program used
    uid: int | None = None  #: the uid main.py ran as (None: the caller's); the harness's in `run_tests`
    uids: tuple[int, ...] = ()  #: every uid the run's processes had: in `run_tests` the harness's, the program's and the tests'
    pgid: int | None = None  #: the run's process group and session (all killed when it ends)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True)
class Outcome:
    """What came back from the bootstrap, before it is judged."""

    stdout: bytes
    stderr: bytes
    status_lines: list[str]
    wall_timeout: bool
    bootstrap_rc: int | None
    duration_s: float
    pgid: int


@dataclass(frozen=True, kw_only=True)
class _Verdict:
    seen: bool = False  #: the token was the last line
    tests_run: int | None = None
    failure: str | None = None  #: the harness's own reason for failing ("no test ran", ...)
    error: str | None = None  #: the harness could not judge (the program's sandbox did not start, ...)
    timeout: str | None = None  #: the program's own interpreter ran out of time (isolated runs)


def _truncate(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    if len(s) <= OUTPUT_LIMIT:
        return s
    half = OUTPUT_LIMIT // 2
    return s[:half] + f"\n...[{len(s) - OUTPUT_LIMIT} characters cut]...\n" + s[-half:]


def parse_status(lines: list[str]) -> tuple[dict, str | None]:
    """The bootstrap's final report and the setup error, if any, from its status lines."""
    boot: dict = {}
    setup_error = None
    for line in lines:
        try:
            d = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if not isinstance(d, dict):
            continue
        if "setup_error" in d:
            setup_error = d["setup_error"]
        else:
            boot = d
    return boot, setup_error


def split_verdict(stdout: bytes, token: str | None) -> tuple[bytes, _Verdict]:
    """Take the harness's last line ("<token> <tests run>" or "<token> FAIL|ERROR|TIMEOUT <reason>")
    off stdout. Only a positive count is a pass: anything else on that line, or the token on more
    than one line, fails the run and names what was seen."""
    if token is None:
        return stdout, _Verdict()
    text = stdout.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    seen = text.count(token)
    if seen > 1:
        return stdout, _Verdict(failure=f"the verdict token appears {seen} times in stdout (the harness writes it once)")
    if not last.startswith(token + " "):
        return stdout, _Verdict()  # absent, or something was printed after it: it was not last
    return body.encode(), _read_verdict(last[len(token) + 1 :])


def _read_verdict(rest: str) -> _Verdict:
    """The verdict from the token line's remainder: digits only (a positive count) pass."""
    word, _, why = rest.partition(" ")
    why = why.strip() or f"the harness's {word} line gave no reason"
    if word == "FAIL":
        return _Verdict(failure=why)
    if word == "ERROR":
        return _Verdict(error=why)
    if word == "TIMEOUT":
        return _Verdict(timeout=why)
    if rest.isascii() and rest.isdigit() and int(rest) > 0:
        return _Verdict(seen=True, tests_run=int(rest))
    return _Verdict(failure=f"the verdict line is not a count of tests: {rest[:200]!r}")


def _signal_name(rc: int) -> str:
    return f"signal {signal.Signals(-rc).name}" if -rc in signal.valid_signals() else f"signal {-rc}"


def _judge(out: Outcome, boot: dict, setup_error: str | None, verdict: _Verdict, token: str | None, lim: Limits) -> tuple[str, str]:
    """(status, reason) of one run; the first matching rule wins."""
    rc = boot.get("returncode")
    tail = out.stderr[-4000:]
    if out.wall_timeout:
        return "timeout", f"wall timeout ({lim.timeout_s:g} s)"
    if setup_error:
        return "error", f"sandbox setup failed: {setup_error}"
    if rc is None:
        ended = "without a report" if out.bootstrap_rc is None else f"with {out.bootstrap_rc}"  # zygote: no exit status here
        return "error", f"sandbox bootstrap ended {ended}: {_truncate(out.stderr)[-500:]}"
    if rc == -signal.SIGXCPU or (rc == -signal.SIGKILL and (boot.get("cpu_s") or 0) >= lim.resolved_cpu_s() - 0.05):
        return "timeout", f"cpu limit ({lim.resolved_cpu_s()} s)"
    if verdict.error:
        return "error", verdict.error
    if verdict.timeout:
        return "timeout", verdict.timeout
    if verdict.failure:
        return "failed", verdict.failure
    if rc != 0:
        reason = _signal_name(rc) if rc < 0 else f"exit {rc}"
        cap = lim.max_file_mb * 1024 * 1024
        if rc == -signal.SIGXFSZ or b"File too large" in tail or max(len(out.stdout), len(out.stderr)) >= cap:
            reason += " (file size limit)"
        if b"MemoryError" in tail:
            reason += " (MemoryError: memory limit)"
        return "failed", reason
    if token is not None and not verdict.seen:
        return "failed", "exited before the verdict (the tests did not all run)"
    if verdict.tests_run == 0:
        return "failed", "no test ran"
    return "passed", ""


def _isolation_label(plan: Plan, boot: dict) -> str:
    """E.g. "namespaces(mount,net,pid)+uids 1100000/1100001/1100002+seccomp": the mode, the uids
    (harness/program/tests where each has its own) and the system-call filter where it was loaded."""
    uids = "/".join(map(str, plan.uids()))
    label = plan.mode.label + (f"+uid{'s' if plan.harness else ''} {uids}" if uids else "")
    return label + ("+seccomp" if boot.get("seccomp") else "")


def result_of(plan: Plan, out: Outcome, token: str | None, hostdir: str) -> SandboxResult:
    """The run's result: its status and reason, output (verdict line taken off, truncated) and records."""
    boot, setup_error = parse_status(out.status_lines)
    stdout, verdict = split_verdict(out.stdout, token)
    status, reason = _judge(out, boot, setup_error, verdict, token, plan.limits)
    warnings = tuple(dict.fromkeys(list(plan.warnings) + list(boot.get("warnings", []))))
    return SandboxResult(
        status=status,
        stdout=_truncate(stdout),
        stderr=_truncate(out.stderr),
        returncode=boot.get("returncode"),
        duration_s=round(out.duration_s, 4),
        verdict_seen=verdict.seen,
        reason=reason,
        warnings=warnings,
        isolation=_isolation_label(plan, boot),
        workdir=hostdir,
        tests_run=verdict.tests_run,
        uid=plan.uid,
        uids=plan.uids(),
        cpu_s=None if boot.get("cpu_s") is None else round(boot["cpu_s"], 4),
        pgid=out.pgid,
    )
