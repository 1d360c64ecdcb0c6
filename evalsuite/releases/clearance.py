"""What the ledger means now: which variant build is cleared for which stage, since when, what each
stage runs, and where it would roll back to.

A variant (by fingerprint) is *cleared* for a stage when its latest decision at that stage passed,
the stage's rules are still those it passed under (the rubric's digest for that stage is unchanged),
every waiver that decision counted still stands (each accepted output's current verdict is still
`acceptable`), and no reviewer has judged one of its outputs a regression since. Review verdicts
come from the caller (`Verdicts`: evalsuite.review.api.fingerprint_verdicts), so this package never
opens the review queue itself.

A stage's deployments form a stack: a promotion pushes its variant (an earlier entry of the same
build is dropped: it is the newest now), a rollback pops back to its target. The stage runs the top;
its rollback target is the nearest entry below that is still cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ..cases.options import STAGES
from ..errors import EvalsuiteError
from ..verdict.rubric import Rubric, load_rubric
from .environment import EnvironmentCheck, EnvironmentProbe, check_environment
from .ledger import Decision, Deployment, ReleaseLedger

#: (queue path or None for the default queue, fingerprints) -> fingerprint -> item id -> {case_id, verdict, reviewer, note, time}
Verdicts = Callable[[str | None, Sequence[str]], Mapping[str, Mapping[int, Mapping[str, object]]]]


def no_verdicts(queue: str | None, fingerprints: Sequence[str]) -> dict:
    """No review queue: waivers stand as recorded and no regression is known."""
    return {}


@dataclass(frozen=True, kw_only=True)
class Clearance:
    """Whether one variant build is cleared for one stage now, and why (not)."""

    fingerprint: str
    variant: str
    stage: str
    cleared: bool
    since: str | None  #: when its current streak of passing decisions at this stage began
    decision: Decision | None  #: its latest decision at this stage
    reasons: tuple[str, ...] = ()  #: why it is not cleared
    #: its environment then and now (evalsuite.releases.environment); None: not checked (not cleared, or not asked)
    environment: EnvironmentCheck | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def stale(self) -> bool:
        """Cleared, but the environment it would run in now differs from the one it was cleared with."""
        return self.cleared and self.environment is not None and self.environment.stale


@dataclass(frozen=True)
class StageDeployments:
    """What a stage runs now and what it would roll back to."""

    stage: str
    current: Deployment | None
    target: Deployment | None  #: the rollback target (None: see `why_no_target`)
    target_clearance: Clearance | None
    why_no_target: str = ""
    history: tuple[Deployment, ...] = ()


@dataclass(frozen=True)
class ReleaseStatus:
    """The ledger read against the rubrics and review verdicts of now."""

    clearances: tuple[Clearance, ...]
    deployments: Mapping[str, StageDeployments] = field(default_factory=dict)

    def of(self, fingerprint: str, stage: str) -> Clearance | None:
        return next((c for c in self.clearances if c.fingerprint == fingerprint and c.stage == stage), None)

    def cleared(self, stage: str | None = None) -> list[Clearance]:
        return [c for c in self.clearances if c.cleared and (stage is None or c.stage == stage)]

    def stale(self, stage: str | None = None) -> list[Clearance]:
        """The cleared builds whose environment changed since (checked only when asked: `environments`)."""
        return [c for c in self.cleared(stage) if c.stale]


class RubricDigests:
    """The digest of a stage's rules now, per rubric file (read once), or why it cannot be had."""

    def __init__(self, rubric: Rubric | None = None):
        self.rubric = rubric  #: judge every decision against this rubric instead of the file it names
        self._loaded: dict[str, Rubric | str] = {}

    def __call__(self, path: str, stage: str) -> tuple[str | None, str]:
        """(digest, "") or (None, why)."""
        rub = self.rubric if self.rubric is not None else self._load(path)
        if isinstance(rub, str):
            return None, rub
        try:
            return rub.digest(stage), ""
        except EvalsuiteError as exc:
            return None, f"rubric {rub.path}: {exc}"

    def _load(self, path: str) -> Rubric | str:
        if path not in self._loaded:
            try:
                self._loaded[path] = load_rubric(path)
            except EvalsuiteError as exc:
                self._loaded[path] = f"its rubric cannot be read now ({str(exc).splitlines()[-1]})"
        return self._loaded[path]


