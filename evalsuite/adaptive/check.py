"""One sequential check (a rubric rule on one scenario and metric, evalsuite.adaptive.checks) and its
evaluation on the cases generated so far: exact curtailment of its fixed parts, the sequential
e-processes of its significance-gated part, and the decision they reach."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..verdict.compare import CaseAgg
from ..verdict.decisions import CheckResult
from ..verdict.rubric import MetricRule
from . import sequential as sq

#: a check passes early only while the drop seen so far is at most this share of its tau
PASS_MAX_SEEN = 0.5


@dataclass(frozen=True, kw_only=True)
class Check:
    """One rule on one (scenario, metric): its case set, its levels, its tolerance."""

    rule: MetricRule
    scenario: str
    metric: str
    block: bool
    sequential: bool  #: significance-gated relative checks (else only exact parts)
    alpha_fail: float
    alpha_pass: float
    alpha_final: float
    tau: float  #: the pass side rules out a drop of tau over the case set
    population: tuple[str, ...]  #: case ids with a baseline score, in the run's order
    base_values: tuple[float, ...]  #: the baseline's value of each case of `population`
    base_passed: tuple[bool, ...]
    pass_fail: bool
    higher_is_better: bool
    baseline_mean: float

    @property
    def key(self) -> str:
        return f"{self.rule.name}:{self.scenario}/{self.metric}"

    @functools.cached_property
    def unit_range(self) -> bool:
        """Whether the per-case values are taken to lie in [0, 1] (pass shares always; a continuous
        metric when every baseline value does): the bounds that curtailment and the pass side's
        without-replacement test rest on. A metric on another scale (a count, a 0-100 score) is
        decided by curtailment only at its last case, and passes only at the final look."""
        return self.pass_fail or all(0.0 <= x <= 1.0 for x in self.base_values)


def case_value(agg: CaseAgg, pass_fail: bool) -> float:
    """A case's headline value: its pass share (pass/fail metrics) or mean value (plain sums: hot path)."""
    xs = agg.passes if (pass_fail or not agg.values) else agg.values
    return sum(xs) / len(xs)


def case_passed(agg: CaseAgg) -> bool:
    return bool(agg.passes) and sum(agg.passes) / len(agg.passes) >= 0.5


# ---------------------------------------------------------------------------------------------
# evaluating a check on the cases generated so far


def seq_arrays(check: Check, base: Mapping[str, CaseAgg], var: Mapping[str, CaseAgg], generated: set) -> dict:
    """The check's observed prefix: paired per-case values, their differences (harm), and what the
    cases after each observed one could still add (from their baseline values)."""
    ids, b, v, bp, vp, dropped = [], [], [], [], [], 0
    for j, cid in enumerate(check.population):
        if cid not in generated:
            break
        agg = var.get(cid)
        if agg is None or not (agg.passes or agg.values) or (check.pass_fail and not agg.passes):
            # not scored on the variant (or, on a pass/fail metric, without a pass/fail): not part of the paired case set
            dropped += 1
            continue
        ids.append(cid)
        b.append(check.base_values[j])
        bp.append(check.base_passed[j])
        v.append(case_value(agg, check.pass_fail))
        vp.append(case_passed(agg))
    k_all = len(ids) + dropped
    hib = check.higher_is_better
    b_arr, v_arr = np.array(b, dtype=float), np.array(v, dtype=float)
    d = (b_arr - v_arr) if hib else (v_arr - b_arr)
    rest_b = np.clip(np.array(check.base_values[k_all:], dtype=float), 0.0, 1.0)
    ob = np.clip(b_arr, 0.0, 1.0)
    # a case's harm lies in [b - 1, b] (higher is better, values in [0, 1]) or [-b, 1 - b]
    dmax_o, dmin_o = (ob, ob - 1.0) if hib else (1.0 - ob, -ob)
    dmax_r, dmin_r = (rest_b, rest_b - 1.0) if hib else (1.0 - rest_b, -rest_b)
    bp_o = np.array(bp, dtype=float) if check.pass_fail else np.ones(len(ids))
    bp_r = float(sum(check.base_passed[k_all:])) if check.pass_fail else float(len(check.population) - k_all)
    vp_o = np.array(vp, dtype=float) if check.pass_fail else np.ones(len(ids))

    def after(x_obs: np.ndarray, x_rest: float) -> np.ndarray:  # sum over the cases after each observed one
        return (x_obs.sum() - np.cumsum(x_obs)) + x_rest if len(x_obs) else np.zeros(0)

    n_pop = len(check.population) - dropped
    # the [0, 1] bounds hold up to each observed case (a variant value outside them voids them from there on)
    bounded = np.logical_and.accumulate((v_arr >= 0.0) & (v_arr <= 1.0)) & check.unit_range if len(ids) else np.zeros(0, dtype=bool)
    open_after = ~bounded & (n_pop - np.arange(1, len(ids) + 1) > 0)  # unbounded, with cases still to come
    return {
        "ids": ids,
        "b": b_arr,
        "v": v_arr,
        "d": d,
        "n_pop": n_pop,
        "bounded": bounded,
        "open_after": open_after,
        "dmax_after": np.where(open_after, np.inf, after(dmax_o, float(dmax_r.sum()))),
        "dmin_after": np.where(open_after, -np.inf, after(dmin_o, float(dmin_r.sum()))),
        "bpass_after": after(bp_o, bp_r),
        "p2f": np.cumsum((bp_o > 0) & (vp_o == 0)) if check.pass_fail else np.zeros(len(ids)),
        "exhausted": k_all == len(check.population),
    }


