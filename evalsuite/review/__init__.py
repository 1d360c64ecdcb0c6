"""Human review queue: flagged differences in SQLite, verdicts from notebooks or the CLI, fed back into the gate.

Everything goes through `evalsuite.review.api` (re-exported here), so the CLI, the notebook and the
tests share one path. The gate sees the queue only as data (`decisions.ReviewDecisions`).
"""

from ..verdict.decisions import ReviewDecisions
from .api import (
    FlagResult,
    adjudicate,
    annotate,
    answer,
    audit_estimate,
    back,
    dataframe,
    decisions,
    default_queue_path,
    export,
    flag,
    flag_run,
    keep,
    keep_regressions,
    list_items,
    next_item,
    open_queue,
    release,
    review_decisions,
    show,
    skip,
    stats,
    undo,
)
from .policy import ReviewPolicy, flag_comparison, flag_plan
from .store import VERDICTS, ReviewStore

__all__ = [
    "FlagResult",
    "adjudicate",
    "answer",
    "audit_estimate",
    "back",
    "flag_plan",
    "skip",
    "undo",
    "ReviewDecisions",
    "ReviewPolicy",
    "ReviewStore",
    "VERDICTS",
    "annotate",
    "dataframe",
    "decisions",
    "default_queue_path",
    "export",
    "flag",
    "flag_comparison",
    "flag_run",
    "keep",
    "keep_regressions",
    "list_items",
    "next_item",
    "open_queue",
    "release",
    "review_decisions",
    "show",
    "stats",
]
