"""Release stages and the rollback path: a ledger of what was cleared for which stage.

A variant moves through stages (dev -> pilot -> production). Every `evalsuite gate` records each
judged variant's decision in the release ledger (ledger.py: SQLite, append-only); `evalsuite promote`
moves a variant up a stage only when it is cleared for the stage below and passes this stage's gate;
`evalsuite rollback` names the variant a stage falls back to, after checking that its files are still
those it was cleared with (identity.py). clearance.py reads the ledger against the rubrics and the
review verdicts of now; environment.py compares the environment a clearance was made in with the one
its variant would run in now (stale: `evalsuite recheck`, evalsuite.recheck, judges it again);
tracking.py logs to MLflow (imported only when asked).

This package sits beside evalsuite.review and evalsuite.adaptive: it never opens the review queue
(its callers hand it the queue's verdicts) and never judges (evalsuite.promotion does, through
evalsuite.judge.judge_run).
"""

from __future__ import annotations

from .api import ci_origin, decision_for, default_actor, default_ledger_path, judged_variants, record_gate
from .clearance import Clearance, ReleaseStatus, StageDeployments, release_status
from .environment import EnvironmentCheck, check_environment, current_environment, environment_changes
from .identity import IdentityCheck, check_identity, variant_identity
from .ledger import Decision, Deployment, LedgerError, ReleaseLedger, open_ledger

__all__ = [
    "Clearance",
    "Decision",
    "Deployment",
    "EnvironmentCheck",
    "IdentityCheck",
    "LedgerError",
    "ReleaseLedger",
    "ReleaseStatus",
    "StageDeployments",
    "check_environment",
    "check_identity",
    "ci_origin",
    "current_environment",
    "decision_for",
    "default_actor",
    "default_ledger_path",
    "environment_changes",
    "judged_variants",
    "open_ledger",
    "record_gate",
    "release_status",
    "variant_identity",
]
