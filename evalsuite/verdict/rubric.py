"""Rubrics: thresholds parsed once, at the file edge, into typed rules.

A rubric file holds a base list of rules and per-stage overrides (`dev`, `pilot`, `production`)::

    schema_version: 1
    name: default
    alpha: 0.05                 # significance level of the gate (family-wise, per variant)
    multiple_testing: tarone    # tarone | holm | bonferroni | none, over a variant's significance-gated block checks
    rules:
      - name: kb-citation-recall
        scenario: kb_qa         # a scenario, a list, or "*"
        metric: citations.recall  # a metric name or a glob ("citations.*")
        min: 0.80               # absolute floor of the variant's headline (pass rate or mean)
        max_drop: 0.03          # largest allowed drop vs the baseline, absolute ...
        max_drop_rel: 0.05      # ... or relative to the baseline
        max_flips: 2            # largest allowed number of pass->fail cases
        require_significance: true   # drop/flip checks fire only when the regression is significant
        above_noise: true       # drop/flip checks fire only when they exceed what noise runs show
        severity: block         # block | warn
        required: false         # may match no score of a run (shown as skipped); unset, a rule whose metric no
                                # score of the run has is a rubric mistake (`gate` exits 4, naming file:line)
      - name: reliability
        max_error_rate: 0.01    # variant-level rules: no `metric`
        max_timeout_rate: 0.01
        max_sandbox_error_rate: 0.05  # more code runs than this ending as sandbox errors: cannot judge
    stages:
      dev:
        alpha: 0.10
        rules:
          kb-citation-recall: {max_drop: 0.10, severity: warn}   # field overrides; null removes a field
      production:
        rules:
          reliability: {max_error_rate: 0.0}
        add: [ {name: extra, metric: json.valid, scenario: brand, min: 0.95} ]
    review:                     # optional: what the review queue flags, and the gate's "needs review"
      min_similarity: 50        # threshold (max_open); fields in evalsuite/review/policy.py
      max_open: 20

Every stage is resolved when the file is loaded, so a typo in any stage is reported at once, with
the file, the line, the rule (index and name) and the field. The typed rules have the
pytest-benchmark compare-fail shape: `fails(...) -> reason | None`.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..cases.options import STAGES
from ..errors import EvalsuiteError, suggest
from ..hashing import sha256_json
from ..shipped import PREFIX, shipped_path
from ..states import CANNOT_JUDGE
from ..yamlio import LineMap, load_yaml

if TYPE_CHECKING:
    from .compare import MetricDelta, NoiseFloor, PerfDelta
    from .review_policy import ReviewPolicy

#: the stage every command uses when none is given and the suite names none (docs/thresholds.md):
#: the strictest, because a run judged without a stage is a run someone may ship
DEFAULT_STAGE = "production"
SEVERITIES = ("block", "warn")
MULTIPLE_TESTING = ("tarone", "holm", "bonferroni", "none")
DEFAULT_ALPHA = 0.05

#: how a rule result says its speed ratios came from one sequential pass (evalsuite.verdict.gate notes it once)
SINGLE_PASS = "from one sequential pass"

_COMMON = {"name", "severity", "description", "enabled", "required"}
_METRIC_FIELDS = {"scenario", "metric", "min", "max", "max_drop", "max_drop_rel", "max_flips", "require_significance", "above_noise"}
_VARIANT_FIELDS = {
    "max_error_rate",
    "max_timeout_rate",
    "max_latency_p95_ratio",
    "min_tokens_per_s_ratio",
    "max_peak_memory_ratio",
    "min_exactness",
    "max_sandbox_error_rate",
}
#: load rules (evalsuite.verdict.load): per level of a served variant under load
_LOAD_FIELDS = {"max_load_flips", "max_load_ttft_p95_ratio", "max_load_error_rate", "max_load_timeout_rate"}
_ALL_FIELDS = _COMMON | _METRIC_FIELDS | _VARIANT_FIELDS | _LOAD_FIELDS
_TOP = {"schema_version", "name", "description", "alpha", "multiple_testing", "rules", "stages", "review"}
_STAGE_KEYS = {"alpha", "multiple_testing", "rules", "add", "description"}


class RubricError(EvalsuiteError):
    """A rubric file with problems; the message names the file, line, rule and field of each."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("bad rubric:\n" + "\n".join(self.problems))


# ---------------------------------------------------------------------------------------------
# typed rules


