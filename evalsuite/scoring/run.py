"""Score a stored run: every registered scorer over every stored output, no model needed."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..backends.base import Generation
from ..cases.caseset import Case
from .base import SCORERS, Score, ScoreInput, ScoreRecord, ScorerSpec

log = logging.getLogger("evalsuite")

#: modules whose import registers scorers (pure Python; heavy imports stay inside functions)
SCORER_MODULES = (
    "evalsuite.scoring.terminology",
    "evalsuite.scoring.jsonformat",
    "evalsuite.scoring.citations",
    "evalsuite.scoring.grounding",
    "evalsuite.scoring.code",
    "evalsuite.scoring.similarity",
    "evalsuite.scoring.tools",
)


def _record(variant: str, case: Case, sample: int | None, sc: Score) -> ScoreRecord:
    """One scorer's score of a case (at `sample`, or None for a case-level score) as a stored record."""
    return ScoreRecord(
        variant=variant,
        case_id=case.id,
        sample=sample,
        scenario=case.scenario,
        kind=case.kind,
        metric=sc.metric,
        value=sc.value,
        passed=sc.passed,
        higher_is_better=sc.higher_is_better,
        details=sc.details,
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


def score_generations(
    cases: Sequence[Case], generations: Iterable[Generation], baseline: str, scorers: Sequence[ScorerSpec] | None = None, cache=None
) -> list[ScoreRecord]:
    """Per-case scores for every variant; drift scorers see the baseline's output for the same sample.

    With `cache` (a store.GenerationCache), a scorer whose key and input are already stored is not
    called: its stored scores are used (evalsuite.scoring.reuse), and fresh ones are stored.
    """
    specs = list(scorers) if scorers is not None else load_scorers()
    gens: dict[tuple[str, str], dict[int, Generation]] = defaultdict(dict)
    for g in generations:
        gens[(g.variant, g.case_id)][g.sample] = g
    variants = sorted({v for v, _ in gens}, key=lambda v: (v != baseline, v))
    work = _work(cases, gens, variants, baseline)
    reuse = _Reuse(cache, specs, work) if cache is not None else None
    records: list[ScoreRecord] = []
    for i, (variant, case, inputs) in enumerate(work):
        for spec in specs:
            if spec.applies(case):
                records += _score_case(spec, i, variant, case, inputs, reuse)
    if reuse:
        reuse.flush()
    records.extend(_set_level(cases, gens, variants, specs))
    return records


def as_shown(case: Case, generations: Iterable[Generation]) -> Case:
    """The case as a context-trimming variant showed it (`extra["context_trim"]`, evalsuite.run.trimming):
    without the documents it dropped, so `[2]` means the second document the model saw, and a
    restricted document it never saw cannot count as leaked. Other variants: the case itself."""
    dropped = {d for g in generations for d in ((g.extra or {}).get("context_trim") or {}).get("dropped", ())}
    return replace(case, context=tuple(d for d in case.context if d.id not in dropped)) if dropped else case


def _work(cases: Sequence[Case], gens: dict, variants: Sequence[str], baseline: str) -> list[tuple[str, Case, list[ScoreInput]]]:
    """(variant, case, one ScoreInput per sample) in scoring order: every case a variant has outputs for."""
    work = []
    for variant in variants:
        for full in cases:
            samples = gens.get((variant, full.id))
            if not samples:
                continue
            case = as_shown(full, samples.values())
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
                        calls=g.tool_calls if g.ok else None,
                        baseline_calls=bg.tool_calls if bg else None,
                    )
                )
            work.append((variant, case, inputs))
    return work


def _score_case(spec: ScorerSpec, item: int, variant: str, case: Case, inputs: list[ScoreInput], reuse: _Reuse | None) -> list[ScoreRecord]:
    """One scorer on one case of one variant (each sample, or the case as a whole); a scorer that
    raises adds one `<scorer>.scorer_error` record: one broken scorer must not lose the others."""
    out = []
    try:
        if spec.level == "output":
            for j, inp in enumerate(inputs):
                scores = reuse.scores(spec, item, j, lambda spec=spec, inp=inp: spec.fn(inp)) if reuse else spec.fn(inp)
                out += [_record(variant, case, inp.sample, sc) for sc in scores]
        elif spec.level == "case":
            scores = reuse.scores(spec, item, None, lambda: spec.fn(case, inputs)) if reuse else spec.fn(case, inputs)
            out += [_record(variant, case, None, sc) for sc in scores]
    except Exception as exc:  # noqa: BLE001 - one broken scorer must not lose the others
        log.error("scorer %s failed on case %s (%s): %s", spec.name, case.id, variant, exc)
        error = Score(f"{spec.name}.scorer_error", None, passed=None, higher_is_better=True, details={"error": f"{type(exc).__name__}: {exc}"})
        out.append(_record(variant, case, None, error))
    return out


