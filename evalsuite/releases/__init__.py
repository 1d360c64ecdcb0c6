"""Release stages and the rollback path: a ledger of what was cleared for which stage.

A variant moves through stages (dev -> pilot -> production). Every `evalsuite gate` records each
judged variant's decision in the release ledger (ledger.py: SQLite, append-only); `evalsuite promote`
moves a variant up a stage only when it is cleared for the stage below and passes this stage's gate;
`evalsuite rollback` names the variant a stage falls back to, after checking that its files are still
those it was cleared with (identity.py). clearance.py reads the ledger against the rubrics and the
review verdicts of now; tracking.py logs to MLflow (imported only when asked).

This package sits beside evalsuite.review and evalsuite.adaptive: it never opens the review queue
(its callers hand it the queue's verdicts) and never judges (evalsuite.promotion does, through
evalsuite.judge.judge_run).
"""

from __future__ import annotations

from .api import ci_origin, decision_for, default_actor, default_ledger_path, judged_variants, record_gate
from .clearance import Clearance, ReleaseStatus, StageDeployments, release_status
from .identity import IdentityCheck, check_identity, variant_identity
from .ledger import Decision, Deployment, LedgerError, ReleaseLedger, open_ledger

__all__ = [
    "Clearance",
    "Decision",
    "Deployment",
    "IdentityCheck",
    "LedgerError",
    "ReleaseLedger",
    "ReleaseStatus",
    "StageDeployments",
    "check_identity",
    "ci_origin",
    "decision_for",
    "default_actor",
    "default_ledger_path",
    "judged_variants",
    "open_ledger",
    "record_gate",
    "release_status",
    "variant_identity",
]