def _f(x: float) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class MetricRule:
    """Checks on one metric (per scenario) of a variant against the baseline."""

    name: str
    scenarios: tuple[str, ...]  #: ("*",) for every scenario
    metric: str  #: name or glob
    min: float | None = None
    max: float | None = None
    max_drop: float | None = None
    max_drop_rel: float | None = None
    max_flips: int | None = None
    alpha: float | None = None  #: require_significance: drop/flip checks need p (adjusted) < alpha
    above_noise: bool = False  #: drop/flip checks need the variant to exceed the noise floor
    severity: str = "block"
    #: None (unset): a metric that no score of the run has is a rubric mistake (the gate refuses, exit 4);
    #: True: also missing paired scores make the run unjudgeable; False: the rule may match nothing (shown as skipped)
    required: bool | None = None
    description: str = ""
    where: str = ""  #: the rubric's file:line of the rule's metric (how a rule that matches nothing is named)

    kind = "metric"

    def matches(self, scenario: str, metric: str) -> bool:
        return ("*" in self.scenarios or scenario in self.scenarios) and fnmatch.fnmatchcase(metric, self.metric)

    @property
    def significance_gated(self) -> bool:
        return self.alpha is not None and (self.max_drop is not None or self.max_drop_rel is not None or self.max_flips is not None)

    def fails(self, delta: MetricDelta, noise: NoiseFloor | None = None, p_adjusted: float | None = None) -> str | None:
        """Why `delta` (a compare.MetricDelta: baseline and variant, paired) breaks this rule, or None.

        `noise` is the NoiseFloor of the same scenario and metric; `p_adjusted` the one-sided
        p-value after the gate's multiple-testing correction (defaults to `delta.p_worse`).
        """
        if delta.n == 0:
            return None
        what = "pass rate" if delta.pass_fail else "mean"
        reasons = []
        if self.min is not None and delta.variant_mean < self.min:
            own = f" (the baseline's own {what} {delta.baseline_mean:.3f} is below it too)" if delta.baseline_mean < self.min else ""
            reasons.append(f"{what} {delta.variant_mean:.3f} < min {self.min:g}{own}")
        if self.max is not None and delta.variant_mean > self.max:
            reasons.append(f"{what} {delta.variant_mean:.3f} > max {self.max:g}")
        relative = []
        if self.max_drop is not None and delta.harm > self.max_drop + 1e-12:
            relative.append(f"drop {delta.harm:.3f} > max_drop {self.max_drop:g} (baseline {delta.baseline_mean:.3f} -> {delta.variant_mean:.3f})")
        if self.max_drop_rel is not None and delta.rel_harm > self.max_drop_rel + 1e-12:
            relative.append(
                f"relative drop {100 * delta.rel_harm:.1f}% > max_drop_rel {100 * self.max_drop_rel:g}% (baseline {delta.baseline_mean:.3f} -> {delta.variant_mean:.3f})"
            )
        if self.max_flips is not None and delta.pass_fail and delta.flips > self.max_flips:
            relative.append(f"{delta.flips} pass->fail flip(s) > max_flips {self.max_flips} ({len(delta.fail_to_pass)} fail->pass)")
        if relative and self.alpha is not None:
            p = delta.p_worse if p_adjusted is None else p_adjusted
            if not p < self.alpha:
                relative = []  # not significant: within what chance explains
            else:
                relative = [r + f"; p={p:.4f} < alpha {self.alpha:g}" for r in relative]
        if relative and self.above_noise:
            floor_flips = noise.flips if noise is not None else 0
            floor_harm = noise.harm if noise is not None else 0.0
            beats = (delta.flips > floor_flips) if delta.pass_fail else (delta.harm > floor_harm)
            if not beats:
                relative = []
            else:
                src = f"noise floor {floor_flips} flip(s) / {floor_harm:.3f} over {len(noise.runs) if noise is not None else 0} noise run(s)"
                relative = [r + f"; above {src}" for r in relative]
        reasons += relative
        return "; ".join(reasons) or None