def clearance(history: Sequence[Decision], digests: RubricDigests, verdicts: Mapping[int, Mapping[str, object]]) -> Clearance:
    """The clearance of one build at one stage from its decisions there (oldest first) and the current
    review verdicts on its outputs (item id -> verdict)."""
    last = history[-1]
    reasons: list[str] = []
    if not last.passed:
        rules = f": {', '.join(last.failed_rules)}" if last.failed_rules else ""
        reasons.append(f"its latest {last.stage} decision (#{last.id}, run {last.run_id}) was {last.status}{rules}")
    digest, why = digests(last.rubric, last.stage)
    if digest is None:
        reasons.append(why)
    elif digest != last.rubric_digest:
        reasons.append(f"the {last.stage} rules of {last.rubric} changed since decision #{last.id}: judge it again")
    for case, w in sorted(last.waivers.items()):
        now = verdicts.get(int(w.get("item", -1)))
        if now is not None and now.get("verdict") != "acceptable":
            reasons.append(f"waiver expired: item #{w['item']} ({case}) is now {now['verdict']} ({now.get('reviewer')})")
    regs = sorted(f"#{iid} ({v.get('case_id')}, {v.get('reviewer')})" for iid, v in verdicts.items() if v.get("verdict") == "regression")
    if regs:
        reasons.append(f"a reviewer judged {len(regs)} of its output(s) a regression: {', '.join(regs[:5])}")
    since = None
    if not reasons:
        streak = list(history)
        while len(streak) > 1 and streak[-2].passed and streak[-2].rubric_digest == last.rubric_digest:
            streak.pop()
        since = streak[-1].created
    return Clearance(
        fingerprint=last.fingerprint, variant=last.variant, stage=last.stage, cleared=not reasons, since=since, decision=last, reasons=tuple(reasons)
    )


def deployment_stack(history: Sequence[Deployment]) -> list[Deployment]:
    """The stage's deployments as a stack (oldest first, the running one last)."""
    stack: list[Deployment] = []
    for d in history:
        if d.action == "promote":
            stack = [s for s in stack if s.fingerprint != d.fingerprint] + [d]
            continue
        while stack and stack[-1].fingerprint != d.fingerprint:
            stack.pop()
        if not stack:
            stack.append(d)
        else:
            stack[-1] = d
    return stack


def stage_deployments(stage: str, history: Sequence[Deployment], clear: Callable[[str], Clearance | None]) -> StageDeployments:
    """What `stage` runs and its rollback target: the nearest earlier entry of its stack still cleared."""
    if not history:
        return StageDeployments(stage, None, None, None, f"nothing was promoted to {stage} yet (evalsuite promote VARIANT --to {stage})", ())
    stack = deployment_stack(history)
    current = stack[-1]
    skipped = []
    for d in reversed(stack[:-1]):
        c = clear(d.fingerprint)
        if c is not None and c.cleared:
            return StageDeployments(stage, current, d, c, "", tuple(history))
        skipped.append(f"{d.variant} ({d.fingerprint[:12]}): {c.reason if c is not None else f'no {stage} decision'}")
    target = _rolled_back_from(stack, history, clear)
    if target is not None:  # the stage ran it before a rollback took it off: a deployment too (issue 38)
        return StageDeployments(stage, current, target[0], target[1], "", tuple(history))
    why = f"no variant {stage} ran before {current.variant} ({current.fingerprint[:12]}) is still cleared"
    if skipped:
        why += ": " + "; ".join(skipped)
    elif len(stack) == 1:
        why = f"{stage} has run only {current.variant} ({current.fingerprint[:12]}): there is no earlier variant to roll back to"
    return StageDeployments(stage, current, None, None, why, tuple(history))


