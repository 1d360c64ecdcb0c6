"""Plan -> batches -> backend -> stored generations, with progress, caching and resume.

Order of durability: a generation is committed to the SQLite cache first, then appended to the
run. A kill between the two is harmless: on resume the cache serves it and it is appended once.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend, Generation, Request, make_backend
from ..cases.caseset import SCENARIOS, Case
from ..cases.fault_options import FaultSettings
from ..cases.suite import Suite, Variant
from ..errors import EvalsuiteError, suggest
from ..executors import Executor, make_executor
from ..executors.local import LocalExecutor
from ..perf.context import context_cost
from .calling import generate_batch
from .calling import hard_limit_s as hard_limit_s  # re-exported: callers know it from the runner
from .partial import selection
from .progress import progress_bar
from .prompting import batches, build_requests, trimmed_cases
from .signature import engine_identities, environments_of, make_signature, weights_of
from .store import DEFAULT_CACHE, GenerationCache, RunStore
from .summary import summarize_generations
from .trimming import Trimmed

log = logging.getLogger("evalsuite")


@dataclass
class RunOptions:
    """What to run of a suite, and how."""

    variants: Sequence[str] | None = None  #: variant names (the baseline is always included)
    scenarios: Sequence[str] | None = None
    limit: int | None = None  #: at most this many cases per scenario
    resume: str | None = None  #: run id, run path, or "last"
    progress: bool = True
    score: bool = True  #: score the run when generation is done (evalsuite.scoring.pipeline.run_suite)
    cache_path: str | None = None
    runs_dir: str | None = None
    backend_factory: Callable[[Variant], Backend] | None = None  #: for tests and wrappers
    timing: Any = None  #: overrides the suite's `timing:` ("interleaved" or a mapping; evalsuite.perf.timing)
    cases: Sequence[Case] | None = None  #: run exactly these cases (a recheck: the cleared run's own) instead of the suite's selection


@dataclass
class RunResult:
    """The outcome of `run_suite`."""

    store: RunStore
    cases: list[Case]
    generated: int = 0
    cached: int = 0
    skipped: int = 0  #: already in the run (resume)
    errors: int = 0
    variants: dict = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.store.dir


def select_cases(suite: Suite, scenarios: Sequence[str] | None = None, limit: int | None = None, loaded: Sequence[Case] | None = None) -> list[Case]:
    """The cases a run of `suite` generates: its selection (`loaded`, when the caller has already read
    it: `suite.load_cases()` otherwise), narrowed to `scenarios` and to `limit` per scenario."""
    cases = list(loaded) if loaded is not None else suite.load_cases()
    if scenarios:
        unknown = set(scenarios) - set(SCENARIOS)
        if unknown:
            close = "".join(suggest(u, SCENARIOS) for u in sorted(unknown))
            raise EvalsuiteError(f"unknown scenario(s) {sorted(unknown)}{close}; known: {', '.join(sorted(SCENARIOS))}")
        cases = [c for c in cases if c.scenario in scenarios]
    if limit is not None:
        per: dict[str, int] = {}
        kept = []
        for c in cases:
            if per.get(c.scenario, 0) < limit:
                kept.append(c)
                per[c.scenario] = per.get(c.scenario, 0) + 1
        cases = kept
    if not cases:
        raise EvalsuiteError("no cases selected (check the suite's casesets, tags and --scenarios)")
    return cases


def build_backend(factory: Callable[[Variant], Backend], v: Variant, cases: Sequence[Case]) -> Backend:
    """A variant's backend as the run uses it; module-level so an executor can rebuild it on a worker."""
    be = factory(v)
    if v.degrade:
        from .degrade import wrap_backend

        be = wrap_backend(be, v, cases)  # the cases fix the damaged share and give glossary and canaries
    return be


