"""The one judging path: `judge_run` loads the rubric once, computes the comparison once, gathers the
review queue's and an adaptive run's decisions, and hands them to the pure gate.

`evalsuite gate`, `evalsuite report` (HTML and markdown), the pytest plugin, the demo, the notebooks
and `evalsuite run --adaptive` all call it and render its `Judgment`; none assembles a verdict of its
own, so they cannot disagree. The stage is chosen by one rule everywhere
(evalsuite.verdict.rubric.resolve_stage: the one given, else the suite's `stage:`, else production).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .adaptive.gating import adaptive_decisions, is_adaptive
from .errors import EvalsuiteError
from .review.api import default_queue_path, flag_run, keep_regressions, review_decisions
from .run.partial import full_run_command, partial_reasons
from .verdict.compare import Comparison, compare_run
from .verdict.decisions import Decisions
from .verdict.gate import gate, unmatched_rules
from .verdict.outcome import Judgment
from .verdict.rubric import DEFAULT_STAGE, Rubric, RubricError, load_rubric, resolve_rubric_path, resolve_stage

if TYPE_CHECKING:
    from .run.store import RunStore

__all__ = ["Judgment", "judge_run", "load_run_rubric"]


def load_run_rubric(store: RunStore, rubric: str | Path | Rubric | None = None) -> Rubric:
    """The rubric a run is judged by: the one given, else its suite's, else rubrics/default.yaml."""
    return rubric if isinstance(rubric, Rubric) else load_rubric(resolve_rubric_path(rubric, store.suite))


def judge_run(
    store: RunStore,
    rubric: str | Path | Rubric | None = None,
    stage: str | None = None,
    queue: str | Path | None = None,
    *,
    flag: bool = False,
    judge_noise: bool = False,
) -> Judgment:
    """Judge a stored run: the verdict and what it was judged on.

    `queue`: the review queue (default reports/review.sqlite beside the run's folder); its verdicts
    count when it exists. `flag`: first flag the run's differences into it (`gate --flag`, the demo).
    Raises EvalsuiteError for a bad rubric or an unknown stage.
    """
    suite = store.suite
    rub = load_run_rubric(store, rubric)
    stage_name, source = resolve_stage(stage, suite)
    sr = rub.for_stage(stage_name)
    cmp = _comparison(store, stage_name)
    mistakes = unmatched_rules(cmp, sr)
    if mistakes:  # a rule that matches no score would pass in silence: the rubric is wrong for this run
        raise RubricError(mistakes)
    path = Path(queue) if queue is not None else default_queue_path(store)
    flagged = flag_run(store, queue=path, rubric=rub, cmp=cmp) if flag else None
    # the clock is read here, at the entry to judging: the queue's waivers are checked as of now and
    # for this rubric, and the gate itself stays a pure function of what it is handed
    now = datetime.now(timezone.utc)
    review = review_decisions(store, cmp, rub.review, path, now=now, rubric_digest=rub.rules_digest()) if path.is_file() else None
    if path.is_file() and rub.review is not None and rub.review.keep == "regression":
        _keep_regressions(store, rub, path)
    adaptive = adaptive_decisions(store, sr, cmp) if is_adaptive(store) else None
    decisions = Decisions(review=review, adaptive=adaptive)
    verdict = gate(cmp, sr, decisions, judge_noise=judge_noise)
    partial = partial_reasons(store.signature, suite)
    if partial:  # judged, and said so: a partial run clears nothing unless asked (gate --record)
        note = f"partial run ({'; '.join(partial)}): judged, but it clears no variant; a full run: {full_run_command(suite)}"
        verdict = replace(verdict, notes=(*verdict.notes, note))
    return Judgment(
        verdict=verdict, comparison=cmp, store=store, rubric=rub, stage=stage_name, stage_source=source, decisions=decisions, flagged=flagged, partial=partial
    )


def _comparison(store: RunStore, stage: str) -> Comparison:
    """The run's comparison; at the production stage without its draft cases (`status: draft`: inferred,
    unconfirmed), which cannot fail a production gate. Either way a warning names how many drafts ran."""
    from .cases.drafts import draft_ids, draft_note
    from .scoring.run import run_cases

    try:
        own = store.text(store.CASES)
        drafts = draft_ids(own) if own is not None else frozenset(c.id for c in run_cases(store) if c.draft)
    except (EvalsuiteError, OSError, ValueError):
        drafts = frozenset()
    if not drafts:
        return compare_run(store)
    gated = stage != DEFAULT_STAGE
    cmp = compare_run(store, exclude_cases=frozenset() if gated else drafts)
    cmp = replace(cmp, warnings=cmp.warnings + (draft_note(len(drafts), stage, gated=gated),))
    if not gated and set(store.score_table().column("case_id")) <= drafts:
        cmp = replace(cmp, problems=(draft_note(len(drafts), stage, gated=False, every=True),))
    return cmp


def _keep_regressions(store: RunStore, rub: Rubric, queue: Path) -> None:
    """The rubric's `review: {keep: regression}`: every output of the run reviewed as a regression kept as a
    case (casesets/kept/), so the next run includes it."""
    import logging

    kept = keep_regressions(store, queue=queue, rubric=rub)
    new = [k for k in kept if not k.replaced]
    if new:
        logging.getLogger("evalsuite").info("kept %d regression(s) as cases in %s (review: {keep: regression})", len(new), new[0].path)