@dataclass(frozen=True)
class VariantRule:
    """Variant-level checks: reliability, performance ratios and speculative exactness."""

    name: str
    max_error_rate: float | None = None
    max_timeout_rate: float | None = None
    max_latency_p95_ratio: float | None = None
    min_tokens_per_s_ratio: float | None = None
    max_peak_memory_ratio: float | None = None
    min_exactness: float | None = None  #: only for variants that change speculative decoding
    #: share of code runs that ended as a sandbox `error` above which the variant cannot be judged
    max_sandbox_error_rate: float | None = None
    severity: str = "block"
    required: bool = False  #: missing performance figures make the run unjudgeable
    description: str = ""

    kind = "variant"

    def applies(self, perf: PerfDelta) -> bool:
        if self.min_exactness is not None and not perf.speculative:
            return any(getattr(self, f) is not None for f in _VARIANT_FIELDS - {"min_exactness"})
        return True

    def missing(self, perf: PerfDelta) -> list[str]:
        """Figures this rule needs that the run does not have."""
        need = {
            "max_latency_p95_ratio": perf.latency_p95_ratio,
            "min_tokens_per_s_ratio": perf.tokens_per_s_ratio,
            "max_peak_memory_ratio": perf.peak_memory_ratio,
            "min_exactness": perf.exactness if perf.speculative else 0.0,
        }
        return [k for k, v in need.items() if getattr(self, k) is not None and v is None]

    def fails(self, perf: PerfDelta, baseline: object = None, noise: Sequence[PerfDelta] = (), point_ratios: bool = True) -> str | None:
        """Why the variant's PerfDelta breaks this rule, or None (missing figures are not failures).

        Ratios timed interleaved carry intervals: they fail only when the whole interval is beyond
        the limit and beyond `noise` (the noise reruns' PerfDeltas); see evalsuite.perf.verdict.
        Ratios from one sequential pass are compared as points, unless `point_ratios` is False (the
        gate's warn rules: `single_pass` says why they cannot be judged instead)."""
        from ..perf.verdict import ci_checks

        ci = ci_checks(self, perf, noise)
        r = [c.reason for c in ci.values() if c.status == "fail"]
        if self.max_error_rate is not None and perf.error_rate > self.max_error_rate + 1e-12:
            r.append(f"error rate {perf.error_rate:.3f} ({perf.errors}/{perf.generations}) > max_error_rate {self.max_error_rate:g}")
        if self.max_timeout_rate is not None and perf.timeout_rate > self.max_timeout_rate + 1e-12:
            r.append(f"timeout rate {perf.timeout_rate:.3f} ({perf.timeouts}/{perf.generations}) > max_timeout_rate {self.max_timeout_rate:g}")
        if (
            point_ratios
            and "max_latency_p95_ratio" not in ci
            and self.max_latency_p95_ratio is not None
            and perf.latency_p95_ratio is not None
            and perf.latency_p95_ratio > self.max_latency_p95_ratio
        ):
            r.append(f"latency p95 x{perf.latency_p95_ratio:.2f} of the baseline > max_latency_p95_ratio {self.max_latency_p95_ratio:g}")
        if (
            point_ratios
            and "min_tokens_per_s_ratio" not in ci
            and self.min_tokens_per_s_ratio is not None
            and perf.tokens_per_s_ratio is not None
            and perf.tokens_per_s_ratio < self.min_tokens_per_s_ratio
        ):
            r.append(f"tokens/s x{perf.tokens_per_s_ratio:.2f} of the baseline < min_tokens_per_s_ratio {self.min_tokens_per_s_ratio:g}")
        if self.max_peak_memory_ratio is not None and perf.peak_memory_ratio is not None and perf.peak_memory_ratio > self.max_peak_memory_ratio:
            r.append(f"peak memory x{perf.peak_memory_ratio:.2f} of the baseline > max_peak_memory_ratio {self.max_peak_memory_ratio:g}")
        if self.min_exactness is not None and perf.speculative and perf.exactness is not None and perf.exactness < self.min_exactness:
            r.append(
                f"speculative exactness {perf.exactness:.3f} (share identical to the baseline, n={perf.exactness_n}) < min_exactness {self.min_exactness:g}"
            )
        return "; ".join(r) or None

    def single_pass(self, perf: PerfDelta) -> str | None:
        """Why this rule's speed limits cannot be judged on the run (None when they can, or are not
        set): the ratios come from one sequential pass per variant, where another job on the machine
        moves them by tens of percent (docs/performance.md); interleaved timing gives them intervals."""
        if getattr(perf, "timing", "sequential") == "interleaved":
            return None
        seen = [
            f"{label} x{ratio:.2f}"
            for limit, ratio, label in (
                (self.max_latency_p95_ratio, perf.latency_p95_ratio, "latency p95"),
                (self.min_tokens_per_s_ratio, perf.tokens_per_s_ratio, "tokens/s"),
            )
            if limit is not None and ratio is not None
        ]
        if not seen:
            return None
        return f"{', '.join(seen)} of the baseline {SINGLE_PASS}: speed cannot be judged on it (time the run with `timing: interleaved`)"

    def sandbox_unjudgeable(self, perf: PerfDelta) -> str | None:
        """Why the variant's code verdicts cannot be judged: more of its code runs ended as sandbox
        errors (infrastructure, never the answer's fault) than `max_sandbox_error_rate` allows."""
        runs, errors = getattr(perf, "sandbox_runs", 0), getattr(perf, "sandbox_errors", 0)
        if self.max_sandbox_error_rate is None or not runs or errors / runs <= self.max_sandbox_error_rate + 1e-12:
            return None
        return (
            f"sandbox errors {errors}/{runs} ({errors / runs:.3f}) > max_sandbox_error_rate {self.max_sandbox_error_rate:g}: the code verdicts cannot be judged"
        )

    def undecided(self, perf: PerfDelta, noise: Sequence[PerfDelta] = ()) -> str | None:
        """Why an interleaved performance check can neither pass nor fail (its interval straddles
        the limit, or is beyond it only within noise), or None."""
        from ..perf.verdict import ci_checks

        return "; ".join(c.reason for c in ci_checks(self, perf, noise).values() if c.status == CANNOT_JUDGE) or None


