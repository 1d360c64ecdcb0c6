"""Paired comparison of every variant (and every noise run) with the baseline, per scenario and metric.

Per-case statistics stay separate from aggregation: each metric is first reduced to one value per
case (the mean over samples, or the case-level value), and every test then resamples *case ids*,
the same ones on both sides, so the samples of one case always move together.

Which statistic a metric gets:

- a metric whose records carry `passed` is a pass/fail metric: its headline number is the pass
  rate (a case passes when at least half its samples pass), flips are the cases that went
  pass->fail and fail->pass, and the p-value is the exact McNemar test on those flips
  (statsmodels), plus the one-sided exact binomial p of "more pass->fail than fail->pass" that the
  gate uses (a regression gate asks one question, in one direction);
- any other metric is continuous: the mean value, and a paired permutation test (scipy's
  `permutation_test` with `permutation_type="samples"`, i.e. sign flips of the paired differences).

The 95% confidence interval of the delta is a paired bootstrap over case ids (scipy's `bootstrap`,
BCa, falling back to percentile when BCa is degenerate). All resampling is seeded from a fixed seed
and the (variant, scenario, metric) triple, so a comparison is reproducible and independent of the
order in which metrics are visited.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import EvalsuiteError
from ..run.scorefile import ScoreTable, score_rows
from ..scoring.base import ScoreRecord
from .stats import N_BOOTSTRAP, N_PERMUTATIONS, binom_worse_p, bootstrap_delta_ci, mcnemar_p, paired_test, perm_p_min, permutation_p, seed_for

if TYPE_CHECKING:
    from .load import LoadSummary

# the statistics live in verdict/stats.py; these names are kept for callers of this module
_seed_for, _perm_p_min = seed_for, perm_p_min
__all__ = ["N_BOOTSTRAP", "N_PERMUTATIONS", "binom_worse_p", "bootstrap_delta_ci", "mcnemar_p", "permutation_p"]

DEFAULT_SEED = 20240601
MAX_EVIDENCE = 25  #: offending case ids kept per metric (all of them are counted)


# ---------------------------------------------------------------------------------------------
# result types


@dataclass(frozen=True, kw_only=True)
class MetricDelta:
    """One variant against the baseline on one (scenario, metric), paired over shared case ids."""

    variant: str
    scenario: str
    metric: str
    pass_fail: bool  #: headline is a pass rate (records carry `passed`); else the mean value
    higher_is_better: bool  #: direction of the headline (a pass rate is always higher-is-better)
    n: int  #: paired cases
    baseline_mean: float
    variant_mean: float
    delta: float  #: variant - baseline
    ci_low: float  #: 95% paired-bootstrap CI of the delta
    ci_high: float
    p_value: float  #: two-sided: exact McNemar (pass/fail) or paired permutation (continuous)
    p_worse: float  #: one-sided p of "the variant is worse" (exact binomial / permutation)
    p_min: float = 0.0  #: smallest p_worse this test could reach given the data (discrete tests; Tarone)
    pass_to_fail: tuple[str, ...] = ()  #: case ids that passed on the baseline and fail on the variant
    fail_to_pass: tuple[str, ...] = ()
    worse_cases: tuple[str, ...] = ()  #: continuous metrics: cases where the variant is worse, worst first
    variant_failed: tuple[str, ...] = ()  #: pass/fail metrics: cases the variant fails (a floor's evidence, whatever the baseline did)
    missing_in_variant: tuple[str, ...] = ()  #: scored on the baseline only (not paired)
    missing_in_baseline: tuple[str, ...] = ()
    baseline_value_mean: float | None = None  #: pass/fail metrics: mean of the raw values too
    variant_value_mean: float | None = None
    noise: bool = False  #: the "variant" is a noise run of the baseline
    details: Mapping[str, Mapping[str, object]] = field(default_factory=dict, compare=False)  #: case id -> variant score details (offending cases)
    paired: Mapping[str, tuple[float, float]] = field(
        default_factory=dict, compare=False, repr=False
    )  #: case id -> (baseline, variant) per-case values (review waivers recompute from them)

    @property
    def harm(self) -> float:
        """How much worse the variant is, in the headline's units (negative: better)."""
        return (self.baseline_mean - self.variant_mean) if self.higher_is_better else (self.variant_mean - self.baseline_mean)

    @property
    def rel_harm(self) -> float:
        """`harm` relative to the baseline (0 when the baseline is 0 and nothing changed)."""
        if self.baseline_mean == 0:
            return 0.0 if self.harm <= 0 else math.inf
        return self.harm / abs(self.baseline_mean)

    @property
    def flips(self) -> int:
        """Pass->fail flips (regressions), the number a flip rule counts."""
        return len(self.pass_to_fail)

    @property
    def offending(self) -> tuple[str, ...]:
        """The case ids to show as evidence: pass->fail flips, or the worst continuous cases."""
        return self.pass_to_fail if self.pass_fail else self.worse_cases

    def to_dict(self) -> dict:
        d = asdict(self)
        d["details"] = dict(self.details)
        d.pop("paired", None)
        d.update(harm=self.harm, flips=self.flips)
        return d