def _first(x: np.ndarray) -> int | None:
    return int(np.argmax(x)) if x.size and x.any() else None


def _exact(check: Check, s: dict) -> tuple[int | None, int | None, str]:
    """Curtailment of the rule's non-statistical parts (min, max, and for a rule without
    significance its max_drop / max_drop_rel / max_flips): (index at which failing became certain,
    index at which passing became certain, reason). No such part: passing is certain from the start (-1)."""
    r, n, k = check.rule, s["n_pop"], len(s["ids"])
    fail_at: list[tuple[int, str]] = []
    pass_at: list[int | None] = []
    if n <= 0 or k == 0:
        has = _has_exact(r) or not check.sequential
        return None, (None if has else -1), ""
    idx = np.arange(1, k + 1)
    cv, cd = np.cumsum(s["v"]), np.cumsum(s["d"])
    rem = n - idx
    # the most and the least the remaining cases' values could add: [0, 1] each, unbounded off that range
    v_hi = np.where(s["open_after"], np.inf, rem.astype(float))
    v_lo = np.where(s["open_after"], -np.inf, 0.0)

    def part(fail: np.ndarray, ok: np.ndarray, why: str) -> None:
        f = _first(fail)
        if f is not None:
            fail_at.append((f, why))
        pass_at.append(_first(ok))

    if r.min is not None:
        part((cv + v_hi) / n < r.min, (cv + v_lo) / n >= r.min, f"the value over all {n} cases can no longer reach min {r.min:g}")
    if r.max is not None:
        part((cv + v_lo) / n > r.max, (cv + v_hi) / n <= r.max, f"the value over all {n} cases exceeds max {r.max:g} whatever the rest")
    if not check.sequential:
        lo, hi = (cd + s["dmin_after"]) / n, (cd + s["dmax_after"]) / n
        if r.max_drop is not None:
            part(lo > r.max_drop + 1e-12, hi <= r.max_drop + 1e-12, f"the drop over all {n} cases exceeds max_drop {r.max_drop:g} whatever the rest")
        if r.max_drop_rel is not None:
            bm = abs(check.baseline_mean)
            rel = (lambda h: np.where(h <= 0, 0.0, np.inf)) if bm == 0 else (lambda h: h / bm)
            part(
                rel(lo) > r.max_drop_rel + 1e-12,
                rel(hi) <= r.max_drop_rel + 1e-12,
                f"the relative drop exceeds max_drop_rel {r.max_drop_rel:g} whatever the rest",
            )
        if r.max_flips is not None and check.pass_fail:
            p2f = s["p2f"]
            part(p2f > r.max_flips, p2f + s["bpass_after"] <= r.max_flips, f"pass->fail flip(s) > max_flips {r.max_flips}")
    if not pass_at:
        return None, -1, ""
    f = min(fail_at)[0] if fail_at else None
    why = min(fail_at)[1] if fail_at else ""
    if r.max_flips is not None and not check.sequential and f is not None and "flip" in why:
        why = f"{int(s['p2f'][f])} " + why
    p = max(pass_at) if all(x is not None for x in pass_at) else None  # type: ignore[type-var]
    return f, p, why


def evaluate_check(
    check: Check, base: Mapping[str, CaseAgg], var: Mapping[str, CaseAgg], generated: set, bounds: bool = False, *, pass_max_seen: float = PASS_MAX_SEEN
) -> tuple[CheckResult, dict]:
    """Decide one check on the generated prefix (sequential and exact parts); the final look is left
    to `evaluate` (it needs the whole family)."""
    s = seq_arrays(check, base, var, generated)
    r = check.rule
    res = CheckResult(check.key, r.name, check.scenario, check.metric, r.severity, "open", seen=len(s["ids"]), population=s["n_pop"])
    d = s["d"]
    n = len(d)
    res.numbers = {
        "n": n,
        "N": s["n_pop"],
        "harm": float(d.mean()) if n else None,
        "pass_to_fail": int(s["p2f"][-1]) if n and check.pass_fail else 0,
        "tau": check.tau,
        "alpha_fail": check.alpha_fail,
        "alpha_pass": check.alpha_pass,
    }
    if s["exhausted"] and not n and not r.required:
        # every case generated and none scored on the variant: skipped, as the fixed-n gate skips a rule
        # without paired scores (a `required` rule stays open: the gate then cannot judge the run)
        res.status, res.how, res.decided_at = "pass", "skipped", 0
        res.reason = f"no paired scores of {check.metric} on the variant: the rule is skipped (it is not `required`)"
        return res, s
    seq = _sequential(check, s, res.numbers, pass_max_seen) if check.sequential and n else _Sequential()
    _decide(res, check, s, _exact(check, s), seq)
    if bounds and n and check.sequential:
        res.numbers["ci_low"] = sq.lower_bound(d, check.alpha_fail)
        res.numbers["ci_high"] = sq.upper_bound(d, s["n_pop"], check.alpha_pass, s["dmax_after"])
    return res, s


