"""`evalsuite recheck`: judge the stale clearances again, in the environment they would run in now.

A clearance is stale when the environment its variant would run in now (library versions, device,
driver: evalsuite.releases.environment) differs from the one it was cleared with. For each cleared run
with stale variants, recheck runs those variants again with their baseline (and its noise reruns) on
that run's own suite and cases (its resolved suite and cases.jsonl, not the suite file as it is now),
into a new run directory beside it, generating every output afresh (a fresh generation cache: a cached output
was computed in the old environment). Then each stale clearance is judged twice:

- against the baseline, by the usual gate with the rubric and stage the clearance used (judge_run):
  this verdict decides;
- against the cleared run: how many of the variant's outputs changed, and which cases flipped from
  pass to fail (or back) against its own outputs when it was cleared; the baseline's drift likewise,
  so a change that moved both sides alike is seen, not hidden by the paired comparison.

What it records (one transaction, kind `recheck`, for the cleared build's fingerprint, so the stage's
deployment history sees it): a pass keeps the clearance, renewed with the new environment (no longer
stale); a regression revokes it (`evalsuite rollback` then names what to deploy, and the result says
so); needs review suspends it until a reviewer settles the flagged outputs and a gate records a pass.
A recheck that cannot judge records nothing: the clearance stays as it was, still stale.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .cases.options import STAGES
from .cases.suite import suite_from_resolved
from .errors import EvalsuiteError, UnknownNameError
from .judge import judge_run
from .releases import api as rel
from .releases.clearance import Clearance, ReleaseStatus
from .releases.ledger import Decision, ReleaseLedger
from .report.releases import ledger_status
from .run.runner import RunOptions
from .run.store import RunStore
from .states import CANNOT_JUDGE_WORD, NEEDS_REVIEW, PASS, REGRESSION, ExitCode, RecheckWord

__all__ = ["Drift", "RecheckOutcome", "RecheckRequest", "RecheckResult", "Rerun", "plan_recheck", "recheck", "run_drift"]

Outcome = RecheckWord
_OUTCOMES: dict[str, Outcome] = {PASS: "kept", REGRESSION: "revoked", NEEDS_REVIEW: "suspended"}


@dataclass(frozen=True, kw_only=True)
class RecheckRequest:
    """What `evalsuite recheck` asks for."""

    ledger: Path
    stage: str | None = None  #: only the clearances for this stage (None: every stage)
    dry_run: bool = False  #: say what would be re-run, run nothing
    queue: Path | None = None  #: the review queue (default: the one each clearance used, else beside the runs)
    runs_dir: Path | None = None  #: where runs live, for the default review queue (a rerun goes beside the run it reruns)
    progress: bool = True
    actor: str | None = None


@dataclass(frozen=True, kw_only=True)
class Rerun:
    """One cleared run to run again: its stale variants with its baseline, on its own cases."""

    run_id: str  #: the cleared run
    run_dir: str
    variants: tuple[str, ...]  #: its stale variants
    clearances: tuple[Clearance, ...]  #: the stale clearances it judges again (a variant may be cleared for several stages)
    baseline: str = ""
    cases: int = 0
    problem: str = ""  #: why it cannot be run again ("" when it can)


@dataclass(frozen=True, kw_only=True)
class Drift:
    """One variant's outputs in the rerun against its outputs in the cleared run."""

    variant: str
    outputs: int  #: outputs compared (case, sample) present in both runs
    changed: int  #: of those, outputs whose text differs
    pass_to_fail: dict[str, list[str]] = field(default_factory=dict)  #: scenario/metric -> cases it passed when cleared and fails now
    fail_to_pass: dict[str, list[str]] = field(default_factory=dict)

    @property
    def flips(self) -> int:
        """Cases that passed some metric when cleared and fail it now."""
        return len({case for cases in self.pass_to_fail.values() for case in cases})

    def summary(self) -> str:
        same = "same outputs" if not self.changed else f"{self.changed} of {self.outputs} outputs changed"
        worse = "; ".join(f"{k}: {', '.join(v[:5])}" for k, v in sorted(self.pass_to_fail.items()))
        return f"{same}; {self.flips} case(s) from pass to fail against the cleared run" + (f" ({worse})" if worse else "")


@dataclass(frozen=True, kw_only=True)
class RecheckOutcome:
    """What the recheck of one stale clearance found and recorded."""

    clearance: Clearance  #: the stale clearance, as it was
    outcome: Outcome
    status: str  #: the gate's word for the variant on the rerun ("cannot judge" when it did not get that far)
    reason: str  #: the failed rules, or why it cannot judge
    run_id: str = ""  #: the rerun
    decision: Decision | None = None  #: the recheck decision recorded (None: cannot judge, nothing recorded)
    drift: Drift | None = None  #: the variant against its cleared outputs
    baseline_drift: Drift | None = None  #: the baseline against its outputs in the cleared run
    rollback: str = ""  #: for a clearance lost by the variant a stage runs: what `evalsuite rollback` deploys