@dataclass(frozen=True)
class NoiseFloor:
    """What reruns of the baseline show on one (scenario, metric): the flips and drift of noise alone."""

    scenario: str
    metric: str
    runs: tuple[str, ...]  #: noise runs that scored this metric
    flips: int  #: max over runs of max(pass->fail, fail->pass)
    harm: float  #: max over runs of |delta| (headline units)

    @classmethod
    def empty(cls, scenario: str, metric: str) -> NoiseFloor:
        return cls(scenario, metric, (), 0, 0.0)


@dataclass(frozen=True, kw_only=True)
class PerfDelta:
    """Per-variant performance and reliability against the baseline, from variants.json."""

    variant: str
    generations: int
    errors: int
    timeouts: int
    error_rate: float
    timeout_rate: float
    baseline_error_rate: float
    baseline_timeout_rate: float
    latency_p95_ratio: float | None  #: variant / baseline p95 latency (> 1: slower)
    tokens_per_s_ratio: float | None  #: variant / baseline median tokens/s (< 1: slower)
    peak_memory_ratio: float | None  #: variant / baseline peak memory (< 1: smaller)
    speculative: bool  #: the variant changes speculative decoding
    exactness: float | None  #: share of outputs identical to the baseline's (`exactness.identical`)
    exactness_n: int = 0
    noise: bool = False
    #: a noise run whose settings are the baseline's own (else, e.g. another batch size, it is a noise
    #: floor for quality only: its speed differs from the baseline's by design)
    same_settings: bool = True
    latency_p95_ratio_ci: tuple | None = None  #: (low, high, rounds, level) from interleaved timing (evalsuite.perf)
    tokens_per_s_ratio_ci: tuple | None = None  #: (low, high, rounds, level) from interleaved timing
    timing: str = "sequential"  #: interleaved: the ratios above are paired over timing rounds, with intervals
    sandbox_runs: int = 0  #: the variant's per-sample code runs (`code.pass`, `code.tests_pass_reference`)
    sandbox_errors: int = 0  #: of those, runs the sandbox could not judge (status `error`: infrastructure)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Everything the gate needs: paired deltas, noise floors, performance, and the outputs for diffs."""

    run_id: str
    baseline: str
    variants: tuple[str, ...]  #: compared variants (not the baseline, not noise runs)
    noise_runs: tuple[str, ...]
    deltas: tuple[MetricDelta, ...]  #: variants' and noise runs' deltas
    perf: tuple[PerfDelta, ...]
    scenarios: tuple[str, ...]  #: scenarios present in the baseline's scores
    complete: bool = True  #: the run finished generating
    problems: tuple[str, ...] = ()  #: reasons the run cannot be judged (missing data)
    warnings: tuple[str, ...] = ()
    seed: int = DEFAULT_SEED
    outputs: Mapping[tuple[str, str], str] = field(default_factory=dict, compare=False, repr=False)  #: (variant, case id) -> sample-0 text
    load: LoadSummary | None = field(default=None, compare=False)  #: served variants under load (evalsuite.verdict.load)

    def delta(self, variant: str, scenario: str, metric: str) -> MetricDelta | None:
        for d in self.deltas:
            if d.variant == variant and d.scenario == scenario and d.metric == metric:
                return d
        return None

    def deltas_for(self, variant: str) -> list[MetricDelta]:
        return [d for d in self.deltas if d.variant == variant]

    def perf_for(self, variant: str) -> PerfDelta | None:
        return next((p for p in self.perf if p.variant == variant), None)

    def noise_floor(self, scenario: str, metric: str) -> NoiseFloor:
        """The largest flips and |delta| any noise run shows on (scenario, metric)."""
        ds = [d for d in self.deltas if d.noise and d.scenario == scenario and d.metric == metric]
        if not ds:
            return NoiseFloor.empty(scenario, metric)
        flips = max(max(len(d.pass_to_fail), len(d.fail_to_pass)) for d in ds)
        return NoiseFloor(scenario, metric, tuple(d.variant for d in ds), flips, max(abs(d.delta) for d in ds))

    def output(self, variant: str, case_id: str) -> str | None:
        return self.outputs.get((variant, case_id))

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "baseline": self.baseline,
            "variants": list(self.variants),
            "noise_runs": list(self.noise_runs),
            "scenarios": list(self.scenarios),
            "complete": self.complete,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "seed": self.seed,
            "deltas": [d.to_dict() for d in self.deltas],
            "perf": [p.to_dict() for p in self.perf],
            "load": self.load.to_dict() if self.load is not None else None,
        }


