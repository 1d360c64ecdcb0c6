"""An adaptive run's decisions, as the gate's input: the sequential checks re-evaluated on the run's
generated prefix, in the recorded order (evalsuite.verdict.gate turns them into rule results).

A fixed-n test on the cases an adaptive run happened to stop at would be biased (the run stopped
*because* of what those cases showed), so the gate of a run with `adaptive.json` uses these
decisions instead. For the stage the run was made for, they reproduce the recorded decision (a
difference means the scores or the rubric changed since, and is reported); for another stage they
are still valid, because the e-processes hold at any stopping time, but a rule of that stage may
stay undecided (the run stopped for the other stage's rules): the run is then not judgeable for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import EvalsuiteError
from ..verdict.compare import Comparison
from ..verdict.decisions import AdaptiveDecisions
from ..verdict.rubric import StageRubric
from .checks import CheckResult, Look, VariantState, evaluate
from .driver import STATE_FILE, checks_for, load_state

if TYPE_CHECKING:
    from ..run.store import RunStore

__all__ = ["STATE_FILE", "adaptive_decisions", "is_adaptive"]


def is_adaptive(store: RunStore) -> bool:
    """Whether a stored run was made adaptively (it holds `adaptive.json`)."""
    return (store.dir / STATE_FILE).is_file()


def adaptive_decisions(store: RunStore, sr: StageRubric, comparison: Comparison) -> AdaptiveDecisions:
    """The sequential decisions of an adaptive run for `sr`'s stage, with the problems that keep it
    from being judged (an unfinished variant, an undecided stage, a changed recorded decision)."""
    state = load_state(store)
    if state is None:  # is_adaptive said the file is there: it was removed since
        raise EvalsuiteError(f"{store.dir / STATE_FILE}: the adaptive state is missing")
    checks, base, others = checks_for(store, state, sr)
    recorded_stage = state["settings"].get("stage")
    problems: list[str] = []
    notes: list[str] = []
    out: dict[str, tuple[CheckResult, ...]] = {}
    verdicts: dict[str, str] = {}
    for variant in [v for v in comparison.variants if v in state.get("variants", {})]:
        entry = state["variants"][variant]
        sequence = [c for b in entry.get("batches", []) for c in b]
        look = Look(method=sr.multiple_testing, noise_floor=comparison.noise_floor, bounds=True, sequence=sequence)
        st = evaluate(variant, checks, base, others.get(variant, {}), set(sequence), state["order"], look)
        problems += _problems(variant, entry, st, sr.stage, recorded_stage)
        notes.append(_stop_note(variant, st, len(state["order"])))
        out[variant] = tuple(st.results)
        verdicts[variant] = st.verdict
    return AdaptiveDecisions(sr.stage, out, verdicts, tuple(problems), tuple(notes))


def _problems(variant: str, entry: dict, st: VariantState, stage: str, recorded_stage: str | None) -> list[str]:
    out = []
    recorded = (entry.get("state") or {}).get("verdict")
    if stage == recorded_stage and recorded and recorded != st.verdict:
        out.append(
            f"{variant}: the recorded adaptive decision ({recorded}) differs from the one recomputed now ({st.verdict}): the scores or the rubric changed since the run"
        )
    if not entry.get("stopped"):
        out.append(f"{variant}: the adaptive run did not finish for this variant (resume it)")
    elif st.verdict == "open":
        out.append(
            f"{variant}: stage {stage} is not decided by the cases this adaptive run generated (it stopped for stage {recorded_stage}); run it adaptively for {stage}"
        )
    return out


def _stop_note(variant: str, st: VariantState, total: int) -> str:
    decider = _decider(st)
    after = st.decided_after if st.decided_after is not None else st.generated
    return f"{variant}: adaptive verdict {st.verdict} after {after} of {total} cases ({st.generated} generated)" + (
        f"; decided by {decider}" if decider else ""
    )


def _decider(st: VariantState) -> str:
    if st.verdict == "fail":
        first = min((r for r in st.results if r.severity == "block" and r.status == "fail"), key=lambda r: r.variant_cases or 0)
        return f"{first.rule} ({first.scenario}/{first.metric}, {first.how}, after {first.decided_at} of its {first.population} cases)"
    if st.verdict == "pass":
        block = [r for r in st.results if r.severity == "block"]
        if block:
            last = max(block, key=lambda r: r.variant_cases or 0)
            return (
                f"the last block rule to pass: {last.rule} ({last.scenario}/{last.metric}, {last.how}, after {last.decided_at} of its {last.population} cases)"
            )
    return ""
