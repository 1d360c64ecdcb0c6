"""Rubric rules as sequential checks: what an adaptive run decides, and when.

One *check* per (block or warn metric rule, scenario, metric) that the baseline has scores for,
exactly the units the fixed-n gate judges. Each check reads its cases in the run's seeded order
(`seeded_order`) and is decided as soon as it can be:

- a significance-gated rule (max_drop / max_drop_rel / max_flips with require_significance)
  **fails** when the regression e-process (sequential.regression_log_e) has reached 1/alpha_fail and
  the drop seen so far breaks the rule's threshold, and **passes** when the without-replacement
  e-process rules out a drop of `tau` = max(the rule's threshold, the adaptive tolerance) over the
  check's whole case set (sequential.no_large_drop_log_e);
- any other part of a rule (`min`, `max`, a `max_flips`/`max_drop` without significance: zero
  tolerance) is decided *exactly*, by curtailment: fail once no outcome of the remaining cases can
  save it, pass once no outcome can break it (a zero-tolerance rule passes only at its last case);
- a check whose case set is exhausted undecided gets the **final look**: the fixed-n gate's rule
  (MetricRule.fails, noise floor included) on all its cases, with the p-value of
  `sequential.joint_p`, whose rejection region contains the sequential fail's, at the full alpha.

False alarms (per variant, like the fixed-n gate): each of the variant's K block significance-gated
checks fails sequentially when its e-process reaches 1/alpha_fail, alpha_fail = `split` * alpha / K;
at the final look the family is corrected with the rubric's method (Tarone by default) at alpha,
on the joint p-values, counting every check that was not looked at in full as able to reject
(p_min 0): a conservative Tarone. A check Tarone leaves out could still have failed sequentially,
so the null mass of the complete checks' sequential regions that could be left out is taken off
alpha first. Each kept check then fails (early or at the end) with chance at most its Tarone level,
so an unchanged variant fails with chance at most alpha, however often it is peeked at, and the
final look is as strong as the fixed-n gate's test up to the null mass of the sequential region
(p_cross in the numbers: typically a few thousandths). A false *pass* (a drop of at least tau over
the case set passed early) has probability at most alpha per check.

Warn rules are checked the same way with the raw alpha_seq (as the fixed-n gate uses raw p-values for
them); they never drive generation: a warn check reads only the prefix of its cases the block checks
made the run generate.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..verdict.compare import DEFAULT_SEED, CaseAgg, MetricDelta, NoiseFloor
from ..verdict.decisions import CheckResult  # the gate reads an adaptive run's checks as they are
from ..verdict.rubric import MetricRule, StageRubric
from ..verdict.stats import seed_for as _seed_for
from . import sequential as sq
from .check import PASS_MAX_SEEN as PASS_MAX_SEEN  # read at each evaluation: benchmarks/adaptive_frontier.py patches it here
from .check import Check, case_passed, case_value, evaluate_check, seq_arrays

if TYPE_CHECKING:
    from ..cases.caseset import Case

DEFAULT_TOLERANCE = 0.10
DEFAULT_SPLIT = 0.5


@dataclass(frozen=True)
class AdaptiveSettings:
    """How an adaptive run decides and stops."""

    stage: str = "production"  #: the rubric stage whose block rules decide when a variant stops
    rubric: str | None = None  #: rubric file (default: the suite's, else rubrics/default.yaml)
    seed: int = 0  #: seeds the case order
    tolerance: float = DEFAULT_TOLERANCE  #: a pass rules out a drop of max(rule threshold, tolerance) over the case set
    split: float = DEFAULT_SPLIT  #: the sequential fail's e-process threshold is 1 / (split * alpha / K); the final look then gets what the looks left
    until: str = "verdict"  #: verdict: stop a variant once its verdict is decided; rules: once every block rule is
    batch_size: int | None = None  #: cases per batch (default: the suite's generation.batch_size)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# the order


def _unit(seed: int, *parts: str) -> float:
    h = hashlib.sha256("\x1f".join(["evalsuite-adaptive", str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def seeded_order(cases: Sequence[Case], seed: int) -> list[str]:
    """Case ids in a seeded random order, stratified by scenario: each scenario's cases shuffled
    (by a seeded hash of the id, so the order does not depend on file order), then interleaved so
    every scenario advances at the same pace (case k of a scenario of n sits at (k + 1/2) / n)."""
    by: dict[str, list[str]] = {}
    for c in cases:
        by.setdefault(c.scenario, []).append(c.id)
    keyed = []
    for scen, ids in sorted(by.items()):
        ids = sorted(set(ids), key=lambda i: (_unit(seed, scen, i), i))
        keyed += [((k + 0.5) / len(ids), scen, cid) for k, cid in enumerate(ids)]
    return [cid for _, _, cid in sorted(keyed)]


# ---------------------------------------------------------------------------------------------
# checks


def build_checks(sr: StageRubric, base: Mapping[tuple[str, str], Mapping[str, CaseAgg]], order: Sequence[str], settings: AdaptiveSettings) -> list[Check]:
    """The checks of a stage for the (scenario, metric) pairs the baseline scored, with their levels."""
    pos = {cid: i for i, cid in enumerate(order)}
    raw: list[tuple] = []
    for rule in sr.rules:
        if not isinstance(rule, MetricRule):
            continue
        for (scen, metric), aggs in sorted(base.items()):
            if not rule.matches(scen, metric):
                continue
            pop = tuple(sorted((c for c in aggs if c in pos), key=pos.__getitem__))
            if pop:
                raw.append((rule, scen, metric, pop, aggs))
    k = sum(1 for r, *_ in raw if r.severity == "block" and r.significance_gated)
    out = []
    for rule, scen, metric, pop, aggs in raw:
        block = rule.severity == "block"
        a = rule.alpha if rule.alpha is not None else sr.alpha
        pass_fail = all(aggs[c].passes for c in pop)
        hib = True if pass_fail else sum(aggs[c].hib for c in pop) * 2 >= len(pop)
        bm = float(np.mean([case_value(aggs[c], pass_fail) for c in pop]))
        limits = [settings.tolerance]
        thr = [
            x
            for x in (
                rule.max_drop,
                rule.max_drop_rel * abs(bm) if rule.max_drop_rel is not None else None,
                (rule.max_flips + 1) / len(pop) if rule.max_flips is not None else None,
            )
            if x is not None
        ]
        if thr:
            limits.append(min(thr))
        a_seq = a * settings.split
        out.append(
            Check(
                rule=rule,
                scenario=scen,
                metric=metric,
                block=block,
                sequential=rule.significance_gated,
                alpha_fail=a_seq / max(k, 1) if block else a_seq,
                alpha_pass=a,
                alpha_final=a,
                tau=max(limits),
                population=pop,
                base_values=tuple(case_value(aggs[c], pass_fail) for c in pop),
                base_passed=tuple(case_passed(aggs[c]) for c in pop),
                pass_fail=pass_fail,
                higher_is_better=hib,
                baseline_mean=bm,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# a variant


@dataclass
class VariantState:
    """A variant's checks on its generated cases, and its verdict so far."""

    variant: str
    verdict: str  #: fail | pass | open
    results: list[CheckResult]
    generated: int  #: cases generated for the variant
    decided_after: int | None = None  #: variant cases after which the verdict was decided (peeking after every case)
    total: int = 0  #: cases the fixed-n run generates
    awaiting: bool = False  #: a final look needs the rest of the family's cases

    def block_open(self) -> list[CheckResult]:
        return [r for r in self.results if r.severity == "block" and r.status == "open"]

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "verdict": self.verdict,
            "generated": self.generated,
            "total": self.total,
            "decided_after": self.decided_after,
            "checks": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class Look:
    """How `evaluate` looks at a variant's generated cases (everything but the cases and scores)."""

    method: str = "tarone"  #: the final look's multiple-testing correction (the rubric's)
    noise_floor: Callable[[str, str], NoiseFloor] | None = None  #: (scenario, metric) -> the noise runs' floor
    bounds: bool = False  #: also compute each sequential check's confidence bounds
    variant_name: str | None = None  #: the name that seeds the final look (default: the variant's)
    #: a dict kept across calls on a growing prefix (replay): a check decided before the final look
    #: stays decided as more cases come, so it is not recomputed
    memo: dict | None = None
    sequence: Sequence[str] | None = None  #: the generated cases in generation order (default: the run's order)