class _Reuse:
    """Stored scores for this scoring pass, fetched in bulk per scorer; fresh ones stored at the end."""

    def __init__(self, cache, specs: Sequence[ScorerSpec], work: list) -> None:
        from . import reuse

        self.cache, self.reuse = cache, reuse
        digests: dict[int, str] = {}
        self.input_keys: list[list[str]] = []
        self.case_keys: list[str] = []
        for _, case, inputs in work:
            d = digests.get(id(case)) or digests.setdefault(id(case), case.digest())
            keys = [reuse.input_key(d, inp) for inp in inputs]
            self.input_keys.append(keys)
            self.case_keys.append(reuse.case_key(d, keys))
        self.scorer_keys = {spec.name: reuse.scorer_key(spec) for spec in specs}
        dropped = cache.use_scorer_keys(self.scorer_keys)
        if dropped:
            log.info("score cache: dropped %d stored score(s) of older scorer versions", dropped)
        self.stored: dict[str, dict[str, str]] = {}
        for spec in specs:
            wanted = [
                k
                for (_, case, _), keys, ck in zip(work, self.input_keys, self.case_keys)
                if spec.applies(case)
                for k in (keys if spec.level == "output" else [ck])
            ]
            self.stored[spec.name] = cache.get_scores(self.scorer_keys[spec.name], wanted) if wanted else {}
        self.fresh: list[tuple[str, str, str]] = []
        self.reused = self.computed = 0

    def scores(self, spec: ScorerSpec, item: int, sample: int | None, compute) -> list[Score]:
        """The stored scores of (scorer, input), else `compute()`'s (stored unless a sandbox failed)."""
        key = self.input_keys[item][sample] if sample is not None else self.case_keys[item]
        payload = self.stored[spec.name].get(key)
        if payload is not None:
            self.reused += 1
            return self.reuse.load_scores(payload)
        self.computed += 1
        fresh = list(compute())
        payload = self.reuse.dump_scores(fresh)
        if self.reuse.storable(fresh):
            self.stored[spec.name][key] = payload  # a second identical output in this pass reuses it
            self.fresh.append((self.scorer_keys[spec.name], key, payload))
        return self.reuse.load_scores(payload)  # JSON types, exactly as a later run reads them back

    def flush(self) -> None:
        if self.fresh:
            self.cache.put_scores(self.fresh)
            self.fresh = []
        log.debug("scores: %d scorer calls reused from the cache, %d computed", self.reused, self.computed)


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
            out.append(_record(variant, orig, None, citation_robustness(orig, cited_ids(g0.text, orig), pairs)))
    return out


def run_cases(store) -> list[Case]:
    """The cases a run was made with: its own copy (`cases.jsonl`, read once per state of the run's
    files however many consumers of one command ask), else the suite's current files."""
    from ..errors import EvalsuiteError

    if (store.dir / store.CASES).is_file() or (store.dir / store.IMPORTED_CASES).is_file():
        return list(store.memo("cases", lambda: _stored_cases(store)))
    from ..cases.caseset import suite_digest
    from ..cases.suite import load_suite

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


def _stored_cases(store) -> list[Case]:
    from ..cases.interop import from_jsonl

    text = store.text(store.CASES)
    if text is None:
        return imported_cases(store.dir / store.IMPORTED_CASES)
    # the run wrote this file from validated cases, and recorded their digest
    return from_jsonl(store.dir / store.CASES, digest=store.signature.get("case_digest"), text=text)


def imported_cases(path) -> list[Case]:
    """The documents of an imported run (evalsuite.importers): each task is its own scenario, so only
    the scenario-free scorers (drift against the baseline) apply to them."""
    import json

    out = []
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Case(id=d["id"], scenario=d["scenario"], kind=d["kind"], prompt=d.get("prompt"), title=str(d.get("target", ""))[:200], raw=d))
    return out


def score_run(store, cases: Sequence[Case] | None = None, cache=None) -> list[ScoreRecord]:
    """Score a stored run from its generations and its cases; write scores.parquet.

    With `cache` (the run's GenerationCache), stored scores of unchanged outputs are reused."""
    if cases is None:
        cases = run_cases(store)
    specs = load_scorers()
    records = score_generations(cases, store.generations(), store.signature.get("baseline"), specs, cache=cache)
    import json

    from .logits import LOGITS_FILE

    # logit agreement (computed by the demo) and an imported run's recorded metrics are kept as they are
    for kept in (store.dir / LOGITS_FILE, store.dir / store.IMPORTED_SCORES):
        if kept.is_file():
            records += [ScoreRecord.from_dict(json.loads(line)) for line in kept.read_text("utf-8").splitlines() if line.strip()]
    store.write_json("scorers.json", [s.describe() for s in specs])
    store.write_scores(records)
    if (store.dir / store.LOAD).is_file():
        store.write_load_scores(score_load(store, cases, specs, cache))
    return records


#: the name the answers of `variant` replayed under load at a level are scored under (level 0: at rest)
LOAD_MARK = "@load"


def load_variant_name(variant: str, level: int) -> str:
    """`v@load4`: variant v's answers replayed with 4 requests in flight (`v@load0`: its at-rest rerun)."""
    return f"{variant}{LOAD_MARK}{level}"


def score_load(store, cases: Sequence[Case], specs: Sequence[ScorerSpec], cache=None) -> list[ScoreRecord]:
    """Score the answers replayed under load (the first round of each level; evalsuite.run.load) with the
    run's scorers, each against the baseline's answer at rest as the run's own answers are."""
    from ..run.load_records import stored_windows

    gens = [
        Generation(
            case_id=r["case_id"],
            variant=load_variant_name(w.variant, w.level),
            sample=0,
            text=r.get("text") or "",
            error=r.get("error"),
            finish_reason="error" if r.get("error") else "stop",
        )
        for w in stored_windows(store.read_json(store.LOAD))
        if w.round == 0
        for r in w.replays
    ]
    if not gens:
        return []
    baseline = store.signature.get("baseline")
    ids = {g.case_id for g in gens}
    base = [g for g in store.generations() if g.variant == baseline and g.case_id in ids]
    records = score_generations([c for c in cases if c.id in ids], base + gens, baseline, specs, cache=cache)
    return [r for r in records if LOAD_MARK in r.variant]
