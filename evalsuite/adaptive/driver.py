"""`evalsuite run SUITE --adaptive`: generate a variant's cases batch by batch, in a seeded order,
and stop as soon as the stage's block rules have decided (evalsuite.adaptive.checks).

Flow: the baseline (and any `noise: true` rerun) runs in full first, through the ordinary runner
and cache, and is scored. Then each variant draws its cases in the run's seeded order (stratified by
scenario), skipping cases no open block rule needs; after each batch the new outputs are scored and
every check is re-evaluated on the generated prefix. Generation goes through the runner's own
`runner.run_variant` (cache, error handling, durability), one batch of cases at a time; scoring reuses
the cache's stored scores (evalsuite.scoring.reuse), so the baseline is not re-scored batch after
batch and a warm adaptive re-run calls no scorer.

State, in the run directory's `adaptive.json` (replaced atomically after every step): the settings,
the case order, and per variant the completed batches, the batch in flight, and the latest decision
of every check. A kill at any moment loses at most the batch in flight: resuming (`--resume RUN`)
re-runs that same batch (its stored outputs come from the run and cache, only the rest is generated)
and then continues the same sequence, so it reaches the same decision as an uninterrupted run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import EvalsuiteError
from ..run.store import RunStore
from ..verdict.compare import per_case
from .checks import AdaptiveSettings, Check, Look, VariantState, build_checks, evaluate, is_done, needed_cases, replay, seeded_order

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..verdict.rubric import StageRubric

log = logging.getLogger("evalsuite")

STATE_FILE = RunStore.ADAPTIVE  #: the adaptive state file (named in RunStore)
SCHEMA_VERSION = 1


@dataclass
class AdaptiveResult:
    """What an adaptive run did: the ordinary run result plus each variant's stopping point."""

    run: Any  #: runner.RunResult of the reference part (baseline and noise runs) and the variants
    states: dict = field(default_factory=dict)  #: variant -> VariantState at its stop

    @property
    def store(self) -> RunStore:
        return self.run.store


def split_records(records, baseline: str) -> tuple[dict, dict]:
    """Score records -> (baseline {(scenario, metric): {case: CaseAgg}}, {variant: same})."""
    per = per_case(records)
    base: dict = {}
    others: dict = {}
    for (v, s, m), aggs in per.items():
        if v == baseline:
            base[(s, m)] = aggs
        else:
            others.setdefault(v, {})[(s, m)] = aggs
    return base, others


def load_state(store: RunStore) -> dict | None:
    return store.read_json(STATE_FILE)


def checks_for(store: RunStore, state: dict, sr: StageRubric) -> tuple[list[Check], dict, dict]:
    """The run's sequential checks for the stage rubric `sr`, and the baseline's and variants' per-case scores."""
    settings = AdaptiveSettings(**state["settings"])
    base, others = split_records(store.scores(), store.signature.get("baseline") or "")
    return build_checks(sr, base, state["order"], settings), base, others


