"""Faults of served variants, each with its recorded outcome (the suite's `faults:` block).

A served variant (`backend: http` whose `serve` launcher starts the server on loopback) is probed
after its generation, on its own server, with the faults a real service meets (probes in
evalsuite.run.fault_probes). Each probe settles into a `FaultResult` whose `outcome` is one word
of `states.FaultOutcome`:

- `overlong_input`: a prompt longer than the model's context. A clear 4xx is "rejected as
  designed"; a 5xx, no answer within `timeout_s` (a hang) or a dead server "failed"; an answer is
  "survived" (the server took it whole or truncated it).
- `disconnect`: a streamed reply dropped after its first token. "survived" when the server still
  answers and the greedy answers after the drop equal those before it.
- `retry`: the same requests sent again, as a caller retrying. "survived" when the answers are
  identical and the run store and cache hold one record per request however often it was sent.
- `burst`: `burst` requests at once, above the server's concurrent-sequence limit. "survived"
  when every one is queued and answered; the queue wait (each request's time to first token less
  the one of a request alone) is recorded.
- `server_killed`: the server SIGKILLed mid-run once `kill_after` generations are stored and the
  next reply has begun. "survived" when evalsuite notices, restarts it through its launcher,
  resumes, and every generation finished before the kill is kept unchanged.
- `load_failure`: the launcher started on a broken copy of the weights. "rejected as designed"
  when a clear error with the server's last lines comes within `timeout_s`. A variant whose own
  model fails to load is recorded under this kind as "cannot judge", whatever `faults:` says,
  and the other variants go on.

Outcomes are stored in the run (`faults.json`), written after each probe: a resumed run keeps
them and runs only the probes it lacks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..schemalib import check_schema_version
from ..states import CANNOT_JUDGE_WORD, FAILED, REJECTED_AS_DESIGNED, SURVIVED, FaultOutcome

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..cases.caseset import Case
    from ..cases.fault_options import FaultSettings
    from ..cases.suite import Variant
    from .store import GenerationCache, RunStore

log = logging.getLogger("evalsuite")

FAULTS_SCHEMA_VERSION = 1
LOAD_FAILURE = "load_failure"


@dataclass(frozen=True, kw_only=True)
class FaultResult:
    """One fault probe's recorded outcome for one served variant."""

    variant: str  #: the served variant probed
    kind: str  #: the fault (fault_options.FAULT_KINDS)
    outcome: FaultOutcome  #: rejected as designed | survived | failed | cannot judge
    evidence: str  #: what was seen, in a sentence or two (statuses, answers, the server's last lines)
    timings: dict[str, float] = field(default_factory=dict)  #: named seconds (probe_s, queue_wait_p50_s, restart_s...)

    def to_dict(self) -> dict:
        return {"variant": self.variant, "kind": self.kind, "outcome": self.outcome, "evidence": self.evidence, "timings": dict(self.timings)}

    @classmethod
    def from_dict(cls, d: dict) -> FaultResult:
        return cls(variant=d["variant"], kind=d["kind"], outcome=d["outcome"], evidence=d["evidence"], timings=dict(d.get("timings") or {}))


Verdict = tuple[FaultOutcome, str]  #: (outcome, evidence) of a classification
#: the runner's loop for one variant (evalsuite.run.runner.generate_into), handed to the probes:
#: (store, cache, variant, cases, done keys) -> the missing generations stored
Generate = Callable[["RunStore", "GenerationCache", "Variant", "Sequence[Case]", set], None]


# -- classification: pure functions of what a probe saw ----------------------------------------


def classify_overlong(*, status: int | None, timed_out: bool, alive: bool, message: str, timeout_s: float) -> Verdict:
    """An over-long input: a clear 4xx is the designed answer; a 5xx, a hang or a crash is not."""
    if timed_out:
        return FAILED, f"no answer within {timeout_s:g}s (a hang){'' if alive else '; the server then stopped answering'}"
    if status is None:
        return FAILED, f"the connection failed ({message}){'; the server died' if not alive else ''}"
    if 400 <= status < 500:
        return (REJECTED_AS_DESIGNED, f"HTTP {status}: {message}") if alive else (FAILED, f"HTTP {status}, but the server died after it")
    if status >= 500:
        return FAILED, f"HTTP {status} (a server error, not a refusal): {message}"
    if not alive:
        return FAILED, f"HTTP {status}, but the server died after it"
    return SURVIVED, f"HTTP {status}: answered instead of refusing ({message})"


def classify_disconnect(*, streamed: bool, alive: bool, before: Sequence[str | None], after: Sequence[str | None]) -> Verdict:
    """A client gone mid-stream: the server keeps serving and the next greedy answers are unchanged."""
    if any(t is None for t in before):
        return CANNOT_JUDGE_WORD, "the answers before the disconnect failed: nothing to compare with"
    if not streamed:
        return CANNOT_JUDGE_WORD, "the streamed reply never began: there was nothing to disconnect from"
    if not alive:
        return FAILED, "the server stopped answering after the client disconnected"
    lost = [i for i, b in enumerate(after) if b is None]
    if lost:
        return FAILED, f"{len(lost)} of {len(before)} requests failed after the client disconnected"
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    if changed:
        i = changed[0]
        return FAILED, f"{len(changed)} of {len(before)} answers changed after the disconnect (request {i}: {before[i]!r} -> {after[i]!r})"
    return SURVIVED, f"the server kept serving; the {len(before)} greedy answers after the disconnect equal those before it"