@dataclass(frozen=True)
class LoadRule:
    """Checks on a served variant under load (the suite's `load:` block), at every level.

    `max_load_flips` (batch invariance): replayed answers whose pass/fail differs from the same
    variant's answers at rest, beyond what its at-rest rerun shows alone; `max_load_ttft_p95_ratio`:
    the p95 TTFT against the baseline's server at the same level, paired by interleaved round
    (an interval, judged as evalsuite.perf judges speed); error and timeout rates per level."""

    name: str
    max_load_flips: int | None = None
    max_load_ttft_p95_ratio: float | None = None
    max_load_error_rate: float | None = None
    max_load_timeout_rate: float | None = None
    severity: str = "block"
    required: bool = False  #: a variant without load figures makes the run unjudgeable (else skipped)
    description: str = ""

    kind = "load"


Rule = MetricRule | VariantRule | LoadRule


@dataclass(frozen=True)
class StageRubric:
    """The rules of one stage, resolved."""

    name: str
    stage: str
    path: str
    alpha: float
    multiple_testing: str
    rules: tuple[Rule, ...]

    def rule(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        from ..errors import UnknownNameError

        raise UnknownNameError("rule", name, [r.name for r in self.rules])


@dataclass(frozen=True)
class Rubric:
    """A parsed rubric file: every stage resolved and validated."""

    name: str
    path: str
    stages: Mapping[str, StageRubric] = field(default_factory=dict)
    review: ReviewPolicy | None = None  #: the `review:` section: an evalsuite.review.policy.ReviewPolicy (flagging, max_open)

    def for_stage(self, stage: str) -> StageRubric:
        if stage not in self.stages:
            from ..errors import UnknownNameError

            raise UnknownNameError("stage", stage, list(self.stages))
        return self.stages[stage]

    def digest(self, stage: str) -> str:
        """What a stage's verdicts depend on, hashed: its resolved rules and the review policy (not the
        file's path or its other stages), so a release cleared under one rubric is known to need
        judging again when those change."""
        sr = self.for_stage(stage)
        rules = {k: v for k, v in asdict(sr).items() if k != "path"}
        rules["rules"] = [{k: v for k, v in r.items() if k != "where"} for r in rules["rules"]]  # a moved line is no new rule
        review = asdict(self.review) if is_dataclass(self.review) and not isinstance(self.review, type) else self.review
        return sha256_json({"stage": rules, "review": review})

    def rules_digest(self) -> str:
        """Every stage's `digest` together: what a review waiver given "until the rubric changes"
        holds under (it lapses when any stage's rules or the review policy change)."""
        return sha256_json({s: self.digest(s) for s in sorted(self.stages)})


# ---------------------------------------------------------------------------------------------
# parsing


class _Ctx:
    def __init__(self, file: str, lines: LineMap):
        self.file, self.lines = file, lines
        self.problems: list[str] = []

    def add(self, path: tuple, rule: str | None, fld: str, msg: str) -> None:
        line = self.lines.line_of(path)
        where = f"{self.file}:{line}" if line else self.file
        who = f" rule {rule}:" if rule else ""
        self.problems.append(f"{where}:{who} {fld}: {msg}")


def _num(ctx: _Ctx, path: tuple, who: str | None, key: str, v: object, lo: float | None = 0.0, hi: float | None = None, integer: bool = False) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)) or (isinstance(v, float) and math.isnan(v)):
        ctx.add(path, who, key, f"expected {'an integer' if integer else 'a number'}, got {v!r}")
        return None
    if lo is not None and v < lo:
        ctx.add(path, who, key, f"must be at least {lo:g}, got {v!r}")
        return None
    if hi is not None and v > hi:
        ctx.add(path, who, key, f"must be at most {hi:g}, got {v!r}")
        return None
    return int(v) if integer else float(v)