def run_adaptive(suite, options=None, settings: AdaptiveSettings | None = None) -> AdaptiveResult:
    """Run a suite adaptively (or resume such a run): the reference variants in full, every other
    variant until its verdict for `settings.stage` is decided."""
    from ..run.runner import RunOptions, make_backend, select_cases, select_variants
    from ..run.store import DEFAULT_CACHE, GenerationCache
    from ..scoring.pipeline import run_suite
    from ..scoring.run import score_run
    from ..verdict.rubric import load_rubric, resolve_rubric_path

    opts = options or RunOptions()
    settings = settings or AdaptiveSettings()
    _check_settings(settings)
    cases = select_cases(suite, opts.scenarios, opts.limit)
    chosen = [v for v in select_variants(suite, opts.variants) if not v.baseline]
    reference = [v.name for v in chosen if v.noise]
    targets = [v for v in chosen if not v.noise]

    ref = run_suite(suite, replace(opts, variants=reference, score=True))
    store = ref.store
    state, settings = _start_or_resume(store, settings, cases, opts.resume)
    store.write_json(STATE_FILE, state)
    store.mark_complete(False, adaptive=True)
    sr = load_rubric(resolve_rubric_path(settings.rubric, store.suite)).for_stage(settings.stage)
    base, _ = split_records(store.scores(), suite.baseline.name)
    noise_floor = None
    if reference:
        from ..verdict.compare import compare_run

        noise_floor = compare_run(store, n_resamples=99).noise_floor
    cache = GenerationCache(opts.cache_path or suite.cache or DEFAULT_CACHE)
    run = _Run(
        store=store,
        state=state,
        settings=settings,
        sr=sr,
        checks=build_checks(sr, base, state["order"], settings),
        base=base,
        noise_floor=noise_floor,
        baseline=suite.baseline.name,
        by_id={c.id: c for c in cases},
        cache=cache,
        ref=ref,
        summaries=store.read_json(store.VARIANTS, {}) or {},
        progress=opts.progress,
    )
    result = AdaptiveResult(ref)
    try:
        for v in targets:
            backend, fp = _bound_backend(run, v, opts.backend_factory or make_backend, cases)
            try:
                result.states[v.name] = _adaptive_variant(run, v, backend, fp)
            finally:
                backend.close()
        ref.variants = run.summaries
        store.mark_complete(True, adaptive=True, generated=ref.generated, cached=ref.cached, errors=ref.errors)
        score_run(store, cases, cache=cache)  # always: the gate of an adaptive run replays its decisions from the scores
    finally:
        cache.close()
    return result


def _check_settings(settings: AdaptiveSettings) -> None:
    if settings.until not in ("verdict", "rules"):
        raise EvalsuiteError(f"adaptive: until must be 'verdict' or 'rules', got {settings.until!r}")
    if not 0 < settings.split < 1:
        raise EvalsuiteError(f"adaptive: split must be between 0 and 1 (exclusive), got {settings.split!r}")
    if not 0 < settings.tolerance < 1:
        raise EvalsuiteError(f"adaptive: tolerance must be a drop between 0 and 1 (exclusive), got {settings.tolerance!r}")


def _start_or_resume(store: RunStore, settings: AdaptiveSettings, cases, resume) -> tuple[dict, AdaptiveSettings]:
    """A new run's state (settings with the rubric's resolved path, the seeded order), or a resumed
    run's, whose recorded settings win."""
    from ..verdict.rubric import resolve_rubric_path

    state = load_state(store)
    if state is None:
        settings = replace(settings, rubric=str(resolve_rubric_path(settings.rubric, store.suite).resolve()))
        return {"schema_version": SCHEMA_VERSION, "settings": settings.to_dict(), "order": seeded_order(cases, settings.seed), "variants": {}}, settings
    recorded = AdaptiveSettings(**state["settings"])
    if recorded != replace(settings, rubric=recorded.rubric) and resume:
        log.warning("resuming %s with its recorded adaptive settings (%s)", store.run_id, recorded.to_dict())
    if sorted(state["order"]) != sorted(c.id for c in cases):
        raise EvalsuiteError(f"cannot resume {store.run_id} adaptively: its case order covers other cases than the suite selects now")
    return state, recorded


@dataclass(kw_only=True)
class _Run:
    """What the variants of one adaptive run share."""

    store: RunStore
    state: dict  #: adaptive.json's contents, saved after every step
    settings: AdaptiveSettings
    sr: Any  #: the stage's rubric
    checks: list[Check]
    base: dict  #: the baseline's per-case scores
    noise_floor: Any
    baseline: str
    by_id: dict  #: case id -> case
    cache: Any  #: the GenerationCache (generations and stored scores)
    ref: Any  #: runner.RunResult of the reference part
    summaries: dict  #: variants.json
    progress: bool

    def save(self) -> None:
        self.store.write_json(STATE_FILE, self.state, indent=None)  # rewritten twice a batch: the compact, fast encoding


def _bound_backend(run: _Run, v, factory, cases) -> tuple[Backend, str]:
    """The variant's backend and fingerprint, recorded in the run's signature (a resumed run refuses a changed variant)."""
    from ..run.runner import build_backend, engine_identities, refuse_changed_variants
    from ..run.signature import environments_of

    backend = build_backend(factory, v, cases)
    fp = backend.fingerprint()
    try:
        refuse_changed_variants(run.store, {v.name: fp})
    except EvalsuiteError:
        backend.close()
        raise
    sig = run.store.signature
    sig.setdefault("variants", {})[v.name] = fp
    sig.setdefault("engines", {}).update(engine_identities({v.name: backend}))
    sig.setdefault("environments", {}).update(environments_of({v.name: backend}))
    run.store.write_json(run.store.SIGNATURE, sig)
    return backend, fp