@dataclass(frozen=True)
class RecheckResult:
    """The stale clearances, what was (or would be) run again, and each outcome."""

    stale: tuple[Clearance, ...]
    plan: tuple[Rerun, ...]
    outcomes: tuple[RecheckOutcome, ...] = ()
    dry_run: bool = False
    unknown: tuple[Clearance, ...] = ()  #: cleared, environment unknown: neither stale nor rechecked

    @property
    def exit_code(self) -> ExitCode:
        """1 a clearance revoked, 2 one that cannot be judged, 3 one suspended for review, else 0."""
        got = {o.outcome for o in self.outcomes}
        for outcome, code in (("revoked", ExitCode.FAILED), (CANNOT_JUDGE_WORD, ExitCode.CANNOT_JUDGE), ("suspended", ExitCode.NEEDS_REVIEW)):
            if outcome in got:
                return code
        return ExitCode.OK


def _rerun_of(run_dir: str, clearances: Sequence[Clearance]) -> Rerun:
    first = clearances[0].decision
    assert first is not None
    variants = tuple(sorted({c.variant for c in clearances}))
    try:
        store = RunStore(run_dir)
        if not (store.dir / store.SIGNATURE).is_file():
            raise EvalsuiteError(f"its run directory {run_dir} is gone")
        from .scoring.run import run_cases

        return Rerun(
            run_id=first.run_id,
            run_dir=run_dir,
            variants=variants,
            clearances=tuple(clearances),
            baseline=str(store.signature.get("baseline") or ""),
            cases=len(run_cases(store)),
        )
    except EvalsuiteError as exc:
        return Rerun(run_id=first.run_id, run_dir=run_dir, variants=variants, clearances=tuple(clearances), problem=f"run {first.run_id}: {exc}")


def plan_recheck(req: RecheckRequest) -> RecheckResult:
    """The stale clearances and the reruns they need (one per cleared run), without running anything."""
    if req.stage is not None and req.stage not in STAGES:
        raise UnknownNameError("stage", req.stage, list(STAGES))  # a usage error naming the close match
    status = ledger_status(req.ledger, req.queue, environments=True, runs_dir=req.runs_dir)
    stale = status.stale(req.stage)
    unknown = tuple(c for c in status.cleared(req.stage) if c.environment is not None and c.environment.state == "unknown")
    by_run: dict[str, list[Clearance]] = {}
    for c in stale:
        assert c.decision is not None
        by_run.setdefault(c.decision.run_dir, []).append(c)
    plan = tuple(_rerun_of(run_dir, cs) for run_dir, cs in by_run.items())
    return RecheckResult(tuple(stale), plan, dry_run=req.dry_run, unknown=unknown)


def _outputs(store: RunStore, variant: str) -> dict[tuple[str, int], str]:
    return {(g.case_id, g.sample): (g.text if g.ok else f"<error: {g.error}>") for g in store.generations() if g.variant == variant}


def run_drift(cleared: RunStore, rerun: RunStore, variant: str) -> Drift:
    """A variant's outputs and per-case pass/fail in `rerun` against its own in `cleared`."""
    from .verdict.compare import per_case

    old, new = _outputs(cleared, variant), _outputs(rerun, variant)
    shared = old.keys() & new.keys()
    before = per_case(r for r in cleared.scores() if r.variant == variant)
    after = per_case(r for r in rerun.scores() if r.variant == variant)
    worse: dict[str, list[str]] = {}
    better: dict[str, list[str]] = {}
    for key in sorted(before.keys() & after.keys()):
        name = f"{key[1]}/{key[2]}"
        for case in sorted(before[key].keys() & after[key].keys()):
            a, b = before[key][case], after[key][case]
            if not a.passes or not b.passes or a.passed == b.passed:
                continue
            (worse if a.passed else better).setdefault(name, []).append(case)
    return Drift(variant=variant, outputs=len(shared), changed=sum(old[k] != new[k] for k in shared), pass_to_fail=worse, fail_to_pass=better)


def _run_again(rerun: Rerun, req: RecheckRequest) -> RunStore:
    """The cleared run's stale variants, its baseline and noise reruns, on its suite and cases, in a new run."""
    from .scoring.pipeline import run_suite
    from .scoring.run import run_cases

    cleared = RunStore(rerun.run_dir)
    suite = suite_from_resolved(cleared.suite)
    noise = [v.name for v in suite.variants if v.noise]
    with tempfile.TemporaryDirectory(prefix="evalsuite-recheck-") as tmp:
        opts = RunOptions(
            variants=[*rerun.variants, *noise],
            cases=run_cases(cleared),
            runs_dir=str(cleared.dir.parent),
            cache_path=str(Path(tmp) / "cache.sqlite"),  # every output afresh: a cached one was computed in the old environment
            progress=req.progress,
        )
        store = run_suite(suite, opts).store
    sig = store.signature
    sig["recheck"] = {"of_run": cleared.run_id, "variants": list(rerun.variants)}
    store.write_json(store.SIGNATURE, sig)
    return store