@dataclass(frozen=True)
class _Prefix:
    """One variant's generated prefix, as `evaluate` reads it."""

    variant: str
    checks: Sequence[Check]
    base: Mapping[tuple[str, str], Mapping[str, CaseAgg]]
    var: Mapping[tuple[str, str], Mapping[str, CaseAgg]]
    generated: set
    look: Look

    def var_of(self, ch: Check) -> Mapping[str, CaseAgg]:
        return self.var.get((ch.scenario, ch.metric), {})


def evaluate(
    variant: str,
    checks: Sequence[Check],
    base: Mapping[tuple[str, str], Mapping[str, CaseAgg]],
    var: Mapping[tuple[str, str], Mapping[str, CaseAgg]],
    generated: set,
    order: Sequence[str],
    look: Look = Look(),
) -> VariantState:
    """Every check of a variant on the cases generated so far, the final look on the exhausted ones,
    and the verdict (fail: a block check failed; pass: every block check passed)."""
    pre = _Prefix(variant, checks, base, var, generated, look)
    results, states = _check_results(pre)
    awaiting = _final_looks(pre, results, states)
    gen_pos = list(look.sequence) if look.sequence is not None else [c for c in order if c in generated]
    _map_to_variant_cases(results, states, gen_pos)
    verdict, after = _variant_state(results, len(gen_pos))
    return VariantState(variant, verdict, results, len(gen_pos), after, awaiting=awaiting)


