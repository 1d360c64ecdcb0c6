"""The anytime-valid e-processes: checked against closed forms, the savvi library, and by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalsuite.adaptive.sequential import (beta_mixture_e, first_crossing, grid_log_e, joint_p, lower_bound, no_large_drop_log_e, plugin_bets,
                                          plugin_log_e, regression_log_e, upper_bound)


@pytest.mark.parametrize("b, c", [(5, 0), (7, 0), (10, 2), (20, 8), (3, 9)])
def test_grid_mixture_matches_the_closed_form_mixture_sprt(b, c):
    d = np.array([1.0] * b + [-1.0] * c + [0.0] * 25)  # zeros (concordant cases) do not move it
    grid = math.exp(grid_log_e(d)[-1])
    exact = beta_mixture_e(b, c)
    assert grid == pytest.approx(exact, rel=0.01)
    assert math.exp(grid_log_e(d, grid=2000)[-1]) == pytest.approx(exact, rel=1e-4)
    assert regression_log_e(d)[-1] == pytest.approx(grid_log_e(d)[-1])


def test_plugin_bets_follow_their_formula_step_by_step():
    """c_i = clip(sum_{j<i} y_j / (prior + sum_{j<i} y_j^2), 0, cap), from the past only (predictable)."""
    from evalsuite.adaptive.sequential import PLUGIN_CAP, PLUGIN_PRIOR

    rng = np.random.default_rng(5)
    y = rng.uniform(-1, 1, size=40)
    s = q = 0.0
    wealth = 1.0
    for i, c in enumerate(plugin_bets(y)):
        assert c == pytest.approx(min(max(s / (PLUGIN_PRIOR + q), 0.0), PLUGIN_CAP))
        wealth *= 1 + c * y[i]
        assert math.log(wealth) == pytest.approx(plugin_log_e(y)[i])
        s, q = s + y[i], q + y[i] ** 2
    # one-sided data (a clean variant on the pass side): the plug-in bets nearly all-in and beats the grid
    ones = np.full(20, 0.15)
    assert plugin_log_e(ones)[-1] > grid_log_e(ones)[-1] + 0.5


def test_batched_sequences_are_independent():
    rng = np.random.default_rng(2)
    y = rng.choice([-1.0, 0.0, 1.0], size=(5, 30))
    batched = regression_log_e(y)
    for k in range(5):
        assert np.allclose(batched[k], regression_log_e(y[k]))


@pytest.mark.parametrize("b, c, k", [(5, 0, 2), (3, 4, 2), (12, 3, 10), (0, 6, 1), (30, 18, 100)])
def test_two_sided_closed_form_matches_savvi(b, c, k):
    """savvi's Dirichlet-multinomial test (Lindon & Malek 2022) on [pass->fail, fail->pass] with a
    fair-coin null is the two-sided Beta(k/2, k/2) mixture of `beta_mixture_e`."""
    savvi = pytest.importorskip("savvi.multinomial")
    m = savvi.Multinomial(0.05, np.array([0.5, 0.5]), k=k)
    m.update(np.array([b, c]))
    assert beta_mixture_e(b, c, a=k / 2, one_sided=False) == pytest.approx(m.odds, rel=1e-9)


def test_regression_e_process_keeps_its_level_under_every_look():
    """Fair-coin flips (an unchanged variant), looked at after every case: the running maximum
    reaches 1/alpha in at most alpha of 1,000 seeded sequences (plus the binomial margin)."""
    rng = np.random.default_rng(7)
    alpha, runs, hits = 0.05, 1000, 0
    for _ in range(runs):
        d = rng.choice([-1.0, 0.0, 0.0, 1.0], size=200)
        hits += first_crossing(regression_log_e(d), alpha) is not None
    assert hits / runs <= alpha + 1.96 * math.sqrt(alpha * (1 - alpha) / runs)


def test_without_replacement_pass_side_keeps_its_level_when_the_drop_is_exactly_tau():
    """A case set whose drop is exactly tau = 0.1 (6 of 60 cases pass->fail), in 1,000 random orders:
    the pass side wrongly rules out a drop of 0.1 in at most alpha of them."""
    rng = np.random.default_rng(11)
    pop = np.array([1.0] * 6 + [0.0] * 54)
    alpha, runs = 0.05, 1000
    hits = sum(first_crossing(no_large_drop_log_e(rng.permutation(pop), 60, 0.10), alpha) is not None for _ in range(runs))
    assert hits / runs <= alpha + 1.96 * math.sqrt(alpha * (1 - alpha) / runs)


def test_without_replacement_is_exact_at_the_last_case_and_fast_for_a_clean_variant():
    clean = np.zeros(80)
    le = no_large_drop_log_e(clean, 80, 0.10)
    assert math.isinf(le[-1])  # nothing can bring the drop to 0.1 any more
    i = first_crossing(le, 0.05)
    assert i is not None and i + 1 <= 30  # a clean variant is passed well within half the cases
    bad = np.array([1.0] * 8 + [0.0] * 72)  # drop exactly 0.1: never ruled out
    assert first_crossing(no_large_drop_log_e(bad, 80, 0.10), 0.05) is None


def test_confidence_bounds_cover_the_truth_and_tighten():
    rng = np.random.default_rng(3)
    pop = rng.choice([0.0, 1.0], p=[0.8, 0.2], size=100)
    order = rng.permutation(pop)
    lo30, lo100 = lower_bound(order[:30], 0.05), lower_bound(order, 0.05)
    hi30, hi100 = upper_bound(order[:30], 100, 0.05), upper_bound(order, 100, 0.05)
    assert lo30 <= pop.mean() <= hi30 and lo100 <= pop.mean() <= hi100
    assert hi100 - pop.mean() < 0.01 and hi100 < hi30  # without replacement: exact at the end


@pytest.mark.parametrize("b, c", [(8, 0), (12, 4), (20, 8), (3, 9), (0, 5)])
def test_final_look_p_value_is_the_exact_mass_of_its_region(b, c):
    """joint_p on pass/fail flips (dynamic programming) equals brute force over all 2^m sign
    patterns of the same region {e-process crossed} U {sum >= observed}, and is never below the
    exact McNemar p it extends."""
    from itertools import product

    from evalsuite.verdict.compare import binom_worse_p

    alpha_seq = 0.05 / 6
    m = b + c
    p, p_min, p_cross = joint_p(np.array([1.0] * b + [-1.0] * c + [0.0] * 10), alpha_seq)
    if m <= 16:
        pats = np.array(list(product([1.0, -1.0], repeat=m)))
        crossed = np.max(regression_log_e(pats), axis=1) >= math.log(1 / alpha_seq) - 1e-12
        assert p == pytest.approx(float(np.mean(crossed | (pats.sum(axis=1) >= b - c))))
        assert p_cross == pytest.approx(float(crossed.mean()))
        assert p_min == pytest.approx(float(np.mean(crossed | (pats.sum(axis=1) >= m))))
    assert binom_worse_p(b, c) - 1e-12 <= p <= binom_worse_p(b, c) + p_cross + 1e-12


def test_final_look_keeps_its_level_with_the_looks_included():
    """Continuous differences (Monte Carlo branch) under the null, 400 seeded sequences: rejecting
    when the e-process crosses or when joint_p <= alpha happens in at most alpha of them."""
    rng = np.random.default_rng(9)
    alpha, runs, hits = 0.05, 400, 0
    for k in range(runs):
        d = rng.uniform(0, 0.6, size=40) * rng.choice([-1.0, 1.0], size=40) * (rng.random(40) < 0.5)
        crossed = first_crossing(regression_log_e(d), alpha / 4) is not None
        hits += crossed or joint_p(d, alpha / 4, resamples=500, seed=k)[0] <= alpha
    assert hits / runs <= alpha + 1.96 * math.sqrt(alpha * (1 - alpha) / runs)