def generate_suite(suite: Suite, options: RunOptions | None = None) -> RunResult:
    """Generate (or resume) a suite's run; return where the run was stored and what was done.
    Scoring is the next step (evalsuite.scoring.pipeline.run_suite does both)."""
    from ..cases.options import parse_timing

    opts = options or RunOptions()
    cases = list(opts.cases) if opts.cases is not None else select_cases(suite, opts.scenarios, opts.limit)
    variants = select_variants(suite, opts.variants)
    timing = parse_timing(opts.timing, f"{suite.path}: timing") if opts.timing is not None else suite.timing
    factory = opts.backend_factory or make_backend
    backends = {v.name: build_backend(factory, v, cases) for v in variants}
    fingerprints = {name: be.fingerprint() for name, be in backends.items()}
    # suite.warnings (one variable at a time...) were logged once, by load_suite
    store = _open_store(suite, opts, cases, fingerprints, weights_of(backends), engine_identities(backends), environments_of(backends))
    cache = GenerationCache(opts.cache_path or suite.cache or DEFAULT_CACHE)
    result = RunResult(store=store, cases=cases)
    executor = make_executor(getattr(suite, "executor", None))  # where batches run; storage stays here
    run = _SuiteRun(
        variants=variants,
        backends=backends,
        fingerprints=fingerprints,
        factory=factory,
        cases=cases,
        cache=cache,
        result=result,
        progress=opts.progress,
        executor=executor,
        timed=timing is not None,
        faults=suite.faults,
        keep={v.name for v in suite.loaded_variants()} & {v.name for v in variants},
    )
    try:
        result.variants = _generate_variants(run)
        if timing is not None:  # every backend still loaded: time them against each other in alternating blocks
            from .timing import time_run

            time_run(store, variants, backends, cases, timing, opts.progress)
        if suite.load is not None and run.keep:  # the served variants' servers still up: put them under load
            from .load import run_load

            loaded = [v for v in variants if v.name in run.keep]
            run_load(store, loaded, backends, cases, suite.load, progress=opts.progress)
    finally:
        for name, be in backends.items():
            if name not in run.closed:
                be.close()
        cache.close()
    store.mark_complete(True, generated=result.generated, cached=result.cached, errors=result.errors)
    return result


def select_variants(suite: Suite, names: Sequence[str] | None) -> list[Variant]:
    """The suite's variants that `names` selects (the baseline always), the baseline first: later
    stages compare everything with it; noise runs last."""
    variants = list(suite.variants)
    if names is not None:
        wanted = set(names)
        for name in wanted:
            suite.variant(name)  # raises with close matches
        variants = [v for v in variants if v.baseline or v.name in wanted]
    variants.sort(key=lambda v: (not v.baseline, v.noise))
    return variants


def _open_store(
    suite: Suite,
    opts: RunOptions,
    cases: Sequence[Case],
    fingerprints: dict[str, str],
    weights: dict[str, dict],
    engines: dict[str, dict] | None = None,
    environments: dict[str, dict | None] | None = None,
) -> RunStore:
    """The run to write into: a new run directory, or the one `opts.resume` names (checked against
    the suite as it is now, and repaired after a kill)."""
    runs_dir = Path(opts.runs_dir or Path(suite.output_dir) / "runs")
    signature = make_signature(suite, cases, fingerprints, weights, engines, environments)
    signature["partial"] = selection(limit=opts.limit, scenarios=opts.scenarios)  # a smoke run clears nothing (evalsuite.run.partial)
    if not opts.resume:
        return RunStore.create(runs_dir, suite.name, suite.resolved(), signature, prepare=lambda st: _write_cases(cases, st))
    # `last`: the newest run of this suite, not of any suite (issue 38)
    store = RunStore.latest(runs_dir, suite.name) if opts.resume == "last" else RunStore.find(runs_dir, opts.resume)
    old = store.signature
    if old.get("case_digest") != signature["case_digest"]:
        raise EvalsuiteError(f"cannot resume {store.run_id}: its cases differ from the suite's now (case digest changed); start a new run")
    refuse_changed_variants(store, fingerprints)
    dropped = store.repair()
    if dropped:
        log.warning("run %s: dropped a partial last record (%d bytes) left by an interrupted write", store.run_id, dropped)
    if not (store.dir / store.CASES).is_file():  # a run made before cases were written at creation
        _write_cases(cases, store)
    merged = dict(old)
    merged["variants"] = {**old.get("variants", {}), **fingerprints}
    merged["weights"] = {**old.get("weights", {}), **weights}
    merged["engines"] = {**old.get("engines", {}), **(engines or {})}
    merged["environments"] = {**old.get("environments", {}), **(environments or {})}
    store.write_json(store.SIGNATURE, merged)
    return store