def _rolled_back_from(
    stack: Sequence[Deployment], history: Sequence[Deployment], clear: Callable[[str], Clearance | None]
) -> tuple[Deployment, Clearance] | None:
    """The latest deployment that a rollback took off the stack and that is still cleared, or None."""
    on_stack = {d.fingerprint for d in stack}
    for d in reversed(history):
        if d.fingerprint in on_stack:
            continue
        c = clear(d.fingerprint)
        if c is not None and c.cleared:
            return d, c
        on_stack.add(d.fingerprint)  # its latest entry decides
    return None


def _lookup(clear: Mapping[tuple[str, str], Clearance], fingerprint: str, *, stage: str) -> Clearance | None:
    return clear.get((fingerprint, stage))


def with_environments(clear: Mapping[tuple[str, str], Clearance], probe: EnvironmentProbe) -> dict[tuple[str, str], Clearance]:
    """Each cleared build's environment then (its latest decision's) and now (`probe`, once per build;
    not asked when the decision recorded none: unknown either way)."""
    now: dict[str, tuple[dict | None, str]] = {}
    out = dict(clear)
    for key, c in clear.items():
        if not c.cleared or c.decision is None:
            continue
        if c.decision.environment is None:
            out[key] = replace(c, environment=check_environment(None, None))
            continue
        if c.fingerprint not in now:
            now[c.fingerprint] = probe(c.decision.spec)
        env, why = now[c.fingerprint]
        out[key] = replace(c, environment=check_environment(c.decision.environment, env, why))
    return out


def release_status(
    ledger: ReleaseLedger,
    verdicts: Verdicts = no_verdicts,
    *,
    fingerprints: Sequence[str] | None = None,
    rubric: Rubric | None = None,
    environments: EnvironmentProbe | None = None,
) -> ReleaseStatus:
    """Every (build, stage) the ledger has decisions for (or only these builds), and every stage's deployments.

    `verdicts` gives the review queue's current verdicts (evalsuite.review.api.fingerprint_verdicts);
    `rubric`: judge every decision against this rubric instead of the file it recorded; `environments`:
    check each cleared build's environment now against the one it was cleared with (stale or not)."""
    decisions = ledger.decisions()
    wanted = set(fingerprints) if fingerprints is not None else None
    deployments = ledger.deployments()
    fps = {d.fingerprint for d in decisions if wanted is None or d.fingerprint in wanted} | {d.fingerprint for d in deployments}
    by_key: dict[tuple[str, str], list[Decision]] = {}
    for d in decisions:
        if d.fingerprint in fps:
            by_key.setdefault((d.fingerprint, d.stage), []).append(d)
    reviews: dict[str, dict[int, Mapping[str, object]]] = {}
    for queue in sorted({hist[-1].queue for hist in by_key.values()}):
        found = verdicts(queue or None, sorted({fp for (fp, _), h in by_key.items() if h[-1].queue == queue}))
        for fp, items in found.items():
            reviews.setdefault(fp, {}).update(items)
    digests = RubricDigests(rubric)
    order = {s: i for i, s in enumerate(STAGES)}
    clear = {key: clearance(hist, digests, reviews.get(key[0], {})) for key, hist in by_key.items()}
    if environments is not None:
        clear = with_environments(clear, environments)
    stages = sorted({d.stage for d in deployments}, key=lambda s: order.get(s, 99))
    deps = {s: stage_deployments(s, [d for d in deployments if d.stage == s], partial(_lookup, clear, stage=s)) for s in stages}
    ordered = sorted(clear.values(), key=lambda c: (order.get(c.stage, 99), c.stage, c.variant, c.fingerprint))
    return ReleaseStatus(tuple(c for c in ordered if wanted is None or c.fingerprint in wanted), deps)