def _adaptive_variant(run: _Run, v, backend, fp: str) -> VariantState:
    """Generate one variant batch by batch until its checks decide (or its cases run out), saving
    the state before and after every batch; its state at the stop."""
    from ..run.progress import progress_bar
    from ..run.runner import VariantJob, run_variant

    order, store = run.state["order"], run.store
    entry = run.state["variants"].setdefault(v.name, {"batches": [], "pending": None, "stopped": False})
    outputs = _Outputs(store, (run.baseline, v.name), v.generation.samples)
    generated = {c for b in entry["batches"] for c in b}
    var: dict = {}  #: the variant's per-case scores, (scenario, metric) -> case -> CaseAgg, a batch at a time
    _add_scores(var, _scored(run, v.name, outputs, generated) if generated else [])
    job = VariantJob(
        variant=v,
        backend=backend,
        fingerprint=fp,
        cases=[],
        store=store,
        cache=run.cache,
        done={g.key() for g in store.generations() if g.ok},
        result=run.ref,
        progress=False,
    )
    batch_size = run.settings.batch_size or v.generation.batch_size
    with progress_bar(run.progress, f"{v.name} (adaptive)", len(order)) as advance:
        advance(len(generated))
        while not entry["stopped"]:
            batch = entry["pending"] or _next_batch(run, v.name, entry, var, generated, batch_size)
            if not batch:
                break
            cases = [run.by_id[c] for c in batch]
            run.summaries[v.name] = run_variant(replace(job, cases=cases, previous=run.summaries.get(v.name)))
            store.write_json(store.VARIANTS, run.summaries)
            outputs.add(store, set(batch))
            _add_scores(var, _scored(run, v.name, outputs, set(batch)))
            entry["batches"].append(batch)
            entry["pending"] = None
            generated |= set(batch)
            run.save()
            advance(len(batch))
    st = _evaluate(v.name, run, var, entry, bounds=True)
    st.total = len(order)
    entry["state"] = st.to_dict()
    entry["generated"], entry["total"] = len(generated), len(order)
    run.save()
    return st


def _next_batch(run: _Run, name: str, entry: dict, var: dict, generated: set, batch_size: int) -> list[str]:
    """The variant's next batch of cases (saved as pending before it is generated), or [] when it
    stops: its verdict decided, or its cases exhausted (the stop is saved too)."""
    st = _evaluate(name, run, var, entry)
    entry["state"] = st.to_dict()
    nxt = [] if is_done(st, run.settings.until) else needed_cases(st, run.checks, run.state["order"], generated)[:batch_size]
    if not nxt:
        entry["stopped"] = True
        entry["stop"] = f"verdict {st.verdict}" if st.verdict != "open" else "case sets exhausted"
    else:
        entry["pending"] = nxt
    run.save()
    return nxt


class _Outputs:
    """The baseline's and one variant's stored outputs, by case, kept in memory for the whole
    variant: a batch adds its own outputs, so the run's generations.jsonl is read once, not per batch."""

    def __init__(self, store: RunStore, pair: tuple[str, str], samples: int) -> None:
        self.variant, self.samples = pair[1], samples
        self.by_case: dict[tuple[str, str], list] = {}
        for g in store.generations():
            if g.variant in pair:
                self.by_case.setdefault((g.variant, g.case_id), []).append(g)
        self.pair = pair

    def add(self, store: RunStore, case_ids: set) -> None:
        """A generated batch's outputs of the variant (the store hands them from memory: its own appends)."""
        for cid in case_ids:
            self.by_case[(self.variant, cid)] = store.lookup([(self.variant, cid, s) for s in range(self.samples)])

    def of(self, case_ids: set) -> list:
        return [g for v in self.pair for c in sorted(case_ids) for g in self.by_case.get((v, c), ())]