def _check_results(pre: _Prefix) -> tuple[list[CheckResult], list[dict]]:
    """Each check decided on the prefix (the memo's decided checks as they were)."""
    memo = pre.look.memo
    results, states = [], []
    for ch in pre.checks:
        if memo is not None and ch.key in memo:
            r, s = memo[ch.key]
        else:
            r, s = evaluate_check(ch, pre.base[(ch.scenario, ch.metric)], pre.var_of(ch), pre.generated, pre.look.bounds, pass_max_seen=PASS_MAX_SEEN)
            if memo is not None and r.status != "open":
                memo[ch.key] = (r, s)
        results.append(r)
        states.append(s)
    return results, states


def _final_looks(pre: _Prefix, results: list[CheckResult], states: list[dict]) -> bool:
    """The final look, on the significance-gated checks whose case set is exhausted undecided;
    returns whether one awaits the rest of its family's cases."""
    checks = pre.checks
    looks = [i for i, ch in enumerate(checks) if ch.sequential and results[i].status == "open" and states[i]["exhausted"] and states[i]["ids"]]
    if not looks:
        return False
    fam = [i for i, ch in enumerate(checks) if ch.block and ch.sequential]
    final = functools.partial(_final_figures, pre, states, pre.look.memo if pre.look.memo is not None else {})
    # the family's checks whose every case is generated (some decided early, their cases generated for
    # other checks): their p and p_min are known; the others count as able to reject (p_min 0)
    complete = {i: final(i) for i in fam if all(c in pre.generated for c in checks[i].population)}
    alpha = checks[fam[0]].alpha_final if fam else 0.0
    # a check Tarone leaves out can still have failed sequentially: its crossing mass comes off the top
    # (the checks with p_min > alpha / K include every check Tarone leaves out, for any K' <= K)
    alpha_f = alpha - sum(pc for i, (dl, pc) in complete.items() if dl.p_min > alpha / max(len(fam), 1))
    adjust = functools.partial(_adjusted, pre.look.method, alpha_f)
    cons = adjust({i: complete.get(i, (None, 0.0))[0] for i in fam})  # the unknown ones at p 1, p_min 0
    known = [i for i in fam if i in complete]
    opt = adjust({i: complete[i][0] for i in known})
    awaiting = False
    for i in looks:
        awaiting |= _final_look(pre, results[i], checks[i], final(i), (alpha - alpha_f, cons.get(i), opt.get(i), len(known) < len(fam)))
    return awaiting


