"""Every fixed word set, defined once: verdict statuses, rule statuses, review states, exit codes.

Two vocabularies name the gate's outcome, each spelled one way:

- a rule result's status is a token (`cannot_judge`), as in the `results` of `gate --json`;
- a verdict's status is a word for people and the release ledger (`cannot judge`), the one word every
  output opens with. `word()` turns a token into its word, so the two never drift apart.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, Literal, get_args

# --- a rule's outcome for one variant (verdict.outcome.RuleResult.status) ---------------------
RuleStatus = Literal["pass", "fail", "warn", "skip", "missing", "cannot_judge"]
PASS: Final = "pass"
FAIL: Final = "fail"
WARN: Final = "warn"
SKIP: Final = "skip"
MISSING: Final = "missing"
CANNOT_JUDGE: Final = "cannot_judge"

# --- the verdict's one word (Verdict.status, gate --json "status", the release ledger) ---------
VerdictStatus = Literal["pass", "regression", "cannot judge", "needs review"]
REGRESSION: Final = "regression"
NEEDS_REVIEW: Final = "needs review"
VERDICT_STATUSES: Final[tuple[str, ...]] = get_args(VerdictStatus)
#: what `evalsuite recheck` did with a clearance (evalsuite.recheck): kept, revoked, suspended for review, or cannot judge
RecheckWord = Literal["kept", "revoked", "suspended", "cannot judge"]

# --- a review item (review.settle) --------------------------------------------------------------
ReviewVerdict = Literal["acceptable", "regression", "unsure"]
ReviewState = Literal["acceptable", "regression", "unsure", "pending", "disputed"]
REVIEW_VERDICTS: Final[tuple[str, ...]] = get_args(ReviewVerdict)
REVIEW_STATES: Final[tuple[str, ...]] = get_args(ReviewState)
DECISIVE: Final[tuple[str, ...]] = ("acceptable", "regression")


def word(status: str) -> str:
    """The display word of a status token: `cannot_judge` -> `cannot judge` (others unchanged)."""
    return status.replace("_", " ")


CANNOT_JUDGE_WORD: Final = "cannot judge"  #: word(CANNOT_JUDGE), spelled out for the type checker (tests/test_states.py)

# --- a fault probe's recorded outcome (evalsuite.run.faults.FaultResult.outcome) -------------------
FaultOutcome = Literal["rejected as designed", "survived", "failed", "cannot judge"]
REJECTED_AS_DESIGNED: Final = "rejected as designed"  #: a clear refusal (a 4xx for an over-long input; a clear load error)
SURVIVED: Final = "survived"  #: the server kept serving, and the answers stayed the same
FAILED: Final = "failed"  #: a 5xx, a hang, a crash, a lost or changed answer
FAULT_OUTCOMES: Final[tuple[str, ...]] = get_args(FaultOutcome)


class ExitCode(IntEnum):
    """Every exit code of `evalsuite`, one table for every command (docs/exit-codes.md).

    A verdict's own code is `Verdict.exit_code` (0-3); 4 and 5 say the command could not start or
    broke, so CI never takes a typo for a judgment: `gate reports/runs/typo` is 4, a run that cannot
    be judged is 2.
    """

    OK = 0  #: pass; any command that did what it was asked
    FAILED = 1  #: a regression (gate, demo), or a refusal (promote, rollback: the answer is no)
    CANNOT_JUDGE = 2  #: gate, report, compare: missing data, an incomplete run, a rule that cannot be decided
    NEEDS_REVIEW = 3  #: gate: nothing failed, but more flagged outputs await review than `max_open`
    USAGE = 4  #: your input is wrong: a bad option or argument, a missing run or file, an invalid suite or rubric, an unknown name
    INTERNAL = 5  #: an internal error (a bug in evalsuite: the traceback is printed)
    INTERRUPTED = 130  #: Ctrl-C (finished generations are kept)


# --- one try of one served request (evalsuite.backends.http_stream.Attempt.kind) -----------------------
AttemptKind = Literal["ok", "retry", "fail", "timeout"]  #: an answer | transient (try again) | an answer to record as an error | no answer in time
ATTEMPT_KINDS: Final[tuple[str, ...]] = get_args(AttemptKind)

# --- a request of a load window (evalsuite.run.load_records.TrafficItem.kind) ------------------------
LoadRequestKind = Literal["replay", "short", "long"]  #: a replayed case | background: a short prompt | a long context
LOAD_REQUEST_KINDS: Final[tuple[str, ...]] = get_args(LoadRequestKind)
