"""The one library path to the release ledger for what a judged run says: where the ledger lives, who
is acting, and the decisions a gate records.

The ledger defaults to `releases.sqlite` beside the runs folder (reports/releases.sqlite, next to the
review queue), or `$EVALSUITE_RELEASE_LEDGER`. The actor is `$EVALSUITE_ACTOR`, else the CI's user
(`$GITHUB_ACTOR`, `$GITLAB_USER_LOGIN`), else the login name.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..run.store import beside_runs
from .identity import variant_identity
from .ledger import LEDGER_FILE, Decision, ReleaseLedger

if TYPE_CHECKING:
    from ..run.store import RunStore
    from ..verdict.outcome import Judgment


def default_ledger_path(store: RunStore | None = None, *, runs_dir: str | Path | None = None) -> Path:
    """`$EVALSUITE_RELEASE_LEDGER`, else `releases.sqlite` beside the runs folder (reports/releases.sqlite)."""
    env = os.environ.get("EVALSUITE_RELEASE_LEDGER")
    return Path(env) if env else beside_runs(LEDGER_FILE, store, runs_dir=runs_dir)


def default_actor() -> str:
    """Who runs this command, for the ledger."""
    for var in ("EVALSUITE_ACTOR", "GITHUB_ACTOR", "GITLAB_USER_LOGIN"):
        if os.environ.get(var):
            return os.environ[var]
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        return "unknown"


def ci_origin() -> str:
    """The CI job running this command (GitHub Actions run or GitLab job URL), else ""."""
    env = os.environ
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        return f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("CI_JOB_URL", "")


def judged_variants(judgment: Judgment) -> list[str]:
    """The variants a verdict judged (the baseline and noise reruns are not judged)."""
    return [v for v in judgment.verdict.variants if v != judgment.comparison.baseline and v not in set(judgment.comparison.noise_runs)]


def variant_block(store: RunStore, variant: str) -> dict:
    """A variant's block of the run's resolved suite (what to deploy)."""
    return next((dict(v) for v in (store.suite or {}).get("variants") or [] if v.get("name") == variant), {"name": variant})


def variant_fingerprint(store: RunStore, variant: str) -> str:
    """A variant's fingerprint in the run's signature (as the review queue keys it)."""
    return ((store.signature or {}).get("variants") or {}).get(variant) or f"name:{variant}"


def variant_environment(store: RunStore, variant: str) -> dict | None:
    """The environment a variant's outputs in the run were computed in (its signature's `environments`
    entry), or None: a run made before environments were recorded, or a backend that could not say."""
    env = ((store.signature or {}).get("environments") or {}).get(variant)
    return dict(env) if isinstance(env, dict) else None


def decision_for(judgment: Judgment, variant: str, *, kind: str = "gate", actor: str | None = None) -> Decision:
    """What the ledger records of one variant's verdict in a Judgment (evalsuite.judge.judge_run's)."""
    store, verdict, review = judgment.store, judgment.verdict, judgment.decisions.review
    fp = variant_fingerprint(store, variant)
    spec = variant_block(store, variant)
    ids = (review.item_ids.get(variant) or {}) if review is not None else {}

    def counted(cases: Mapping[str, str] | None) -> dict:
        return {c: {"item": ids.get(c), "why": why} for c, why in sorted((cases or {}).items())}

    return Decision(
        kind=kind,
        stage=judgment.stage,
        variant=variant,
        fingerprint=fp,
        identity=variant_identity(spec, fp),
        spec=spec,
        status=verdict.variant_status(variant),
        run_id=store.run_id,
        run_dir=str(Path(store.dir).resolve()),
        rubric=str(judgment.rubric.path),
        rubric_digest=judgment.rubric.digest(judgment.stage),
        queue=review.source if review is not None else "",
        waivers=counted(review.accepted.get(variant)) if review is not None else {},
        regressions=counted(review.regressions.get(variant)) if review is not None else {},
        failed_rules=tuple(verdict.failed_rules(variant)),
        actor=actor or default_actor(),
        origin=ci_origin(),
        environment=variant_environment(store, variant),
    )


def record_gate(
    judgment: Judgment, ledger: str | Path | ReleaseLedger | None = None, *, variants: Sequence[str] | None = None, actor: str | None = None
) -> list[Decision]:
    """Record a gate's decision for every variant it judged (one transaction); returns the rows as stored."""
    rows = [decision_for(judgment, v, actor=actor) for v in (variants if variants is not None else judged_variants(judgment))]
    if isinstance(ledger, ReleaseLedger):
        return ledger.record(rows)[0]
    with ReleaseLedger(ledger or default_ledger_path(judgment.store)) as led:
        return led.record(rows)[0]