@dataclass(frozen=True)
class _Sequential:
    """Where a check's e-processes crossed (index of the deciding case, or None), and why."""

    fail: int | None = None
    passed: int | None = None
    why_fail: str = ""
    why_pass: str = ""


def _material(check: Check, s: dict, harm_run: np.ndarray) -> np.ndarray:
    """Per observed case: whether the drop seen so far breaks the rule's threshold (a significant
    regression fails only when it is also material)."""
    r = check.rule
    material = np.zeros(len(harm_run), dtype=bool)
    if r.max_drop is not None:
        material |= harm_run > r.max_drop + 1e-12
    if r.max_drop_rel is not None:
        bm = abs(check.baseline_mean)
        material |= (harm_run > 0) if bm == 0 else (harm_run / bm > r.max_drop_rel + 1e-12)
    if r.max_flips is not None and check.pass_fail:
        material |= s["p2f"] > r.max_flips
    return material


def _sequential(check: Check, s: dict, numbers: dict, pass_max_seen: float) -> _Sequential:
    """The sequential parts of a significance-gated check: the regression e-process (fail) and the
    without-replacement one that rules out a drop of tau (pass); their e-values go into `numbers`."""
    d = s["d"]
    n = len(d)
    le_fail = sq.regression_log_e(d)
    harm_run = np.cumsum(d) / np.arange(1, n + 1)
    seq_fail = sq.first_crossing(le_fail, check.alpha_fail, _material(check, s, harm_run))
    le_pass = sq.no_large_drop_log_e(d, s["n_pop"], check.tau, s["dmax_after"])
    # and, like the fail side's materiality, the drop seen so far is at most half the tolerance: a
    # drop already near tau is left to run on (the fixed-n test may fail it) rather than tolerated
    # (the test assumes each d in [-1, 1]: no early pass off the [0, 1] range, where d is clipped)
    seq_pass = sq.first_crossing(le_pass, check.alpha_pass, (harm_run <= check.tau * pass_max_seen + 1e-12) & s["bounded"])
    if seq_pass is not None and seq_pass + 1 >= s["n_pop"]:
        seq_pass = None  # at the last case passing early saves nothing: the final look (the fixed-n test) judges
    top_f, top_p = float(np.max(le_fail)), float(np.max(le_pass))
    numbers.update(e_fail=math.exp(min(700.0, top_f)), e_pass=math.exp(min(700.0, top_p)) if math.isfinite(top_p) else "certain")
    why_fail = why_pass = ""
    if seq_fail is not None:
        e = math.exp(min(700.0, float(np.max(le_fail[: seq_fail + 1]))))
        why_fail = (
            f"regression e-value {e:.4g} >= 1/alpha {1 / check.alpha_fail:.4g} after {seq_fail + 1} of {s['n_pop']} cases, drop so far {harm_run[seq_fail]:.3f}"
        )
    if seq_pass is not None:
        certain = not math.isfinite(float(le_pass[seq_pass]))
        why_pass = (
            f"a drop of {check.tau:.3f} or more over the {s['n_pop']} cases is "
            + ("no longer possible" if certain else f"ruled out (e-value >= 1/alpha {1 / check.alpha_pass:.4g})")
            + f" after {seq_pass + 1} cases"
        )
    return _Sequential(seq_fail, seq_pass, why_fail, why_pass)


def _decide(res: CheckResult, check: Check, s: dict, exact: tuple[int | None, int | None, str], seq: _Sequential) -> None:
    """The check's decision from its exact and sequential parts: the first decision stands (a check
    that passed is not read again, nor one that failed)."""
    ex_fail, ex_pass, ex_why = exact
    fails = [(i, how, why) for i, how, why in ((ex_fail, "exact", ex_why), (seq.fail, "sequential", seq.why_fail)) if i is not None]
    first_fail = min(fails) if fails else None
    pass_at = None
    if ex_pass is not None and (not check.sequential or seq.passed is not None):
        pass_at = max(ex_pass, seq.passed if check.sequential else -1)  # type: ignore[type-var]
    if first_fail is not None and (pass_at is None or first_fail[0] <= pass_at):
        i, how, why = first_fail
        res.status, res.how, res.decided_at, res.reason = "fail", how, i + 1, why
    elif pass_at is not None:
        res.status, res.decided_at = "pass", max(pass_at + 1, 1)
        seq_last = check.sequential and (seq.passed or 0) >= (ex_pass if ex_pass is not None else -1)
        res.how = "sequential" if seq_last else "exact"
        res.reason = (
            seq.why_pass
            if seq_last
            else ("no outcome of the remaining cases can break the rule" if res.decided_at < s["n_pop"] else f"all {s['n_pop']} cases checked")
        )


def _has_exact(r: MetricRule) -> bool:
    return r.min is not None or r.max is not None