# ---------------------------------------------------------------------------------------------
# per-case reduction


@dataclass(slots=True)
class CaseAgg:
    """One case's scores for one metric over its samples."""

    values: list = field(default_factory=list)
    passes: list = field(default_factory=list)
    hib: bool = True
    details: dict | None = None  #: the details of the first failing sample, else of the first sample (shared: read-only)
    kind: str = ""
    failed: bool = False  #: `details` are a failing sample's

    @property
    def pass_share(self) -> float:
        return _mean(self.passes)

    @property
    def mean(self) -> float:
        """The mean value over samples, else the pass share (a metric that records passes only)."""
        return _mean(self.values) if self.values else _mean(self.passes)

    @property
    def passed(self) -> bool:
        """The case passes when at least half its samples pass."""
        return self.pass_share >= 0.5


def _mean(xs: list) -> float:
    """numpy's mean, without numpy's per-call cost for the one value of a single sample (the common case)."""
    return float(xs[0]) if len(xs) == 1 else float(np.mean(xs))


def per_case(records: Iterable[ScoreRecord]) -> dict[tuple[str, str, str], dict[str, CaseAgg]]:
    """(variant, scenario, metric) -> case id -> values and passes over samples (None values skipped)."""
    out: dict[tuple[str, str, str], dict[str, CaseAgg]] = defaultdict(dict)
    # one pass over every record of a run (600,000 at 10,000 cases), as tuples: a stored run's columns
    # zipped, with no record object built
    for variant, case_id, _sample, scenario, kind, metric, value, passed, hib, details in score_rows(records):
        if value is None and passed is None:
            continue  # the metric does not apply to this output
        if metric.endswith(".scorer_error"):
            continue
        cases = out[(variant, scenario, metric)]
        agg = cases.get(case_id)
        if agg is None:
            agg = cases[case_id] = CaseAgg([], [], True, details or {}, kind, passed is False)
        elif passed is False and not agg.failed:
            agg.details, agg.failed = details or {}, True
        if value is not None:
            agg.values.append(float(value))
        if passed is not None:
            agg.passes.append(1.0 if passed else 0.0)
        agg.hib = bool(hib) if hib is not None else True
    return out


def _compare_metric(
    variant: str, scenario: str, metric: str, base: dict[str, CaseAgg], var: dict[str, CaseAgg], *, noise: bool, seed: int, n_resamples: int
) -> MetricDelta | None:
    shared = sorted(set(base) & set(var))
    missing: dict = {"missing_in_variant": tuple(sorted(set(base) - set(var))), "missing_in_baseline": tuple(sorted(set(var) - set(base)))}
    if not shared:
        nan = math.nan
        return MetricDelta(
            variant=variant,
            scenario=scenario,
            metric=metric,
            pass_fail=False,
            higher_is_better=True,
            n=0,
            baseline_mean=nan,
            variant_mean=nan,
            delta=nan,
            ci_low=nan,
            ci_high=nan,
            p_value=1.0,
            p_worse=1.0,
            p_min=1.0,
            noise=noise,
            **missing,
        )
    s = seed_for(seed, variant, scenario, metric)
    pass_fail = all(base[c].passes for c in shared) and all(var[c].passes for c in shared)
    p: dict = _pass_fail_values(base, var, shared, s) if pass_fail else _continuous_values(base, var, shared, s)
    b, v = p.pop("b"), p.pop("v")
    ci = bootstrap_delta_ci(b, v, s, n_resamples)
    offending = p["pass_to_fail"] if pass_fail else p["worse_cases"]
    shown = tuple(dict.fromkeys(offending[:MAX_EVIDENCE] + p.get("variant_failed", ())[:MAX_EVIDENCE]))
    details = {c: dict(var[c].details or {}) for c in shown}
    return MetricDelta(
        variant=variant,
        scenario=scenario,
        metric=metric,
        pass_fail=pass_fail,
        n=len(shared),
        baseline_mean=float(np.mean(b)),
        variant_mean=float(np.mean(v)),
        delta=float(np.mean(v) - np.mean(b)),
        ci_low=ci[0],
        ci_high=ci[1],
        noise=noise,
        details=details,
        paired={c: (float(x), float(y)) for c, x, y in zip(shared, b, v)},
        **missing,
        **p,
    )