def classify_retry(*, answers: Sequence[Sequence[str | None]], records: int, cached: int, expected: int) -> Verdict:
    """Caller retries: identical answers, and one stored record (run and cache) per request."""
    if any(t is None for sent in answers for t in sent):
        return FAILED, "a retried request failed"
    first = answers[0]
    differ = [i for i in range(len(first)) if any(sent[i] != first[i] for sent in answers[1:])]
    if differ:
        i = differ[0]
        return FAILED, f"{len(differ)} of {len(first)} retried requests answered differently (request {i}: {[sent[i] for sent in answers]!r})"
    if records != expected or cached != expected:
        return FAILED, f"{expected} requests sent {len(answers)} times each left {records} run records and {cached} cache rows (duplicates)"
    return SURVIVED, f"{expected} requests sent {len(answers)} times each: identical answers; one run record and one cache row each"


def classify_burst(*, sent: int, errors: Sequence[str], queue_waits: Sequence[float]) -> Verdict:
    """A burst above the sequence limit: queued (answered late), not failed."""
    if errors:
        return FAILED, f"{len(errors)} of {sent} requests sent at once failed: {'; '.join(sorted(set(errors))[:3])}"
    waits = sorted(queue_waits)
    most = f"{waits[-1]:.2f}s" if waits else "unknown"
    return SURVIVED, f"all {sent} requests sent at once were answered; the longest queue wait was {most}"


def classify_killed(*, killed: bool, noticed: bool, restarted: str | None, lost: Sequence[str], unfinished: Sequence[str]) -> Verdict:
    """The server killed mid-run: noticed, restarted through the launcher, resumed, nothing finished lost.
    `restarted`: None when the restart worked, else why not."""
    if not killed:
        return CANNOT_JUDGE_WORD, "the run finished before the server could be killed mid-reply"
    if not noticed:
        return FAILED, "the server was killed but no generation recorded it (the loss went unnoticed)"
    if restarted is not None:
        return FAILED, f"the server did not restart through its launcher: {restarted}"
    if lost:
        return FAILED, f"{len(lost)} generations finished before the kill were lost or changed: {', '.join(lost[:3])}"
    if unfinished:
        return FAILED, f"the resumed run left {len(unfinished)} generations unfinished: {', '.join(unfinished[:3])}"
    return (
        SURVIVED,
        "the kill was noticed (the cut request recorded as an error), the server restarted through its launcher, the run resumed to completion and kept every finished generation",
    )


def classify_load_failure(*, error: str | None, hung: bool, tail: str, timeout_s: float) -> Verdict:
    """A model that fails to load: a clear error with the server's last lines, within the bound."""
    if hung:
        return FAILED, f"the server neither came up nor exited within {timeout_s:g}s"
    if error is None:
        return FAILED, "the server served a broken model without an error"
    lines = [ln.strip() for ln in tail.strip().splitlines() if ln.strip()]
    if not lines:
        return FAILED, f"an error without the server's last lines: {error[:300]}"
    # from the exception's own line on (what went wrong; its detail may follow on the next lines)
    at = next((i for i in range(len(lines) - 1, -1, -1) if re.match(r"[\w.]*(Error|Exception)\b", lines[i])), len(lines) - 1)
    return REJECTED_AS_DESIGNED, f"a clear error with the server's last lines: {' | '.join(lines[at : at + 3])[:400]}"


# -- storage ------------------------------------------------------------------------------------


def read_faults(store: RunStore) -> dict[str, dict[str, FaultResult]]:
    """The run's recorded outcomes: variant -> fault kind -> result (empty when none were probed)."""
    data = store.read_json(store.FAULTS, {})
    check_schema_version(data, FAULTS_SCHEMA_VERSION, f"run {store.run_id}: faults.json")
    return {v: {k: FaultResult.from_dict(d) for k, d in kinds.items()} for v, kinds in (data.get("variants") or {}).items()}


def load_failures(store: RunStore) -> dict[str, str]:
    """The variants whose own model did not load in this run (recorded "cannot judge"), with why."""
    return {
        v: kinds[LOAD_FAILURE].evidence for v, kinds in read_faults(store).items() if LOAD_FAILURE in kinds and kinds[LOAD_FAILURE].outcome == CANNOT_JUDGE_WORD
    }


def record_fault(store: RunStore, result: FaultResult) -> None:
    """Add (or replace) one outcome in the run's faults.json, at once (a killed run keeps it)."""
    data = store.read_json(store.FAULTS, {})
    check_schema_version(data, FAULTS_SCHEMA_VERSION, f"run {store.run_id}: faults.json")
    variants = data.setdefault("variants", {})
    variants.setdefault(result.variant, {})[result.kind] = result.to_dict()
    data["schema_version"] = FAULTS_SCHEMA_VERSION
    store.write_json(store.FAULTS, data)


# -- orchestration ------------------------------------------------------------------------------


def is_served(variant: Variant) -> bool:
    """A variant whose server evalsuite starts itself (what the probes may kill and restart)."""
    return variant.backend == "http" and isinstance(variant.options.get("serve"), dict)


@dataclass(frozen=True, kw_only=True)
class ProbeContext:
    """What a probe works with: the variant, its backend (and server), the cases it replays."""

    variant: Variant
    backend: Backend  #: the variant's backend (a `ServedBackend` for the probes that talk to its server)
    cases: Sequence[Case]  #: the first `settings.cases` cases
    settings: FaultSettings
    scratch: Path  #: a folder of the run for the probes' own stores
    store: RunStore  #: the run (its stored answers are compared with the retried ones)
    #: the runner's loop for one variant: (store, cache, variant, cases, done keys) -> generated into store
    generate: Generate