def _final_figures(pre: _Prefix, states: list[dict], cache: dict, i: int) -> tuple[MetricDelta, float]:
    """A complete check's final figures (they never change as more cases come: computed once per `cache`)."""
    ch = pre.checks[i]
    key = ("final", ch.key)
    if key not in cache:
        st = states[i] if states[i]["exhausted"] else seq_arrays(ch, pre.base[(ch.scenario, ch.metric)], pre.var_of(ch), pre.generated)
        cache[key] = final_delta(pre.look.variant_name or pre.variant, ch, st)
    return cache[key]


def _adjusted(method: str, alpha: float, deltas: Mapping[int, MetricDelta | None]) -> dict[int, float]:
    """The family's p-values corrected together (a check without figures: p 1, p_min 0)."""
    from ..verdict.stats import adjust_pvalues

    if not deltas:
        return {}
    idx = list(deltas)
    ps = [deltas[i].p_worse if deltas[i] is not None else 1.0 for i in idx]  # type: ignore[union-attr]
    mins = [deltas[i].p_min if deltas[i] is not None else 0.0 for i in idx]  # type: ignore[union-attr]
    return dict(zip(idx, adjust_pvalues(ps, mins, method, alpha)))


def _final_look(pre: _Prefix, res: CheckResult, ch: Check, figures: tuple[MetricDelta, float], family: tuple) -> bool:
    """One check's final look at all its cases: fail, pass, or pending the rest of its family's
    cases (returned True). `family`: (alpha taken off, conservative p, full-family p, family incomplete)."""
    delta, p_cross = figures
    taken, p_cons, p_opt, incomplete = family
    # each rule at its own alpha (as the fixed-n gate judges it), less the crossing mass taken off
    rule = _with_alpha(ch.rule, ch.alpha_final - taken if ch.block else ch.alpha_final)
    noise = pre.look.noise_floor(ch.scenario, ch.metric) if pre.look.noise_floor else None
    p = p_cons if ch.block else delta.p_worse
    reason = rule.fails(delta, noise, p)
    # the conservative correction passes it, but the family's full-set correction could fail it:
    # generate the rest of the family's cases first (then the final look is the fixed-n gate's Tarone)
    pending = ch.block and not reason and rule.fails(delta, noise, p_opt) is not None and incomplete
    res.how, res.decided_at = "final look", res.seen
    res.numbers.update(p_worse=delta.p_worse, p_adjusted=p, alpha_final=rule.alpha, p_cross=p_cross)
    if reason:
        res.status, res.reason = "fail", f"final look at all {res.population} cases (alpha {rule.alpha:g}): {reason}"
    elif pending:
        res.how, res.decided_at = "final look pending", None
        res.reason = "significant unless every check of the family is corrected for: the rest of the family's cases are needed"
    else:
        res.status, res.reason = "pass", f"final look at all {res.population} cases (alpha {rule.alpha:g}): within the rule"
    return bool(pending)


def _map_to_variant_cases(results: list[CheckResult], states: list[dict], gen_pos: list[str]) -> None:
    """Each decision's count of the variant's generated cases (in generation order)."""
    where = {c: i + 1 for i, c in enumerate(gen_pos)}
    for r, s in zip(results, states):
        if r.status != "open" and r.decided_at:
            # the decided_at-th case read by the check (dropped unscored cases do not count)
            ids = s["ids"]
            last = ids[min(r.decided_at, len(ids)) - 1] if ids else None
            r.variant_cases = where.get(last, len(gen_pos)) if last else len(gen_pos)