def _judged(c: Clearance, store: RunStore, cleared: RunStore, req: RecheckRequest) -> RecheckOutcome:
    """One stale clearance judged on the rerun: against the baseline (the gate decides) and the cleared run."""
    d = c.decision
    assert d is not None and c.environment is not None
    try:
        judgment = judge_run(store, d.rubric, d.stage, d.queue or req.queue)
    except EvalsuiteError as exc:
        return RecheckOutcome(clearance=c, outcome=CANNOT_JUDGE_WORD, status=CANNOT_JUDGE_WORD, reason=str(exc), run_id=store.run_id)
    new = rel.decision_for(judgment, c.variant, kind="recheck", actor=req.actor)
    drift = run_drift(cleared, store, c.variant)
    base = judgment.comparison.baseline
    base_drift = run_drift(cleared, store, base)
    status = new.status
    if status == CANNOT_JUDGE_WORD:
        why = "; ".join(judgment.verdict.problems) if judgment.verdict.problems else "the rerun cannot be judged"
        return RecheckOutcome(clearance=c, outcome=CANNOT_JUDGE_WORD, status=status, reason=why, run_id=store.run_id, drift=drift, baseline_drift=base_drift)
    record = {
        "of": d.id,
        "cleared_run": d.run_id,
        "fingerprint": new.fingerprint,
        "changes": list(c.environment.changes),
        "against_cleared": {c.variant: asdict(drift), base: asdict(base_drift)},
    }
    new = replace(new, fingerprint=c.fingerprint, identity={**new.identity, "fingerprint": c.fingerprint}, spec=d.spec, recheck=record)
    reason = ", ".join(new.failed_rules) if new.failed_rules else ""
    return RecheckOutcome(
        clearance=c, outcome=_OUTCOMES[status], status=status, reason=reason, run_id=store.run_id, decision=new, drift=drift, baseline_drift=base_drift
    )


def _rollback_hint(o: RecheckOutcome, status: ReleaseStatus) -> str:
    """For a clearance lost by the variant its stage runs: what `evalsuite rollback` would deploy."""
    c = o.clearance
    sd = status.deployments.get(c.stage)
    if o.outcome not in ("revoked", "suspended") or sd is None or sd.current is None or sd.current.fingerprint != c.fingerprint:
        return ""
    if sd.target is None:
        return f"{c.stage} runs {c.variant} ({c.fingerprint[:12]}), no longer cleared, and has no rollback target: {sd.why_no_target}"
    t = sd.target
    return f"{c.stage} runs {c.variant} ({c.fingerprint[:12]}), no longer cleared: `evalsuite rollback --stage {c.stage}` deploys {t.variant} ({t.fingerprint[:12]})"


def recheck(req: RecheckRequest, *, planned: RecheckResult | None = None, notify: Callable[[str], None] | None = None) -> RecheckResult:
    """Run the stale clearances again and judge them (see the module's docstring); `planned`: what
    `plan_recheck(req)` found already; `notify` hears one line before each rerun starts (the command
    prints it). Records the outcomes in one transaction."""
    planned = planned if planned is not None else plan_recheck(req)
    if req.dry_run or not planned.plan:
        return planned
    outcomes: list[RecheckOutcome] = []
    for i, rerun in enumerate(planned.plan, 1):
        if rerun.problem:
            outcomes += [RecheckOutcome(clearance=c, outcome=CANNOT_JUDGE_WORD, status=CANNOT_JUDGE_WORD, reason=rerun.problem) for c in rerun.clearances]
            continue
        if notify is not None:
            notify(
                f"recheck {i}/{len(planned.plan)}: running {', '.join(rerun.variants)} with baseline {rerun.baseline} again on run {rerun.run_id}'s {rerun.cases} case(s)"
            )
        try:
            store = _run_again(rerun, req)
        except EvalsuiteError as exc:
            outcomes += [
                RecheckOutcome(clearance=c, outcome=CANNOT_JUDGE_WORD, status=CANNOT_JUDGE_WORD, reason=f"run {rerun.run_id}: {exc}") for c in rerun.clearances
            ]
            continue
        cleared = RunStore(rerun.run_dir)
        outcomes += [_judged(c, store, cleared, req) for c in rerun.clearances]
    outcomes = _record(outcomes, req)
    return replace(planned, outcomes=tuple(outcomes))


def _record(outcomes: list[RecheckOutcome], req: RecheckRequest) -> list[RecheckOutcome]:
    """The judged outcomes' decisions in the ledger (one transaction), then each lost clearance's rollback hint."""
    judged = [o for o in outcomes if o.decision is not None]
    if not judged:
        return outcomes
    with ReleaseLedger(req.ledger) as led:
        stored = iter(led.record([o.decision for o in judged if o.decision is not None])[0])
    recorded = {id(o): replace(o, decision=next(stored)) for o in judged}
    status = ledger_status(req.ledger, req.queue, runs_dir=req.runs_dir)
    out = [recorded.get(id(o), o) for o in outcomes]
    return [replace(o, rollback=_rollback_hint(o, status)) for o in out]