def refuse_changed_variants(store: RunStore, fingerprints: dict[str, str]) -> None:
    """A resumed run refuses a variant whose fingerprint differs from the one it recorded (the
    runner's and the adaptive driver's one check)."""
    old = store.signature.get("variants", {})
    changed = sorted(n for n, fp in fingerprints.items() if n in old and old[n] != fp)
    if changed:
        raise EvalsuiteError(f"cannot resume {store.run_id}: variant(s) {changed} changed since; start a new run")


def _write_cases(cases: Sequence[Case], store: RunStore) -> None:
    """The resolved cases travel with the run, so it can be rescored after the case files change."""
    from ..cases.interop import to_jsonl

    to_jsonl(cases, store.dir / store.CASES)


@dataclass
class _SuiteRun:
    """What `generate_suite` hands its variant loop."""

    variants: list[Variant]
    backends: dict[str, Backend]
    fingerprints: dict[str, str]
    factory: Callable[[Variant], Backend]
    cases: Sequence[Case]
    cache: GenerationCache
    result: RunResult
    progress: bool
    executor: Executor
    timed: bool  #: interleaved timing follows: every backend stays loaded until then
    keep: set = field(default_factory=set)  #: served variants put under load afterwards: their servers stay up
    closed: set = field(default_factory=set)  #: backends already closed (each once its variant is done)
    faults: FaultSettings | None = None  #: the suite's fault probes of served variants (`faults:`)


def _generate_variants(run: _SuiteRun) -> dict:
    """Every variant in turn through `run_variant`; variants.json after each. Without interleaved
    timing each backend is closed as soon as its variant is done (one model in memory at a time)."""
    store = run.result.store
    done = {g.key() for g in store.generations() if g.ok}
    summaries = store.read_json(store.VARIANTS, {}) or {}
    for v in run.variants:
        job = VariantJob(
            variant=v,
            backend=run.backends[v.name],
            fingerprint=run.fingerprints[v.name],
            cases=run.cases,
            store=store,
            cache=run.cache,
            done=done,
            result=run.result,
            progress=run.progress,
            previous=summaries.get(v.name),
            executor=run.executor,
            build=functools.partial(build_backend, run.factory, v, run.cases),
        )
        summaries[v.name] = run_variant(job)
        store.write_json(store.VARIANTS, summaries)
        _probe_faults(run, v)
        if not run.timed and v.name not in run.keep:
            run.backends[v.name].close()
            run.closed.add(v.name)
    return summaries


def _probe_faults(run: _SuiteRun, v: Variant) -> None:
    """A served variant's fault probes, on its own server before it stops (evalsuite.run.faults);
    a variant whose server did not come up is recorded "cannot judge" and the run goes on."""
    backend = run.backends[v.name]
    if run.faults is None and not backend.load_error:
        return
    from .fault_probes import probe_variant

    generate = functools.partial(generate_into, backend=backend, fingerprint=run.fingerprints[v.name])
    probe_variant(run.result.store, v, backend, run.cases, run.faults, generate=generate)