def _build_rule(ctx: _Ctx, raw: object, path: tuple, index: int, alpha: float) -> Rule | None:
    if not isinstance(raw, dict):
        ctx.add(path, f"#{index}", "(rule)", "expected a mapping")
        return None
    name = raw.get("name")
    who = f"#{index} ({name})" if isinstance(name, str) else f"#{index}"
    if not isinstance(name, str) or not name.strip():
        ctx.add(path, who, "name", "every rule needs a name (stages override rules by name)")
        return None
    ok = _common_fields_ok(ctx, raw, path, who)
    metric_keys = set(raw) & _METRIC_FIELDS
    variant_keys = set(raw) & _VARIANT_FIELDS
    load_keys = set(raw) & _LOAD_FIELDS
    if load_keys:
        return _load_rule(ctx, raw, path, who, ok, metric_keys | variant_keys)
    if "metric" in raw or metric_keys - {"scenario"}:
        if variant_keys:
            first = sorted(variant_keys)[0]
            ctx.add(path + (first,), who, first, "variant-level fields cannot be mixed with a metric rule; make a separate rule")
            return None
        return _metric_rule(ctx, raw, path, who, alpha, ok)
    if not variant_keys:
        what = f"a rule needs `metric` (with min/max/max_drop/max_drop_rel/max_flips), a variant-level field ({', '.join(sorted(_VARIANT_FIELDS))}) or a load field ({', '.join(sorted(_LOAD_FIELDS))})"
        ctx.add(path, who, "(checks)", what)
        return None
    vals = {}
    for k in sorted(variant_keys):
        hi = 1.0 if k in ("max_error_rate", "max_timeout_rate", "min_exactness", "max_sandbox_error_rate") else None
        vals[k] = _num(ctx, path + (k,), who, k, raw[k], lo=0.0, hi=hi)
        ok = ok and (vals[k] is not None or raw[k] is None)
    if not ok:
        return None
    return VariantRule(
        name=name, severity=raw.get("severity", "block"), required=bool(raw.get("required", False)), description=raw.get("description", ""), **vals
    )


def _load_rule(ctx: _Ctx, raw: dict, path: tuple, who: str, ok: bool, others: set) -> LoadRule | None:
    if others:
        first = sorted(others)[0]
        ctx.add(path + (first,), who, first, "load fields (max_load_*) cannot be mixed with other checks; make a separate rule")
        return None
    vals: dict = {}
    for k in sorted(set(raw) & _LOAD_FIELDS):
        hi = 1.0 if k in ("max_load_error_rate", "max_load_timeout_rate") else None
        vals[k] = _num(ctx, path + (k,), who, k, raw[k], lo=0.0, hi=hi, integer=k == "max_load_flips")
        ok = ok and (vals[k] is not None or raw[k] is None)
    if not ok:
        return None
    return LoadRule(
        name=raw["name"], severity=raw.get("severity", "block"), required=bool(raw.get("required", False)), description=raw.get("description", ""), **vals
    )


def _common_fields_ok(ctx: _Ctx, raw: dict, path: tuple, who: str) -> bool:
    """Unknown fields (with the close match), severity, and the true/false fields of any rule."""

    ok = True
    for k in sorted(set(raw) - _ALL_FIELDS, key=repr):  # YAML keys may be of any type
        ctx.add(path + (k,), who, k, f"unknown field{suggest(k, _ALL_FIELDS)}; known: {', '.join(sorted(_ALL_FIELDS))}")
        ok = False
    sev = raw.get("severity", "block")
    if sev not in SEVERITIES:
        ctx.add(path + ("severity",), who, "severity", f"must be one of {', '.join(SEVERITIES)}, got {sev!r}")
        ok = False
    for k in ("enabled", "required", "above_noise"):
        if k in raw and not isinstance(raw[k], bool):
            ctx.add(path + (k,), who, k, f"expected true or false, got {raw[k]!r}")
            ok = False
    return ok


