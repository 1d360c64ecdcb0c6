"""The release ledger as the report and `evalsuite releases` show it: read now, against the review
queue's current verdicts and the rubrics' current rules (evalsuite.releases.clearance), and the
release history of a run's variants (stages cleared, when, on which run; each stage's rollback target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..cases.options import STAGES
from ..releases.api import default_ledger_path, judged_variants, variant_fingerprint
from ..releases.clearance import Clearance, ReleaseStatus, release_status
from ..releases.environment import current_environment
from ..releases.ledger import Deployment, ReleaseLedger
from ..review.api import default_queue_path, fingerprint_verdicts
from ..verdict.rubric import Rubric

if TYPE_CHECKING:
    from ..verdict.outcome import Judgment

MAX_DECISIONS = 10  #: a variant's latest decisions listed in the report


def ledger_status(
    ledger: str | Path,
    queue: str | Path | None = None,
    *,
    fingerprints: Sequence[str] | None = None,
    rubric: Rubric | None = None,
    runs_dir: str | Path | None = None,
    environments: bool = False,
) -> ReleaseStatus:
    """The ledger read now: review verdicts from the queue each decision used (else `queue`, else the
    default queue beside the runs, or beside the ledger), rubrics from the files the decisions name
    (else `rubric`); `environments`: each cleared build's environment now, against the one it was
    cleared with (stale or not: evalsuite.releases.environment). No ledger file: nothing is cleared."""
    path = Path(ledger)
    if not path.is_file():
        return ReleaseStatus(())
    verdicts = partial(fingerprint_verdicts, default=queue or default_queue_path(runs_dir=runs_dir or path.parent / "runs"))
    probe = current_environment if environments else None
    with ReleaseLedger(path, create=False) as led:
        return release_status(led, verdicts, fingerprints=fingerprints, rubric=rubric, environments=probe)


@dataclass(frozen=True)
class ReleaseHistory:
    """What the report shows of the ledger for one run's variants."""

    ledger: str
    #: {variant, fingerprint, stages: {stage: {cleared, since, run_id, decision, status, reason, environment}}, decisions: [...]};
    #: environment: {state (fresh, stale, unknown), changes, reason, summary} of a cleared stage, else None
    variants: list[dict]
    stages: list[dict] = field(default_factory=list)  #: {stage, current: {...} | None, target: {...} | None, why_no_target}


def _stage_cell(c: Clearance | None) -> dict:
    if c is None:
        return {"cleared": False, "since": None, "run_id": None, "decision": None, "status": None, "reason": "no decision recorded", "environment": None}
    d, env = c.decision, c.environment
    envd = {"state": env.state, "changes": list(env.changes), "reason": env.reason, "summary": env.summary()} if env is not None else None
    return {
        "cleared": c.cleared,
        "since": c.since,
        "run_id": d.run_id if d else None,
        "decision": d.id if d else None,
        "status": d.status if d else None,
        "reason": c.reason,
        "environment": envd,
    }


def _brief(dep: Deployment | None) -> dict | None:
    return None if dep is None else {"variant": dep.variant, "fingerprint": dep.fingerprint, "since": dep.created, "action": dep.action, "actor": dep.actor}


def release_history(judgment: Judgment, ledger: str | Path | None = None, queue: str | Path | None = None) -> ReleaseHistory | None:
    """The release history of a judged run's variants, from the ledger beside its runs (None when there is no ledger)."""
    store = judgment.store
    path = Path(ledger) if ledger is not None else default_ledger_path(store)
    if not path.is_file():
        return None
    fps = {v: variant_fingerprint(store, v) for v in judged_variants(judgment)}
    status = ledger_status(path, queue or default_queue_path(store), fingerprints=sorted(set(fps.values())), environments=True)
    with ReleaseLedger(path, create=False) as led:
        rows = []
        for variant, fp in fps.items():
            decisions = led.decisions(fingerprint=fp)[-MAX_DECISIONS:]
            listed = [
                {"id": d.id, "stage": d.stage, "kind": d.kind, "status": d.status, "run_id": d.run_id, "created": d.created, "actor": d.actor}
                for d in decisions
            ]
            rows.append({"variant": variant, "fingerprint": fp, "stages": {s: _stage_cell(status.of(fp, s)) for s in STAGES}, "decisions": listed[::-1]})
    stages = [
        {
            "stage": s,
            "current": _brief(sd.current),
            "target": _brief(sd.target),
            "target_since": sd.target_clearance.since if sd.target_clearance else None,
            "why_no_target": sd.why_no_target,
        }
        for s, sd in status.deployments.items()
    ]
    return ReleaseHistory(str(path), rows, stages)
