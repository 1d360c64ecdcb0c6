"""Where code-scoring sandbox jobs run: in this process's sandbox pool, or as tasks on a cluster.

The code scorers call `run_tests_cached` / `run_tests_many` here instead of `evalsuite.sandbox`
directly. With no remote runner installed these are exactly the sandbox's own functions. Inside
`remote(runner)` (the Ray executor installs one while a run is scored), jobs go to `runner`,
whose every job still runs through `evalsuite.sandbox.run_tests` on the node that takes it, so the
isolation of each run is the node's sandbox, never this process.

Scorers ask for one job at a time (`code.pass`, per sample) before they ask for batches
(`code.pass@k`, per case); sent one by one, remote jobs would run one after another. `prefetch`
therefore scores the code cases once in "collect" mode (every job answered with a placeholder,
nothing run), sends all the collected jobs at once, and keeps their results for the real scoring.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .. import sandbox

if TYPE_CHECKING:
    from ..backends.base import Generation
    from ..cases.caseset import Case

log = logging.getLogger("evalsuite")

Job = tuple  # (program, tests, entry_point)
#: runs jobs somewhere else: runner(jobs, limits) -> one SandboxResult per job, in order
RemoteRunner = Callable[[list, dict], list]


class _Remote:
    def __init__(self, runner: RemoteRunner):
        self.runner = runner
        self.memo: dict[str, sandbox.SandboxResult] = {}
        self.lock = threading.Lock()
        self.collected: dict[str, tuple[Job, dict]] | None = None
        self.sent = 0  #: jobs handed to the runner (tests count them)


_active: _Remote | None = None


@contextlib.contextmanager
def remote(runner: RemoteRunner) -> Iterator[_Remote]:
    """Send the sandbox jobs made inside this block to `runner` (results memoised for the block)."""
    global _active
    previous, _active = _active, _Remote(runner)
    try:
        yield _active
    finally:
        _active = previous


def _placeholder() -> sandbox.SandboxResult:
    return sandbox.SandboxResult("error", "", "", None, 0.0, False, reason="not run yet (collecting jobs for the cluster)")


def run_tests_cached(program: str, tests: str, entry_point: str | None = None, **limits) -> sandbox.SandboxResult:
    """`evalsuite.sandbox.run_tests_cached`, or the installed remote runner's answer."""
    if _active is None:
        return sandbox.run_tests_cached(program, tests, entry_point, **limits)
    return run_tests_many([(program, tests, entry_point)], **limits)[0]


def run_tests_many(jobs: Iterable[Job], **limits) -> list[sandbox.SandboxResult]:
    """`evalsuite.sandbox.run_tests_many`, or all of `jobs` sent to the remote runner at once."""
    state = _active
    jobs = [tuple(j) for j in jobs]
    if state is None:
        return sandbox.run_tests_many(jobs, **limits)
    keys = [sandbox.cache_key(p, t, e, limits) for p, t, e in jobs]
    with state.lock:
        known = {k: state.memo[k] for k in keys if k in state.memo}
        if state.collected is not None:
            for k, j in zip(keys, jobs):
                if k not in known:
                    state.collected.setdefault(k, (j, dict(limits)))
            return [known.get(k) or _placeholder() for k in keys]
    missing: dict[str, Job] = {}
    for k, j in zip(keys, jobs):
        if k not in known:
            missing.setdefault(k, j)
    if missing:
        _send(state, [(k, j, dict(limits)) for k, j in missing.items()])
        with state.lock:
            known.update({k: state.memo[k] for k in missing if k in state.memo})
    return [known[k] for k in keys]


def _send(state: _Remote, items: Sequence[tuple[str, Job, dict]]) -> None:
    """Run items (key, job, limits) through the runner, grouped by limits; memoise every answer.

    Sandbox errors are kept for this block only as answers to the calls that asked (like the
    sandbox's own cache, which does not keep them either); they are not retried here.
    """
    groups: dict[str, list[tuple[str, Job]]] = {}
    limits_of: dict[str, dict] = {}
    for key, job, limits in items:
        lk = repr(sorted(limits.items()))
        groups.setdefault(lk, []).append((key, job))
        limits_of[lk] = limits
    for lk, pairs in groups.items():
        results = state.runner([j for _, j in pairs], limits_of[lk])
        if len(results) != len(pairs):
            raise RuntimeError(f"remote sandbox runner returned {len(results)} results for {len(pairs)} jobs")
        with state.lock:
            state.sent += len(pairs)
            for (key, _), res in zip(pairs, results):
                state.memo[key] = res


def prefetch(cases: Sequence[Case], generations: Sequence[Generation], baseline: str | None, score_generations: Callable[..., object]) -> int:
    """Collect every sandbox job the code scorers will ask for, run them all remotely at once.

    `score_generations` is evalsuite.scoring.run's (handed down: executors sit beneath scoring).
    Returns how many jobs were sent. A job a scorer only asks for after seeing another's result
    is not collected; the real scoring pass then sends it on its own (correct, only slower).
    """
    state = _active
    if state is None:
        return 0
    code_cases = [c for c in cases if c.scenario == "code"]
    ids = {c.id for c in code_cases}
    gens = [g for g in generations if g.case_id in ids]
    if not gens:
        return 0
    with state.lock:
        state.collected = {}
    try:
        score_generations(code_cases, gens, baseline)
    finally:
        with state.lock:
            collected, state.collected = state.collected, None
    if collected:
        _send(state, [(k, j, lim) for k, (j, lim) in collected.items()])
    return len(collected or {})