def _scenarios(ctx: _Ctx, raw: dict, path: tuple, who: str) -> tuple[tuple[str, ...] | None, bool]:
    """A metric rule's scenarios as a tuple (None: unusable), and whether every name is known."""
    scen = raw.get("scenario", "*")
    scen_t = (scen,) if isinstance(scen, str) else tuple(scen) if isinstance(scen, list) and all(isinstance(s, str) for s in scen) else None
    if scen_t is None:
        ctx.add(path + ("scenario",), who, "scenario", f"expected a scenario name, a list of them, or '*', got {scen!r}")
        return None, False
    from ..cases.caseset import IMPORTED_PREFIXES, SCENARIOS

    ok = True
    for s in scen_t:
        if s != "*" and s not in SCENARIOS and not (s.startswith(IMPORTED_PREFIXES) and len(s) > s.index(":") + 1):
            known = f"{', '.join(SCENARIOS)}, *, or an imported task as {' / '.join(p + '<task>' for p in IMPORTED_PREFIXES)}"
            ctx.add(path + ("scenario",), who, "scenario", f"unknown scenario {s!r}; known: {known}")
            ok = False
    return scen_t, ok


def _metric_rule(ctx: _Ctx, raw: dict, path: tuple, who: str, alpha: float, ok: bool) -> MetricRule | None:
    metric = raw.get("metric")
    if not isinstance(metric, str) or not metric:
        ctx.add(path + ("metric",), who, "metric", "a metric rule needs `metric` (a name such as citations.recall, or a glob)")
        return None
    scen_t, scen_ok = _scenarios(ctx, raw, path, who)
    if scen_t is None:
        return None
    ok = ok and scen_ok
    sig = raw.get("require_significance")
    rule_alpha = alpha if sig is True else None
    if sig not in (True, False, None):
        rule_alpha = _num(ctx, path + ("require_significance",), who, "require_significance", sig, lo=1e-9, hi=0.5)
        ok = ok and rule_alpha is not None
    vals: dict = {}  # the rule's limits by name (floats; max_flips an int)
    for k, integer, lo in (("min", False, None), ("max", False, None), ("max_drop", False, 0.0), ("max_drop_rel", False, 0.0), ("max_flips", True, 0)):
        if k in raw and raw[k] is not None:
            vals[k] = _num(ctx, path + (k,), who, k, raw[k], lo=lo, integer=integer)
            ok = ok and vals[k] is not None
    if not any(v is not None for v in vals.values()):
        ctx.add(path, who, "(checks)", "a metric rule needs at least one of min, max, max_drop, max_drop_rel, max_flips")
        ok = False
    if (rule_alpha is not None or raw.get("above_noise")) and not any(vals.get(k) is not None for k in ("max_drop", "max_drop_rel", "max_flips")):
        fld = "require_significance" if rule_alpha is not None else "above_noise"
        ctx.add(path, who, fld, "qualifies max_drop, max_drop_rel or max_flips; the rule has none")
        ok = False
    if not ok:
        return None
    return MetricRule(
        name=raw["name"],
        scenarios=scen_t,
        metric=metric,
        alpha=rule_alpha,
        above_noise=bool(raw.get("above_noise", False)),
        severity=raw.get("severity", "block"),
        required=raw.get("required"),
        description=raw.get("description", ""),
        where=_where(ctx, path + ("metric",)),
        **vals,
    )