def _pass_fail_values(base: dict[str, CaseAgg], var: dict[str, CaseAgg], shared: list[str], seed: int) -> dict:
    """Per-case pass shares, the flips, their tests, and the mean raw values of a pass/fail metric."""
    b = np.array([base[c].pass_share for c in shared])
    v = np.array([var[c].pass_share for c in shared])
    bpass, vpass = b >= 0.5, v >= 0.5  # CaseAgg.passed, from the shares just computed
    p2f = tuple(c for c, x, y in zip(shared, bpass, vpass) if x and not y)
    f2p = tuple(c for c, x, y in zip(shared, bpass, vpass) if y and not x)
    # several samples per case give pass shares that are not 0/1: paired_test tests them as continuous
    p_two, p_worse, p_min = paired_test(b, v, pass_fail=True, higher_is_better=True, flips=(len(p2f), len(f2p)), seed=seed)
    bv = [_mean(base[c].values) for c in shared if base[c].values]
    vv = [_mean(var[c].values) for c in shared if var[c].values]
    return {
        "b": b, "v": v, "higher_is_better": True, "p_value": p_two, "p_worse": p_worse, "p_min": p_min, "pass_to_fail": p2f, "fail_to_pass": f2p,
        "variant_failed": tuple(c for c, y in zip(shared, vpass) if not y),
        "baseline_value_mean": float(np.mean(bv)) if bv else None, "variant_value_mean": float(np.mean(vv)) if vv else None,
    }  # fmt: skip


def _continuous_values(base: dict[str, CaseAgg], var: dict[str, CaseAgg], shared: list[str], seed: int) -> dict:
    """Per-case means, their direction (the baseline's records vote), tests, and the worse cases, worst first."""
    hib_votes = [base[c].hib for c in shared]
    hib = sum(hib_votes) * 2 >= len(hib_votes)
    b = np.array([base[c].mean for c in shared])
    v = np.array([var[c].mean for c in shared])
    p_two, p_worse, p_min = paired_test(b, v, pass_fail=False, higher_is_better=hib, seed=seed)
    harm = (b - v) if hib else (v - b)
    order = np.argsort(-harm, kind="stable")
    worse = tuple(shared[i] for i in order if harm[i] > 1e-12)
    return {"b": b, "v": v, "higher_is_better": hib, "p_value": p_two, "p_worse": p_worse, "p_min": p_min, "worse_cases": worse}


# ---------------------------------------------------------------------------------------------
# comparison


@dataclass(frozen=True)
class Resampling:
    """How the comparison's bootstrap is seeded and sized (the same seed reproduces every interval)."""

    seed: int = DEFAULT_SEED
    n_resamples: int = N_BOOTSTRAP


@dataclass(frozen=True)
class VariantInfo:
    """What the comparison needs to know about a variant besides its scores."""

    name: str
    baseline: bool = False
    noise: bool = False
    speculative: bool = False  #: changes speculative decoding against the baseline
    same_settings: bool = True  #: runs with exactly the baseline's settings (backend, model, options, generation ...)