def _scored(run: _Run, name: str, outputs: _Outputs, case_ids: set) -> list:
    """The variant's score records of these cases (stored scores reused, the baseline's too)."""
    from ..scoring.run import score_generations

    cases = [run.by_id[c] for c in run.state["order"] if c in case_ids]
    return [r for r in score_generations(cases, outputs.of(case_ids), run.baseline, cache=run.cache) if r.variant == name]


def _add_scores(var: dict, records: list) -> None:
    """A batch's score records into the variant's per-case scores: each case comes in one batch, so
    its aggregate is built once (the records of earlier batches are not aggregated again)."""
    for (_v, s, m), aggs in per_case(records).items():
        var.setdefault((s, m), {}).update(aggs)


def _evaluate(name: str, run: _Run, var: dict, entry: dict, bounds: bool = False) -> VariantState:
    sequence = [c for b in entry["batches"] for c in b]
    look = Look(method=run.sr.multiple_testing, noise_floor=run.noise_floor, bounds=bounds, sequence=sequence)
    return evaluate(name, run.checks, run.base, var, set(sequence), run.state["order"], look)


def replay_run(
    store: RunStore, stage: str = "production", rubric_path: str | None = None, seed: int = 0, settings: AdaptiveSettings | None = None
) -> dict[str, VariantState]:
    """What `--adaptive` would have generated on a stored *full* run: every variant replayed through
    the sequential checks in the seeded order, batch by batch, from its stored scores (nothing is
    generated). Returns variant -> its state at the stop (`generated` of `total` cases)."""
    from ..scoring.run import run_cases
    from ..verdict.compare import compare_run, variant_infos
    from ..verdict.rubric import load_rubric, resolve_rubric_path

    settings = settings or AdaptiveSettings(stage=stage, seed=seed)
    sr = load_rubric(resolve_rubric_path(rubric_path or settings.rubric, store.suite)).for_stage(settings.stage)
    cases = run_cases(store)
    order = seeded_order(cases, settings.seed)
    base, others = split_records(store.scores(), store.signature.get("baseline") or "")
    checks = build_checks(sr, base, order, settings)
    infos = variant_infos(store)
    noise = [i.name for i in infos if i.noise and i.name in others]
    floor = compare_run(store, n_resamples=99).noise_floor if noise else None
    batch = settings.batch_size or int(((store.suite or {}).get("generation") or {}).get("batch_size") or 8)
    out = {}
    for info in infos:
        if info.baseline or info.noise or info.name not in others:
            continue
        st = replay(info.name, checks, base, others[info.name], order, batch, settings.until, Look(method=sr.multiple_testing, noise_floor=floor))
        out[info.name] = st
    return out


def adaptive_summary(result: AdaptiveResult) -> list[dict]:
    """Where each variant of an adaptive run stopped and why, as data (`evalsuite run --adaptive` prints it)."""
    out = []
    for name, st in result.states.items():
        decided = [r for r in st.results if r.severity == "block" and r.status != "open"]
        failed = [
            {"rule": r.rule, "scenario": r.scenario, "metric": r.metric, "reason": r.reason} for r in st.results if r.status == "fail" and r.severity == "block"
        ]
        out.append({"variant": name, "verdict": st.verdict, "generated": st.generated, "total": st.total, "decided_checks": len(decided), "failed": failed})
    return out


def replay_summary(store: RunStore, fixed_failed: dict[str, bool], stage: str, seed: int = 0) -> dict:
    """The demo's adaptive line as data: replaying the stored full run through the sequential checks
    in the seeded order (nothing generated), how many generations the adaptive verdicts needed against
    the full run, and which variants' adaptive verdict differs from the fixed-n one (`fixed_failed`:
    variant -> whether a statistical rule failed it)."""
    states = replay_run(store, stage=stage, seed=seed)
    samples = int(((store.suite or {}).get("generation") or {}).get("samples") or 1)
    need = sum(st.generated for st in states.values()) * samples
    full = sum(st.total for st in states.values()) * samples
    differ = [n for n, st in states.items() if (st.verdict == "fail") != bool(fixed_failed.get(n))]
    return {"stage": stage, "seed": seed, "needed": need, "full": full, "variants": len(states), "same": len(states) - len(differ), "differ": differ}