def _where(ctx: _Ctx, path: tuple) -> str:
    line = ctx.lines.line_of(path) or ctx.lines.line_of(path[:-1])
    return f"{ctx.file}:{line}" if line else ctx.file


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def parse_rubric(data: object, file: str = "<rubric>", lines: LineMap | None = None) -> Rubric:
    """Validate and resolve a loaded rubric document; raise RubricError naming every problem."""
    ctx = _Ctx(file, lines or LineMap())
    if not isinstance(data, dict):
        raise RubricError([f"{file}:1: (top level): expected a mapping with `rules`"])
    for k in sorted(set(data) - _TOP, key=repr):
        ctx.add((k,), None, k, f"unknown field; known: {', '.join(sorted(_TOP))}")
    base_alpha = _num(ctx, ("alpha",), None, "alpha", data.get("alpha", DEFAULT_ALPHA), lo=1e-9, hi=0.5) or DEFAULT_ALPHA
    mt = data.get("multiple_testing", "tarone")
    if mt not in MULTIPLE_TESTING:
        ctx.add(("multiple_testing",), None, "multiple_testing", f"must be one of {', '.join(MULTIPLE_TESTING)}, got {mt!r}")
        mt = "tarone"
    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        ctx.add(("rules",), None, "rules", "list at least one rule")
        raw_rules = []
    base = _Base(str(data.get("name", Path(file).stem)), raw_rules, _rule_names(ctx, raw_rules), base_alpha, mt)
    stages_raw = data.get("stages") or {}
    if not isinstance(stages_raw, dict):
        ctx.add(("stages",), None, "stages", "expected a mapping of stage name to overrides")
        stages_raw = {}
    for s in sorted(set(stages_raw) - set(STAGES), key=repr):
        ctx.add(("stages", s), None, f"stages.{s}", f"unknown stage; known: {', '.join(STAGES)}")
    stages: dict[str, StageRubric] = {}
    for stage in STAGES:
        sraw = stages_raw.get(stage) or {}
        if not isinstance(sraw, dict):
            ctx.add(("stages", stage), None, f"stages.{stage}", "expected a mapping (alpha, multiple_testing, rules, add)")
            continue
        stages[stage] = _stage(ctx, base, stage, sraw)
    from .review_policy import parse_review_policy

    review = parse_review_policy(data.get("review"), ctx.add)
    if ctx.problems:
        raise RubricError(ctx.problems)
    return Rubric(base.name, file, stages, review)


@dataclass(frozen=True)
class _Base:
    """The rubric's base rules and settings, which every stage starts from."""

    name: str
    raw_rules: list
    names: dict[str, int]  #: rule name -> index
    alpha: float
    multiple_testing: str


def _rule_names(ctx: _Ctx, raw_rules: list) -> dict[str, int]:
    names: dict[str, int] = {}
    for i, r in enumerate(raw_rules):
        n = r.get("name") if isinstance(r, dict) else None
        if isinstance(n, str):
            if n in names:
                ctx.add(("rules", i, "name"), f"#{i} ({n})", "name", f"duplicate rule name (also rule #{names[n]})")
            names.setdefault(n, i)
    return names


def _stage(ctx: _Ctx, base: _Base, stage: str, sraw: dict) -> StageRubric:
    """One stage: the base rules with the stage's overrides applied, plus the rules it adds."""
    for k in sorted(set(sraw) - _STAGE_KEYS, key=repr):
        ctx.add(("stages", stage, k), None, f"stages.{stage}.{k}", f"unknown field; known: {', '.join(sorted(_STAGE_KEYS))}")
    alpha = _num(ctx, ("stages", stage, "alpha"), None, f"stages.{stage}.alpha", sraw.get("alpha", base.alpha), lo=1e-9, hi=0.5) or base.alpha
    smt = sraw.get("multiple_testing", base.multiple_testing)
    if smt not in MULTIPLE_TESTING:
        ctx.add(("stages", stage, "multiple_testing"), None, f"stages.{stage}.multiple_testing", f"must be one of {', '.join(MULTIPLE_TESTING)}")
        smt = base.multiple_testing
    rules = _overridden_rules(ctx, base, stage, _stage_overrides(ctx, base, stage, sraw.get("rules") or {}), alpha)
    rules += _added_rules(ctx, base, stage, sraw.get("add") or [], alpha, rules)
    return StageRubric(base.name, stage, ctx.file, alpha, smt, tuple(rules))


def _stage_overrides(ctx: _Ctx, base: _Base, stage: str, overrides: object) -> dict:

    if not isinstance(overrides, dict):
        ctx.add(("stages", stage, "rules"), None, f"stages.{stage}.rules", "expected a mapping of rule name to field overrides")
        return {}
    for rname, ov in overrides.items():
        if rname not in base.names:
            ctx.add(("stages", stage, "rules", rname), str(rname), f"stages.{stage}.rules", f"no base rule named {rname!r}{suggest(rname, base.names)}")
        elif not isinstance(ov, dict):
            ctx.add(("stages", stage, "rules", rname), str(rname), f"stages.{stage}.rules.{rname}", "expected a mapping of field overrides")
    return overrides