def _variant_state(results: list[CheckResult], n_generated: int) -> tuple[str, int | None]:
    """The variant's verdict from its block checks, and after how many of its cases it was decided."""
    block = [r for r in results if r.severity == "block"]
    fails = [r for r in block if r.status == "fail"]
    if fails:
        return "fail", min(r.variant_cases or n_generated for r in fails)
    if block and all(r.status == "pass" for r in block):
        return "pass", max(r.variant_cases or n_generated for r in block)
    if not block:
        return "pass", 0
    return "open", None


def final_delta(variant: str, ch: Check, s: dict) -> tuple[MetricDelta, float]:
    """The last look at a check whose case set is exhausted: the fixed-n comparison's figures, with
    the one-sided p of `sequential.joint_p` (whose rejection region includes the sequential fail's,
    so the check spends all of its alpha) in place of the exact McNemar / permutation p; and the
    null mass of the sequential region (p_cross)."""
    b, v, ids = s["b"], s["v"], s["ids"]
    if ch.pass_fail:
        bp, vp = b >= 0.5, v >= 0.5
        p2f = tuple(c for c, x, y in zip(ids, bp, vp) if x and not y)
        f2p = tuple(c for c, x, y in zip(ids, bp, vp) if y and not x)
    else:
        p2f = f2p = ()
    p_worse, p_min, p_cross = sq.joint_p(s["d"], ch.alpha_fail, seed=_seed_for(DEFAULT_SEED, variant, ch.scenario, ch.metric))
    harm = (b - v) if ch.higher_is_better else (v - b)
    worse = tuple(ids[i] for i in np.argsort(-harm, kind="stable") if harm[i] > 1e-12) if not ch.pass_fail else ()
    bm, vm = float(np.mean(b)), float(np.mean(v))
    return MetricDelta(
        variant=variant,
        scenario=ch.scenario,
        metric=ch.metric,
        pass_fail=ch.pass_fail,
        higher_is_better=ch.higher_is_better,
        n=len(ids),
        baseline_mean=bm,
        variant_mean=vm,
        delta=vm - bm,
        ci_low=math.nan,
        ci_high=math.nan,
        p_value=p_worse,
        p_worse=p_worse,
        p_min=p_min,
        pass_to_fail=p2f,
        fail_to_pass=f2p,
        worse_cases=worse,
    ), p_cross


def _with_alpha(rule: MetricRule, alpha: float) -> MetricRule:
    return replace(rule, alpha=alpha)


def needed_cases(state: VariantState, checks: Sequence[Check], order: Sequence[str], generated: set) -> list[str]:
    """Cases still to generate, in order: those of some open block check (a warn check never costs
    a generation of its own), and, when a final look awaits its family, every block check's."""
    open_keys = {r.key for r in state.block_open()}
    need: set[str] = set()
    for ch in checks:
        if ch.key in open_keys or (state.awaiting and ch.block and ch.sequential):
            need.update(ch.population)
    return [c for c in order if c in need and c not in generated]


def is_done(state: VariantState, until: str) -> bool:
    """Whether a variant may stop: its verdict is decided (or, `until=rules`, every block rule is)."""
    if until == "rules":
        return not state.block_open()
    return state.verdict != "open"


def replay(
    variant: str, checks: Sequence[Check], base, var, order: Sequence[str], batch_size: int, until: str = "verdict", look: Look = Look()
) -> VariantState:
    """What an adaptive run would have generated and decided, on a variant whose every case is
    already scored: the driver's loop (batches of the needed cases, a decision after each), without
    generating anything. The demo and the benchmark use it on stored full runs. (`look.memo` and
    `look.sequence` are the replay's own.)"""
    generated: set = set()
    sequence: list[str] = []
    look = replace(look, memo={}, sequence=sequence)
    while True:
        state = evaluate(variant, checks, base, var, generated, order, look)
        if is_done(state, until):
            break
        nxt = needed_cases(state, checks, order, generated)[:batch_size]
        if not nxt:
            break
        generated.update(nxt)
        sequence += nxt
    state.total = len(order)
    return state