def generate_into(store: RunStore, cache: GenerationCache, variant: Variant, cases: Sequence[Case], done: set, *, backend: Backend, fingerprint: str) -> None:
    """`run_variant` of `cases` into another store and cache (a fault probe's own run), skipping the `done` keys."""
    result = RunResult(store=store, cases=list(cases))
    run_variant(
        VariantJob(variant=variant, backend=backend, fingerprint=fingerprint, cases=cases, store=store, cache=cache, done=done, result=result, progress=False)
    )


@dataclass(frozen=True, kw_only=True)
class VariantJob:
    """One variant's generation over a set of cases: what `run_variant` needs, for the runner (all
    of a variant's cases at once) and the adaptive driver (one batch of cases at a time) alike."""

    variant: Variant
    backend: Backend
    fingerprint: str
    cases: Sequence[Case]
    store: RunStore
    cache: GenerationCache
    done: set  #: (variant, case, sample) keys the run holds already (resume): skipped; shared with the caller
    result: RunResult  #: counts (generated, cached, skipped, errors) are added to it
    progress: bool = True
    previous: dict | None = None  #: the variant's summary so far (resume, earlier adaptive batches): its times add up
    executor: Executor | None = None  #: where the batches run (default: this process)
    build: Callable[[], Backend] | None = None  #: rebuilds the backend on a worker (executors other than the local one)
    trimmed: dict[str, Trimmed] = field(default_factory=dict)  #: each case as the variant's `trim:` leaves it (filled in by __post_init__)

    def __post_init__(self) -> None:
        if self.variant.trim is not None and not self.trimmed:
            object.__setattr__(self, "trimmed", trimmed_cases(self.cases, self.variant))


def run_variant(job: VariantJob) -> dict:
    """Generate a variant's missing outputs (the cache first), store them, and return its summary."""
    todo, from_cache = _plan(job)
    if from_cache:
        job.store.append(from_cache)
        job.result.cached += len(from_cache)
    compiled_before = job.backend.compile_s() or 0.0
    load_s = _load_before_clock(job, todo)
    compiled_at_load = (job.backend.compile_s() or 0.0) - compiled_before
    t_start = time.perf_counter()
    _generate_todo(job, todo)
    wall = time.perf_counter() - t_start
    job.store.sync()
    compiled = job.backend.compile_s()
    compile_s = None if compiled is None else compiled - compiled_before
    # the compile and warm-up ran inside `load()`, before the clock: load_s is the load alone
    return _variant_summary(job, len(todo), len(from_cache), wall, (load_s - compiled_at_load, compile_s))


def _plan(job: VariantJob) -> tuple[list[tuple[Request, str]], list[Generation]]:
    """The variant's requests still to generate (with their request hashes), and the generations
    the cache answers (one query per 500 requests)."""
    v = job.variant
    wanted = []
    for req in build_requests(job.cases, v, job.trimmed):
        if (v.name, req.case_id, req.sample) in job.done:
            job.result.skipped += 1
        else:
            wanted.append(req)
    hashes = [req.request_hash() for req in wanted]
    hits = job.cache.get_many(job.fingerprint, [(h, req.sample) for h, req in zip(hashes, wanted)])
    todo, from_cache = [], []
    for h, req in zip(hashes, wanted):
        hit = hits.get((h, req.sample))
        if hit is None:
            todo.append((req, h))
        else:
            from_cache.append(replace(Generation.from_dict(hit), variant=v.name, cached=True))
    return todo, from_cache


def _load_before_clock(job: VariantJob, todo: Sequence[tuple[Request, str]]) -> float:
    """Load the model before the clock starts: wall_s (and the throughput read from it) is generation
    time, as in a plain generate loop; the load is its own figure. A load that fails is left to the
    first batch, whose error handling records it against the cases. Returns the load's seconds."""
    if not (todo and isinstance(job.executor or LocalExecutor(), LocalExecutor)):
        return 0.0
    t_load = time.perf_counter()
    try:
        job.backend.load()
    except Exception as exc:  # noqa: BLE001 - recorded per case by the first batch's own attempt
        log.debug("variant %s: loading before generation failed (%s); the first batch will record it", job.variant.name, exc)
    return time.perf_counter() - t_load