def _overridden_rules(ctx: _Ctx, base: _Base, stage: str, overrides: dict, alpha: float) -> list[Rule]:
    """The base rules as this stage has them; base-rule problems are reported once, stage problems under their stage."""
    rules: list[Rule] = []
    for i, r in enumerate(base.raw_rules):
        if not isinstance(r, dict):
            if stage == STAGES[0]:
                _build_rule(ctx, r, ("rules", i), i, alpha)
            continue
        ov = overrides.get(r.get("name")) if isinstance(r.get("name"), str) else None
        merged: dict = r
        path: tuple = ("rules", i)
        if isinstance(ov, dict):
            merged = _merge(r, ov)
            path = ("stages", stage, "rules", r.get("name")) if set(ov) - _ALL_FIELDS else path
        if merged.get("enabled", True) is False:
            continue
        sub = _Ctx(ctx.file, ctx.lines)
        built = _build_rule(sub, merged, path, i, alpha)
        if isinstance(ov, dict) and sub.problems:
            sub.problems = [p.replace(f" rule #{i}", f" stages.{stage}: rule #{i}", 1) for p in sub.problems]
        ctx.problems.extend(p for p in sub.problems if p not in ctx.problems)
        if built is not None:
            rules.append(built)
    return rules


def _added_rules(ctx: _Ctx, base: _Base, stage: str, adds: object, alpha: float, rules: list[Rule]) -> list[Rule]:
    if not isinstance(adds, list):
        ctx.add(("stages", stage, "add"), None, f"stages.{stage}.add", "expected a list of rules")
        return []
    out: list[Rule] = []
    for j, r in enumerate(adds):
        sub = _Ctx(ctx.file, ctx.lines)
        built = _build_rule(sub, r, ("stages", stage, "add", j), len(base.raw_rules) + j, alpha)
        ctx.problems.extend(p.replace(" rule #", f" stages.{stage}.add: rule #", 1) for p in sub.problems)
        if built is not None:
            if built.name in base.names or any(x.name == built.name for x in rules + out):
                ctx.add(("stages", stage, "add", j, "name"), built.name, "name", "duplicate rule name")
            out.append(built)
    return out


def load_rubric(path: str | Path) -> Rubric:
    """Load, validate and resolve a rubric file (every stage)."""
    p = Path(path)
    if not p.is_file():
        raise RubricError([f"{p}: rubric file not found"])
    try:
        data, lines = load_yaml(p)
    except EvalsuiteError as exc:
        raise RubricError([str(exc)]) from exc
    return parse_rubric(data, str(p), lines)


def default_rubric_path() -> Path:
    """The default rubric: rubrics/default.yaml in the working directory (the project's own copy, from
    `evalsuite init`), else the one shipped with evalsuite (evalsuite.shipped)."""
    own = Path("rubrics") / "default.yaml"
    if own.is_file():
        return own
    try:
        return shipped_path("rubric", "default")
    except EvalsuiteError as exc:
        raise RubricError([f"rubrics/default.yaml not found (pass --rubric FILE): {exc}"]) from exc


def resolve_rubric_path(given: str | Path | None, suite: Mapping[str, object] | None = None) -> Path:
    """The rubric to use: the one given, else the suite's `rubric:`, else the default rubric.
    `shipped:NAME` names a rubric shipped with evalsuite (`shipped:default`)."""
    chosen = given or (suite or {}).get("rubric")
    if not chosen:
        return default_rubric_path()
    if str(chosen).startswith(PREFIX):
        try:
            return shipped_path("rubric", str(chosen))
        except EvalsuiteError as exc:
            raise RubricError([str(exc)]) from exc
    return Path(str(chosen))


def resolve_stage(given: str | None, suite: Mapping[str, object] | None = None) -> tuple[str, str]:
    """The one stage rule: (stage, where it came from). The stage given, else the suite's `stage:`,
    else DEFAULT_STAGE; the source ("given", "suite" or "default") is named in every output."""
    if given:
        return given, "given"
    if suite and suite.get("stage"):
        return str(suite["stage"]), "suite"
    return DEFAULT_STAGE, "default"


STAGE_SOURCES = {"given": "as given", "suite": "the suite's stage:", "default": "the default: no stage given and none in the suite"}


def stage_reason(source: str) -> str:
    """Why a command judges for its stage, in words, from `resolve_stage`'s source."""
    return STAGE_SOURCES[source]


def replace_rule(rule: Rule, **changes: object) -> Rule:
    """A copy of a rule with some fields changed (tests and what-if analyses)."""
    fields: dict = dict(changes)  # fields of several types, by name: the dataclass checks the names
    return replace(rule, **fields)
