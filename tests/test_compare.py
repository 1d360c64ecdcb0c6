"""Paired comparison: textbook statistics, flips, missing cases, samples, noise floors, performance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalsuite.verdict.compare import (
    VariantInfo,
    binom_worse_p,
    bootstrap_delta_ci,
    compare_records,
    mcnemar_p,
    permutation_p,
)
from evalsuite.scoring.base import ScoreRecord


def rec(variant, case, metric="m.pass", passed=None, value=None, sample=0, scenario="kb_qa", hib=True, details=None):
    if value is None and passed is not None:
        value = 1.0 if passed else 0.0
    return ScoreRecord(variant=variant, case_id=case, sample=sample, scenario=scenario, kind="grounded", metric=metric, value=value, passed=passed, higher_is_better=hib, details=details or {})


VARIANTS = [VariantInfo("base", baseline=True), VariantInfo("opt"), VariantInfo("rerun", noise=True)]


# --------------------------------------------------------------------------- textbook values


@pytest.mark.parametrize(
    "table, expected",
    [
        ([[10, 5], [1, 20]], 0.21875),  # b=5, c=1: 2 * P(X <= 1 | Bin(6, 1/2)) = 2 * 7/64
        ([[50, 8], [0, 42]], 2 / 256),  # b=8, c=0: 2 * (1/2)^8
        ([[5, 3], [3, 5]], 1.0),  # symmetric discordance
        ([[9, 0], [0, 1]], 1.0),  # no discordant pairs
        ([[0, 10], [2, 0]], 2 * sum(math.comb(12, k) for k in range(3)) / 2**12),  # 2 * P(X <= 2 | Bin(12, 1/2)) = 0.0386
    ],
)
def test_mcnemar_exact_matches_binomial(table, expected):
    assert mcnemar_p(table) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("p2f, f2p, expected", [(8, 0, 1 / 256), (5, 1, 7 / 64), (0, 0, 1.0), (0, 4, 1.0), (3, 3, 0.65625)])
def test_one_sided_mcnemar(p2f, f2p, expected):
    assert binom_worse_p(p2f, f2p) == pytest.approx(expected, rel=1e-9)


def test_bootstrap_ci_covers_the_true_mean_difference_about_95_percent():
    rng = np.random.default_rng(7)
    hits, reps, n, true = 0, 300, 60, 0.3
    for i in range(reps):
        b = rng.normal(0, 1, n)
        v = b + true + rng.normal(0, 1, n)
        lo, hi = bootstrap_delta_ci(b, v, seed=i, n_resamples=1000)
        hits += lo <= true <= hi
    assert 0.91 <= hits / reps <= 0.98, hits / reps


def test_permutation_p_exact_on_small_example():
    # 4 pairs, all differences -1: the sign-flip null has 2^4 equally likely sums; only one is as low
    base, var = np.ones(4), np.zeros(4)
    two, worse = permutation_p(base, var, True, seed=0)
    assert worse == pytest.approx(1 / 16)
    assert two == pytest.approx(2 / 16)
    assert permutation_p(base, base, True, seed=0) == (1.0, 1.0)


@pytest.mark.parametrize("n, c, k, expected", [(10, 3, 1, 0.3), (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5)), (5, 0, 2, 0.0), (5, 4, 2, 1.0), (20, 10, 10, 1 - math.comb(10, 10) / math.comb(20, 10))])
def test_pass_at_k_chen_et_al(n, c, k, expected):
    code = pytest.importorskip("evalsuite.scoring.code")
    assert code.pass_at_k(n, c, k) == pytest.approx(expected)


# --------------------------------------------------------------------------- pairing


def test_flips_missing_cases_and_means():
    base_pass = {"c1": True, "c2": True, "c3": False, "c4": True, "c5": True}
    opt_pass = {"c1": False, "c2": True, "c3": True, "c4": False, "c6": True}  # c5 missing, c6 extra
    records = [rec("base", c, passed=p) for c, p in base_pass.items()] + [rec("opt", c, passed=p, details={"why": c}) for c, p in opt_pass.items()]
    cmp = compare_records(records, VARIANTS[:2])
    d = cmp.delta("opt", "kb_qa", "m.pass")
    assert d.pass_fail and d.n == 4
    assert d.pass_to_fail == ("c1", "c4") and d.fail_to_pass == ("c3",)
    assert d.missing_in_variant == ("c5",) and d.missing_in_baseline == ("c6",)
    assert d.baseline_mean == pytest.approx(3 / 4) and d.variant_mean == pytest.approx(2 / 4)
    assert d.delta == pytest.approx(-0.25) and d.harm == pytest.approx(0.25)
    assert d.p_value == pytest.approx(1.0)  # b=2, c=1
    assert d.p_worse == pytest.approx(0.5)  # P(X >= 2 | Bin(3, 1/2))
    assert d.details["c1"] == {"why": "c1"}
    assert any("c5" in w for w in cmp.warnings)


def test_samples_are_averaged_per_case_and_continuous_direction():
    records = []
    for c in range(12):
        for s in range(3):
            records.append(rec("base", f"c{c}", "json.drift", value=0.0, sample=s, hib=False))
            records.append(rec("opt", f"c{c}", "json.drift", value=3.0 if (c < 6 and s == 0) else 0.0, sample=s, hib=False))
    d = compare_records(records, VARIANTS[:2]).delta("opt", "kb_qa", "json.drift")
    assert not d.pass_fail and not d.higher_is_better and d.n == 12
    assert d.variant_mean == pytest.approx(0.5)  # six cases at mean 1.0 over samples
    assert d.harm == pytest.approx(0.5) and d.p_worse < 0.05
    assert set(d.worse_cases) == {f"c{c}" for c in range(6)}
    assert d.ci_low <= d.delta <= d.ci_high


def test_multi_sample_pass_shares_use_permutation_and_majority_flips():
    records = []
    for c in range(10):
        for s in range(4):
            records.append(rec("base", f"c{c}", passed=True, sample=s))
            records.append(rec("opt", f"c{c}", passed=not (c < 3 and s < 3), sample=s))  # c0-c2 pass 1 of 4
    d = compare_records(records, VARIANTS[:2]).delta("opt", "kb_qa", "m.pass")
    assert d.pass_fail and d.pass_to_fail == ("c0", "c1", "c2")
    assert d.variant_mean == pytest.approx(1 - 3 * 0.75 / 10)
    assert d.p_worse == pytest.approx(1 / 8)  # exact sign-flip over the 3 nonzero differences


def test_noise_floor_and_determinism():
    records = [rec("base", f"c{i}", passed=True) for i in range(20)]
    records += [rec("opt", f"c{i}", passed=i >= 4) for i in range(20)]
    records += [rec("rerun", f"c{i}", passed=i != 7) for i in range(20)]
    a = compare_records(records, VARIANTS)
    b = compare_records(list(reversed(records)), VARIANTS)
    assert a.noise_runs == ("rerun",) and a.variants == ("opt",)
    nf = a.noise_floor("kb_qa", "m.pass")
    assert nf.runs == ("rerun",) and nf.flips == 1 and nf.harm == pytest.approx(0.05)
    assert a.noise_floor("code", "other").flips == 0
    da, db = a.delta("opt", "kb_qa", "m.pass"), b.delta("opt", "kb_qa", "m.pass")
    assert (da.ci_low, da.ci_high, da.p_value) == (db.ci_low, db.ci_high, db.p_value)


def test_performance_ratios_and_exactness():
    perf = {
        "base": {"generations": 100, "errors": 0, "timeouts": 0, "latency_p95_s": 2.0, "tokens_per_s_median": 50.0, "peak_memory_mb": 1000},
        "opt": {"generations": 100, "errors": 3, "timeouts": 1, "latency_p95_s": 1.0, "tokens_per_s_median": 80.0, "peak_memory_mb": 400},
    }
    infos = [VariantInfo("base", baseline=True), VariantInfo("opt", speculative=True)]
    records = [rec("base", "c1", passed=True), rec("opt", "c1", passed=True)]
    records += [rec("opt", f"c{i}", "exactness.identical", passed=i != 0) for i in range(4)]
    p = compare_records(records, infos, perf=perf).perf_for("opt")
    assert (p.latency_p95_ratio, p.tokens_per_s_ratio, p.peak_memory_ratio) == (0.5, 1.6, 0.4)
    assert (p.error_rate, p.timeout_rate) == (0.03, 0.01)
    assert p.speculative and p.exactness == 0.75 and p.exactness_n == 4


@pytest.mark.parametrize(
    "records, problem",
    [([], "no scores"), ([rec("base", "c1", passed=True)], "variant 'opt' has no scores")],
)
def test_problems_make_a_comparison_unjudgeable(records, problem):
    cmp = compare_records(records, VARIANTS[:2])
    assert any(problem in p for p in cmp.problems)


def test_incomplete_run_is_a_problem():
    cmp = compare_records([rec("base", "c1", passed=True), rec("opt", "c1", passed=True)], VARIANTS[:2], complete=False)
    assert any("incomplete" in p for p in cmp.problems)


@pytest.mark.parametrize(
    "n, r, q, k, expected",
    [
        (5, 1.0, 0.0, 1, 1.0),  # 5 certain flips: p = 1/32 < 0.05
        (4, 1.0, 0.0, 1, 0.0),  # 4 certain flips: p = 1/16, never significant
        (8, 1.0, 0.0, 8, 1.0),  # 8 flips: 1/256 < 0.05/8
        (7, 1.0, 0.0, 8, 0.0),  # 7 flips: 1/128 > 0.05/8
        (1, 0.5, 0.0, 1, 0.0),
    ],
)
def test_power_exact_corner_cases(n, r, q, k, expected):
    from evalsuite.verdict.power import power

    assert power(n, r, q, k=k) == pytest.approx(expected)


def test_power_size_and_monotonicity():
    from evalsuite.verdict.power import detectable, power

    assert power(80, 0.0, 0.05) <= 0.05  # no regression: rejects at most alpha
    assert power(80, 0.05) < power(80, 0.10) < power(160, 0.10)
    assert detectable(160) < detectable(80) < detectable(20)


@pytest.mark.parametrize("base, var, higher, expected", [([1.0], [0.0], True, (1.0, 0.5)), ([0.0], [1.0], True, (1.0, 1.0)), ([0.0], [1.0], False, (1.0, 0.5))])
def test_permutation_p_of_a_single_pair_is_its_two_sign_flips(base, var, higher, expected):
    """One case per scenario (`--limit 1`) must not crash the gate: scipy refuses a single observation."""
    import numpy as np

    from evalsuite.verdict.stats import permutation_p

    assert permutation_p(np.array(base), np.array(var), higher, seed=0) == expected
