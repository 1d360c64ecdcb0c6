"""Score a stored run: every registered scorer over every stored output, no model needed."""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Iterable, Sequence

from ..backends.base import Generation
from ..cases import Case
from .base import SCORERS, ScoreInput, ScoreRecord, ScorerSpec

log = logging.getLogger("evalsuite")

#: modules whose import registers scorers (pure Python; heavy imports stay inside functions)
SCORER_MODULES = (
    "evalsuite.scoring.terminology",
    "evalsuite.scoring.jsonformat",
    "evalsuite.scoring.citations",
    "evalsuite.scoring.grounding",
    "evalsuite.scoring.code",
    "evalsuite.scoring.similarity",
)


def load_scorers() -> list[ScorerSpec]:
    import importlib

    for mod in SCORER_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            log.debug("scorer module %s not available", mod)
    return [SCORERS.get(n) for n in SCORERS.names()]


def score_generations(cases: Sequence[Case], generations: Iterable[Generation], baseline: str, scorers: Sequence[ScorerSpec] | None = None) -> list[ScoreRecord]:
    """Per-case scores for every variant; drift scorers see the baseline's output for the same sample."""
    specs = list(scorers) if scorers is not None else load_scorers()
    gens: dict[tuple[str, str], dict[int, Generation]] = defaultdict(dict)
    for g in generations:
        gens[(g.variant, g.case_id)][g.sample] = g
    variants = sorted({v for v, _ in gens}, key=lambda v: (v != baseline, v))
    records: list[ScoreRecord] = []
    for variant in variants:
        for case in cases:
            samples = gens.get((variant, case.id))
            if not samples:
                continue
            base_samples = gens.get((baseline, case.id), {})
            inputs = []
            for s in sorted(samples):
                g = samples[s]
                bg = base_samples.get(s) if variant != baseline else None
                bg = bg if bg is not None and bg.ok else None
                inputs.append(
                    ScoreInput(
                        case=case,
                        text=g.text if g.ok else "",
                        sample=s,
                        variant=variant,
                        baseline_text=bg.text if bg else None,
                        error=g.error,
                        tokens=_token_ids(g),
                        baseline_tokens=_token_ids(bg) if bg else None,
                    )
                )
            for spec in specs:
                if not spec.applies(case):
                    continue
                try:
                    if spec.level == "output":
                        for inp in inputs:
                            for sc in spec.fn(inp):
                                records.append(ScoreRecord(variant, case.id, inp.sample, case.scenario, case.kind, sc.metric, sc.value, sc.passed, sc.higher_is_better, sc.details))
                    elif spec.level == "case":
                        for sc in spec.fn(case, inputs):
                            records.append(ScoreRecord(variant, case.id, None, case.scenario, case.kind, sc.metric, sc.value, sc.passed, sc.higher_is_better, sc.details))
                except Exception as exc:  # noqa: BLE001 - one broken scorer must not lose the others
                    log.error("scorer %s failed on case %s (%s): %s", spec.name, case.id, variant, exc)
                    records.append(ScoreRecord(variant, case.id, None, case.scenario, case.kind, f"{spec.name}.scorer_error", None, None, True, {"error": f"{type(exc).__name__}: {exc}"}))
    records.extend(_set_level(cases, gens, variants, specs))
    return records


def _token_ids(g: Generation) -> tuple[int, ...] | None:
    ids = (g.extra or {}).get("token_ids")
    return tuple(ids) if ids is not None else None


def _set_level(cases: Sequence[Case], gens: dict, variants: Sequence[str], specs: Sequence[ScorerSpec]) -> list[ScoreRecord]:
    """Scores across cases (citation robustness over a question's perturbed variants)."""
    try:
        from .citations import citation_robustness, cited_ids
    except ImportError:
        return []
    by_id = {c.id: c for c in cases}
    groups: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        if c.perturbation_of and c.perturbation_of in by_id:
            groups[c.perturbation_of].append(c)
    out = []
    for variant in variants:
        for orig_id, perturbed in groups.items():
            orig = by_id[orig_id]
            g0 = gens.get((variant, orig_id), {}).get(0)
            if g0 is None or not g0.ok:
                continue
            pairs = []
            for pc in perturbed:
                gp = gens.get((variant, pc.id), {}).get(0)
                if gp is not None and gp.ok:
                    pairs.append((pc, cited_ids(gp.text, pc)))
            if not pairs:
                continue
            sc = citation_robustness(orig, cited_ids(g0.text, orig), pairs)
            out.append(ScoreRecord(variant, orig_id, None, orig.scenario, orig.kind, sc.metric, sc.value, sc.passed, sc.higher_is_better, sc.details))
    return out


def run_cases(store) -> list[Case]:
    """The cases a run was made with: its own copy (`cases.jsonl`), else the suite's current files."""
    from ..errors import EvalsuiteError
    from ..interop import from_jsonl

    own = store.dir / "cases.jsonl"
    if own.is_file():
        return from_jsonl(own)
    from ..cases import suite_digest
    from ..suite import load_suite

    suite_path = store.suite.get("path")
    try:
        suite = load_suite(suite_path)
    except Exception as exc:  # noqa: BLE001
        raise EvalsuiteError(f"cannot load the run's suite {suite_path}: {exc}") from exc
    ids = {g.case_id for g in store.generations()}
    cases = [c for c in suite.load_cases() if c.id in ids]
    if suite_digest(cases) != store.signature.get("case_digest"):
        log.warning("the cases of %s changed since the run (case digest differs): scores use the current cases", store.run_id)
    return cases


def score_run(store, cases: Sequence[Case] | None = None) -> list[ScoreRecord]:
    """Score a stored run from its generations and its cases; write scores.jsonl."""
    if cases is None:
        cases = run_cases(store)
    specs = load_scorers()
    records = score_generations(cases, store.generations(), store.signature.get("baseline"), specs)
    # logit agreement needs the models, so it is computed once (by the demo) and kept as it is
    from .logits import LOGITS_FILE

    logits = store.dir / LOGITS_FILE
    if logits.is_file():
        import json

        records += [ScoreRecord.from_dict(json.loads(line)) for line in logits.read_text("utf-8").splitlines() if line.strip()]
    store.write_json("scorers.json", [s.describe() for s in specs])
    store.write_scores(records)
    return records