def _ratio(a: float | str | None, b: float | str | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if b == 0:
        return None
    return a / b


#: per-sample code metrics whose details carry the sandbox run's status
_SANDBOX_METRICS = ("code.pass", "code.tests_pass_reference")
#: the metrics `_perf` reads
_PERF_METRICS = frozenset({"exactness.identical", *_SANDBOX_METRICS})


def _perf(info: VariantInfo, summary: Mapping | None, base: Mapping | None, records: Sequence[ScoreRecord]) -> PerfDelta:
    s, bs = summary or {}, base or {}
    gens = int(s.get("generations") or 0)
    bgens = int(bs.get("generations") or 0)
    errors, timeouts = int(s.get("errors") or 0), int(s.get("timeouts") or 0)
    ident = [r for r in records if r.variant == info.name and r.metric == "exactness.identical" and (r.value is not None or r.passed is not None)]
    vals = [float(r.value) if r.value is not None else float(bool(r.passed)) for r in ident]
    runs = [r for r in records if r.variant == info.name and r.metric in _SANDBOX_METRICS and isinstance(r.details, dict) and "status" in r.details]
    return PerfDelta(
        variant=info.name,
        generations=gens,
        errors=errors,
        timeouts=timeouts,
        error_rate=errors / gens if gens else 0.0,
        timeout_rate=timeouts / gens if gens else 0.0,
        baseline_error_rate=int(bs.get("errors") or 0) / bgens if bgens else 0.0,
        baseline_timeout_rate=int(bs.get("timeouts") or 0) / bgens if bgens else 0.0,
        latency_p95_ratio=_ratio(s.get("latency_p95_s"), bs.get("latency_p95_s")),
        tokens_per_s_ratio=_ratio(s.get("tokens_per_s_median"), bs.get("tokens_per_s_median")),
        peak_memory_ratio=_ratio(s.get("peak_memory_mb"), bs.get("peak_memory_mb")),
        speculative=info.speculative,
        exactness=float(np.mean(vals)) if vals else None,
        exactness_n=len(vals),
        noise=info.noise,
        same_settings=info.same_settings,
        sandbox_runs=len(runs),
        sandbox_errors=sum(1 for r in runs if r.details["status"] == "error"),
    )


def compare_records(
    records: Sequence[ScoreRecord],
    variants: Sequence[VariantInfo],
    *,
    perf: Mapping[str, Mapping] | None = None,
    outputs: Mapping[tuple[str, str], str] | None = None,
    run_id: str = "",
    complete: bool = True,
    timing: Mapping | None = None,
    resampling: Resampling | None = None,
) -> Comparison:
    """Compare every variant and noise run with the baseline (pure: records in, Comparison out)."""
    rs = resampling or Resampling()
    baselines = [v for v in variants if v.baseline]
    problems: list[str] = []
    warn: list[str] = []
    if len(baselines) != 1:
        raise EvalsuiteError(f"exactly one baseline variant is needed to compare (found {len(baselines)})")
    baseline = baselines[0].name
    per = per_case(records)
    scen_metrics = sorted({(s, m) for (v, s, m) in per if v == baseline})
    scenarios = tuple(sorted({s for s, _ in scen_metrics}))
    if not records:
        problems.append("the run has no scores (run `evalsuite score RUN`)")
    elif not scen_metrics:
        problems.append(f"the baseline {baseline!r} has no scores")
    deltas: list[MetricDelta] = []
    perf_out: list[PerfDelta] = []
    perf = perf or {}
    others = [v for v in variants if not v.baseline]
    # what _perf reads, in one pass (a stored run's table picks them from its metric column)
    if isinstance(records, ScoreTable):
        perf_records = records.where("metric", _PERF_METRICS.__contains__).records()
    else:
        perf_records = [r for r in records if r.metric in _PERF_METRICS]
    for info in others:
        vkeys = [(s, m) for (v, s, m) in per if v == info.name]
        if records and not vkeys:
            problems.append(f"variant {info.name!r} has no scores")
        for s, m in scen_metrics:
            d = _compare_metric(
                info.name, s, m, per[(baseline, s, m)], per.get((info.name, s, m), {}), noise=info.noise, seed=rs.seed, n_resamples=rs.n_resamples
            )
            if d is not None:
                deltas.append(d)
                if d.missing_in_variant and d.n:
                    warn.append(
                        f"{info.name} {s}/{m}: {len(d.missing_in_variant)} case(s) scored on the baseline only, not paired: {', '.join(d.missing_in_variant[:5])}"
                    )
        perf_out.append(_perf(info, perf.get(info.name), perf.get(baseline), perf_records))
    if timing:  # interleaved timing blocks (evalsuite.perf): paired ratios with intervals replace the sequential ones
        from ..perf.verdict import apply_timing

        perf_out = apply_timing(perf_out, timing)
    if not complete:
        problems.append("the run is incomplete (status.json says complete: false); resume it first")
    return Comparison(
        run_id=run_id,
        baseline=baseline,
        variants=tuple(v.name for v in others if not v.noise),
        noise_runs=tuple(v.name for v in others if v.noise),
        deltas=tuple(deltas),
        perf=tuple(perf_out),
        scenarios=scenarios,
        complete=complete,
        problems=tuple(problems),
        warnings=tuple(warn),
        seed=rs.seed,
        outputs=dict(outputs or {}),
    )


def variant_infos(store) -> list[VariantInfo]:
    """The variants of a stored run, from its resolved suite (baseline, noise, speculative)."""
    suite = store.suite or {}
    raw = suite.get("variants") or []
    base = next((v for v in raw if v.get("baseline")), None)
    out = []
    for v in raw:
        spec = (v.get("speculative") or None) != ((base or {}).get("speculative") or None) or "speculative" in (v.get("changes") or [])
        same = base is not None and _settings(v) == _settings(base)
        out.append(VariantInfo(v["name"], bool(v.get("baseline")), bool(v.get("noise")), bool(spec) and not v.get("baseline"), same))
    if not any(i.baseline for i in out):
        b = store.signature.get("baseline")
        if b:
            out = [VariantInfo(b, baseline=True)] + [i for i in out if i.name != b]
    return out


#: fields of a resolved variant that are not settings: a rerun differs from its baseline in these only
_NOT_SETTINGS = ("name", "baseline", "noise", "description", "changes")


def _settings(variant: Mapping) -> dict:
    return {k: v for k, v in variant.items() if k not in _NOT_SETTINGS}


def _pair_load(variant: str, scenario: str, metric: str, base: dict[str, CaseAgg], var: dict[str, CaseAgg]) -> MetricDelta | None:
    """Answers replayed under load paired with others (evalsuite.verdict.load counts the flips; a
    small bootstrap: its interval is not used)."""
    return _compare_metric(variant, scenario, metric, base, var, noise=False, seed=DEFAULT_SEED, n_resamples=200)


def compare_run(store, *, seed: int = DEFAULT_SEED, n_resamples: int = N_BOOTSTRAP, exclude_cases: frozenset[str] = frozenset()) -> Comparison:
    """Compare a stored run (scores.parquet, variants.json, generations.jsonl) with its baseline; computed
    once per state of the run's files (the store hands the same comparison to every caller).
    `exclude_cases`: case ids left out (draft cases at the production stage)."""
    return store.memo(("comparison", seed, n_resamples, exclude_cases), lambda: _compare_stored(store, seed, n_resamples, exclude_cases))


def _compare_stored(store, seed: int, n_resamples: int, exclude_cases: frozenset[str] = frozenset()) -> Comparison:
    table = store.score_table()
    records = table.where("case_id", lambda c: c not in exclude_cases) if exclude_cases else table
    infos = variant_infos(store)
    present = set(records.column("variant")) | set(store.read_json(store.VARIANTS, {}) or {})
    infos = [i for i in infos if i.baseline or i.name in present]  # variants not run (--variants) are not compared
    outputs: dict[tuple[str, str], str] = {}
    for g in store.generations():
        if g.sample == 0:
            outputs[(g.variant, g.case_id)] = g.text if g.ok else f"<error: {g.error}>"
    status = store.read_json(store.STATUS, {}) or {}
    cmp = compare_records(
        records,
        infos,
        perf=store.read_json(store.VARIANTS, {}) or {},
        outputs=outputs,
        run_id=store.run_id,
        complete=bool(status.get("complete", False)),
        timing=store.read_json(store.TIMING),
        resampling=Resampling(seed, n_resamples),
    )
    from ..run.faults import load_failures

    # a served variant whose model never loaded has errors, not outputs: it cannot be judged (the others are)
    unloaded = [f"variant {name!r}: cannot judge: {why[:300]}" for name, why in sorted(load_failures(store).items()) if name in cmp.variants]
    if unloaded:
        cmp = replace(cmp, problems=cmp.problems + tuple(unloaded))
    doc = store.read_json(store.LOAD)
    if not doc:
        return cmp
    from .load import summarize_load

    return replace(
        cmp, load=summarize_load(doc, cmp.baseline, records=records, load_records=store.load_scores(), outputs=outputs, pairing=(per_case, _pair_load))
    )