def _generate_todo(job: VariantJob, todo: list[tuple[Request, str]]) -> None:
    """Generate `todo` (requests and their hashes) batch by batch; each batch is committed to the
    cache, then appended to the run, each generation serialized once for both."""
    v, fp, result = job.variant, job.fingerprint, job.result
    hashes = {(req.case_id, req.sample): h for req, h in todo}
    executor = job.executor or LocalExecutor()
    todo_batches = batches([req for req, _ in todo], v.generation.batch_size)
    with progress_bar(job.progress, v.name, len(todo)) as advance:
        for batch, gens in executor.generate(v, job.backend, job.build or (lambda: job.backend), todo_batches, generate_batch):
            stamped = [
                replace(
                    g,
                    case_id=req.case_id,
                    sample=req.sample,
                    variant=v.name,
                    request_hash=hashes[(req.case_id, req.sample)],
                    fingerprint=fp,
                    extra=_with_trim(g.extra, job.trimmed.get(req.case_id)),
                )
                for req, g in zip(batch, gens)
            ]
            encoded = [json.dumps(g.to_dict(), ensure_ascii=False) for g in stamped]
            job.cache.put_many(stamped, encoded)
            job.store.append(stamped, encoded)
            result.generated += len(stamped)
            result.errors += sum(1 for g in stamped if not g.ok)
            advance(len(batch))


def _with_trim(extra: dict, trimmed: Trimmed | None) -> dict:
    """A generation's extra facts with what its variant's `trim:` dropped from the case (cached with it)."""
    return extra if trimmed is None else {**extra, "context_trim": trimmed.record()}


def _variant_summary(job: VariantJob, generated: int, cached: int, wall: float, ahead: tuple[float, float | None]) -> dict:
    """The variant's performance summary (variants.json) over every output the run holds for it.
    `ahead`: the seconds spent before the clock, loading and compiling (None: nothing compiled)."""
    v, backend, previous = job.variant, job.backend, job.previous or {}
    load_s, compile_s = ahead
    mine = [g for g in job.store.generations() if g.variant == v.name]
    peak = backend.peak_memory_mb()
    weights = backend.model_memory_mb()
    summary = summarize_generations(mine)
    if generated:  # the engine's own counters over this generation (vLLM's); None where it exposes none
        try:
            summary["engine_metrics"] = backend.engine_metrics()
        except Exception as exc:  # noqa: BLE001 - a figure, never a reason to fail the variant
            log.debug("variant %s: no engine metrics (%s)", v.name, exc)
    elif previous.get("engine_metrics") is not None:
        summary["engine_metrics"] = previous["engine_metrics"]
    cost = context_cost(mine).get(v.name)
    if cost:  # how prefill, memory and the KV cache grow with context (a backend that measures them)
        summary["context_cost"] = cost
    summary.update(
        {
            "fingerprint": job.fingerprint,
            "backend": v.backend,
            "changes": list(v.changes),
            # a backend that cannot see its model's memory (a remote server) reports none: this
            # process's RSS would be a wrong number, not a rough one
            "peak_memory_mb": peak if peak is not None else previous.get("peak_memory_mb"),
            "peak_memory_source": "backend" if peak is not None else "not reported by the backend",
            "model_memory_mb": weights,
            "generated_now": generated,
            "cached_now": cached,
            "wall_s": wall + previous.get("wall_s", 0.0),
            "load_s": round(load_s + previous.get("load_s", 0.0), 3),
        }
    )
    if compile_s is not None or previous.get("compile_s") is not None:
        # compiling and warming up (Backend.compile_s): apart from load and from the timed generation
        summary["compile_s"] = round((compile_s or 0.0) + (previous.get("compile_s") or 0.0), 3)
    return summary
