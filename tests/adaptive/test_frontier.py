"""The benchmark's bounds on any adaptive gate (benchmarks/adaptive_frontier.py): checked by brute force."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks/

from benchmarks.adaptive_frontier import oracle_log_lr, patched, prefix_floor, prefix_miss, share_for_miss  # noqa: E402
from evalsuite.adaptive import sequential as sq  # noqa: E402
from evalsuite.adaptive import checks as vd  # noqa: E402


def _brute_log_lr(d, population, damaged, q):
    """log L(d | unchanged) / L(d | `damaged` random cases of `population` damaged), by enumerating
    every damaged subset (the prefix is the first len(d) positions of a random order)."""
    a = q * (1 - q)
    undamaged = {1: a, 0: 1 - 2 * a, -1: a}
    hurt = {1: 1 - q, 0: q, -1: 0.0}
    subsets = list(itertools.combinations(range(population), damaged))
    l0 = np.mean([np.prod([hurt[x] if i in s else undamaged[x] for i, x in enumerate(d)]) for s in subsets])
    l1 = np.prod([undamaged[x] for x in d])
    if l1 == 0:
        return -math.inf
    return math.inf if l0 == 0 else math.log(l1 / l0)


@pytest.mark.parametrize("q", [0.0, 0.02, 0.1, 0.3])
def test_oracle_likelihood_ratio_matches_enumeration(q):
    rng = np.random.default_rng(int(q * 100))
    population, damaged = 8, 2
    for _ in range(12):
        d = rng.choice([-1, 0, 1], size=int(rng.integers(1, population + 1)), p=[0.15, 0.6, 0.25] if q else [0, 0.8, 0.2])
        got = oracle_log_lr(d, population, damaged / population, q)
        for t in range(1, d.size + 1):
            want = _brute_log_lr(list(d[:t]), population, damaged, q)
            if math.isinf(want):
                assert math.isinf(got[t - 1]) and np.sign(got[t - 1]) == np.sign(want)
            else:
                assert got[t - 1] == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_oracle_likelihood_ratio_has_mean_one_under_the_damaged_null():
    """Summed over every damaged subset and every outcome of the first t cases, E0[LR_t] = 1 less the
    unchanged-probability of prefixes the null cannot produce (more fail->pass flips than undamaged
    cases): at most 1, so the oracle is an e-process for its simple null (Ville's inequality)."""
    population, damaged, q = 6, 2, 0.1
    a = q * (1 - q)
    undamaged = {1: a, 0: 1 - 2 * a, -1: a}
    hurt = {1: 1 - q, 0: q, -1: 0.0}
    subsets = list(itertools.combinations(range(population), damaged))
    for t in (1, 3, 5):
        total, impossible = 0.0, 0.0
        for d in itertools.product((-1, 0, 1), repeat=t):
            p0 = np.mean([np.prod([hurt[x] if i in s else undamaged[x] for i, x in enumerate(d)]) for s in subsets])
            if p0 > 0:
                total += p0 * math.exp(oracle_log_lr(np.array(d), population, damaged / population, q)[-1])
            else:
                impossible += np.prod([undamaged[x] for x in d])
        assert total == pytest.approx(1.0 - impossible, rel=1e-12)
        assert total <= 1.0 + 1e-12


def test_prefix_miss_and_the_share_it_takes():
    # C(N-K, n) / C(N, n) against counting
    for population, damaged, read in [(10, 2, 3), (12, 3, 6), (9, 1, 8)]:
        subsets = list(itertools.combinations(range(population), damaged))
        clear = sum(1 for s in subsets if min(s) >= read) / len(subsets)
        assert prefix_miss(population, damaged, read) == pytest.approx(clear)
    # 8 damaged of 80: a pass after 27 clean cases misses 3%; a miss rate of 1 in 200 needs 38 of 80 read
    assert prefix_miss(80, 8, 27) == pytest.approx(0.0306, abs=5e-4)
    share = share_for_miss(80, 8, 0.005)
    assert share == 38 / 80
    assert prefix_miss(80, 8, 38) <= 0.005 < prefix_miss(80, 8, 37)


def test_evalsuite_pass_side_is_no_faster_than_the_oracle_on_a_clean_case_set():
    """Without noise the oracle passes a clean check of 80 at 1 / P(no damaged case in the prefix)
    >= 20: after 24 cases (the floor of any test at alpha 0.05 is 25 by prefix_miss, the oracle
    counts a crossing at the last case it needs); evalsuite's plug-in bet needs a few more."""
    d = np.zeros(80)
    oracle = sq.first_crossing(oracle_log_lr(d, 80, 0.10, 0.0), 0.05)
    ours = sq.first_crossing(sq.no_large_drop_log_e(d, 80, 0.10), 0.05)
    assert oracle is not None and ours is not None
    assert oracle + 1 == min(n for n in range(81) if prefix_miss(80, 8, n) <= 0.05)
    assert oracle <= ours <= oracle + 4


def test_patched_swaps_the_pass_side_and_restores_it():
    original, seen = sq.no_large_drop_log_e, vd.PASS_MAX_SEEN
    with patched(0.0, pass_max_seen=3.0):
        assert sq.no_large_drop_log_e is not original and vd.PASS_MAX_SEEN == 3.0
        out = sq.no_large_drop_log_e(np.zeros(30), 80, 0.10)
        assert np.allclose(out, oracle_log_lr(np.zeros(30), 80, 0.10, 0.0))
        mixed = np.array([0.5, 0.0, 0.25])  # not pass/fail: evalsuite's own e-process
        assert np.allclose(sq.no_large_drop_log_e(mixed, 80, 0.10), original(mixed, 80, 0.10))
    with patched("free"):
        assert np.all(np.isinf(sq.no_large_drop_log_e(np.ones(3), 80, 0.10)))
    assert sq.no_large_drop_log_e is original and vd.PASS_MAX_SEEN == seen


def test_prefix_floor_unites_the_checks_prefixes():
    from types import SimpleNamespace

    order = [f"c{i}" for i in range(30)]
    need_a = math.ceil(share_for_miss(20, 2, 0.05) * 20)  # 20 cases, 2 damaged at 10%
    a = SimpleNamespace(sequential=True, population=tuple(order[:20]))
    b = SimpleNamespace(sequential=True, population=tuple(order[10:30]))  # overlaps a's tail
    exact = SimpleNamespace(sequential=False, population=tuple(order))  # exact rules are left out
    assert prefix_floor([a], order, 0.05) == need_a / 30
    assert prefix_floor([a, b, exact], order, 0.05) == len(set(order[:need_a]) | set(order[10:10 + need_a])) / 30
    assert prefix_floor([a], order, 0.005) > prefix_floor([a], order, 0.05)
