"""The decisions the gate takes as input besides the comparison, as plain data.

The gate never opens the review queue or an adaptive run's state: `evalsuite.review` builds a
`ReviewDecisions` from the queue and `evalsuite.adaptive` an `AdaptiveDecisions` from `adaptive.json`;
`evalsuite.judge.judge_run` gathers them into one `Decisions` and hands it to the pure
`gate(comparison, stage_rubric, decisions)`. How the gate applies them: verdict/waivers.py (reviews)
and verdict/gate.py (adaptive decisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

REVIEW_RULE = "human-review"


@dataclass(frozen=True)
class ReviewDecisions:
    """The current human verdicts on one run's outputs (only the outputs that were flagged or audited).

    Built by evalsuite.review.api from the queue *as of* a time and for a rubric (both passed in by
    the judging path): a waiver that expired by then, or was given "until the rubric changes" under
    another rubric, is not in `accepted` but in `expired` (and its item in `open_items`); an item
    whose two independent reviews disagree is open and `disputed` until an adjudicator's verdict
    settles it, and that verdict then counts like any other, with a note saying so.
    """

    accepted: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  #: variant -> case id -> "item #N, reviewer: note"
    regressions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  #: variant -> case id -> "item #N, reviewer: note"
    open_items: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  #: variant -> ids of items still open
    max_open: int | None = None  #: more open items than this: "needs review" (None: never)
    source: str = ""  #: where the decisions came from (the queue file)
    item_ids: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  #: variant -> case id -> queue item id (accepted and regressions)
    expired: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  #: variant -> case id -> why its waiver no longer holds
    disputed: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  #: variant -> ids of items whose independent reviews disagree
    notes: tuple[str, ...] = ()  #: what the gate should say about the queue (adjudications, disputes, expired waivers)
    audit: Mapping[str, object] = field(default_factory=dict)  #: the run's audit sample and miss-rate estimate (review.api.audit_estimate)
    as_of: str = ""  #: the time the waivers were checked against (ISO 8601, UTC)

    @property
    def n_open(self) -> int:
        return sum(len(v) for v in self.open_items.values())

    @property
    def needs_review(self) -> bool:
        return self.max_open is not None and self.n_open > self.max_open

    def summary(self) -> dict:
        return {
            "source": self.source,
            "accepted": {v: sorted(c) for v, c in self.accepted.items() if c},
            "regressions": {v: sorted(c) for v, c in self.regressions.items() if c},
            "open": self.n_open,
            "open_items": {v: list(ids) for v, ids in self.open_items.items() if ids},
            "max_open": self.max_open,
            "needs_review": self.needs_review,
            "expired": {v: dict(sorted(c.items())) for v, c in self.expired.items() if c},
            "disputed": {v: list(ids) for v, ids in self.disputed.items() if ids},
            "audit": dict(self.audit),
            "as_of": self.as_of,
        }


@dataclass
class CheckResult:
    """One anytime-valid check of an adaptive run (one rule on one scenario and metric): decided
    (pass/fail, how, after how many of its cases) or open. Built by evalsuite.adaptive, read by the gate."""

    key: str
    rule: str
    scenario: str
    metric: str
    severity: str
    status: str  #: pass | fail | open
    how: str = ""  #: sequential | exact | final look
    seen: int = 0  #: cases of this check read (its prefix in the run's order)
    population: int = 0
    decided_at: int | None = None  #: cases of this check read when it was decided
    variant_cases: int | None = None  #: cases of the variant generated when it was decided (filled by evaluate)
    reason: str = ""
    numbers: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AdaptiveDecisions:
    """An adaptive run's sequential decisions for one stage, re-evaluated on its generated prefix."""

    stage: str
    checks: Mapping[str, tuple[CheckResult, ...]] = field(default_factory=dict)  #: variant -> its checks
    verdicts: Mapping[str, str] = field(default_factory=dict)  #: variant -> fail | pass | open
    problems: tuple[str, ...] = ()  #: why the run cannot be judged for this stage (unfinished, undecided, changed)
    notes: tuple[str, ...] = ()  #: where each variant stopped, and which rule decided

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(self.checks)


@dataclass(frozen=True)
class Decisions:
    """Everything the gate applies besides the comparison and the rubric."""

    review: ReviewDecisions | None = None  #: None: no review queue
    adaptive: AdaptiveDecisions | None = None  #: None: a fixed-n run

    def to_dict(self) -> dict:
        return {
            "review": self.review.summary() if self.review else None,
            "adaptive": None if self.adaptive is None else {"stage": self.adaptive.stage, "verdicts": dict(self.adaptive.verdicts)},
        }
