"""The statistics of a paired comparison, in one place: the comparison and the review waivers
(which recompute a delta with the accepted cases set equal to the baseline) call the same
`paired_test`, so a waived delta is tested exactly as the comparison would have tested it; and the
family-wise correction (Tarone, Holm, Bonferroni) of the gate and the adaptive verdicts.

Which test a paired sample gets:
- per-case pass/fail values that are all 0 or 1: the exact McNemar test on the flips (statsmodels),
  and the one-sided exact binomial p of "more pass->fail than fail->pass" that a gate asks;
- anything else (continuous metrics, pass shares over several samples): a paired permutation test
  (scipy's `permutation_test`, sign flips of the paired differences).
The 95% interval of the delta is a paired bootstrap over case ids (scipy, BCa, else percentile).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence

import numpy as np

N_BOOTSTRAP = 2000
N_PERMUTATIONS = 4999


def seed_for(seed: int, *parts: str) -> int:
    h = hashlib.sha256("\x1f".join([str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def mcnemar_p(table: Sequence[Sequence[int]]) -> float:
    """Two-sided exact McNemar p-value of a 2x2 table [[a, b], [c, d]] (statsmodels)."""
    from statsmodels.stats.contingency_tables import mcnemar

    b, c = int(table[0][1]), int(table[1][0])
    if b + c == 0:
        return 1.0
    return float(mcnemar(np.asarray(table, dtype=float), exact=True).pvalue)


def binom_worse_p(pass_to_fail: int, fail_to_pass: int) -> float:
    """One-sided exact p of "pass->fail flips outnumber fail->pass" (the McNemar test, one tail)."""
    from scipy.stats import binomtest

    n = pass_to_fail + fail_to_pass
    if n == 0:
        return 1.0
    return float(binomtest(pass_to_fail, n, 0.5, alternative="greater").pvalue)


def bootstrap_delta_ci(base: np.ndarray, var: np.ndarray, seed: int, n_resamples: int = N_BOOTSTRAP, level: float = 0.95) -> tuple[float, float]:
    """Paired bootstrap CI of mean(var) - mean(base), resampling case ids (scipy, BCa)."""
    from scipy.stats import bootstrap

    diff = var - base
    if len(diff) == 0:
        return (math.nan, math.nan)
    if len(diff) < 2 or np.all(diff == diff[0]):
        d = float(diff[0]) if len(diff) else math.nan
        return (d, d)

    def stat(x, y, axis=-1):
        return np.mean(y, axis=axis) - np.mean(x, axis=axis)

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = bootstrap(
                (base, var), stat, paired=True, vectorized=True, n_resamples=n_resamples, confidence_level=level, method=method, rng=np.random.default_rng(seed)
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return (lo, hi)
    return (math.nan, math.nan)


def permutation_p(base: np.ndarray, var: np.ndarray, higher_is_better: bool, seed: int, n_resamples: int = N_PERMUTATIONS) -> tuple[float, float]:
    """Paired permutation test of the mean difference (sign flips; exact when 2^n <= n_resamples).

    Returns (two-sided p, one-sided p of "the variant is worse").
    """
    from scipy.stats import permutation_test

    diff = var - base
    if len(diff) == 0 or np.all(diff == 0):
        return (1.0, 1.0)
    if len(diff) == 1:  # one pair: its two sign flips, exactly (scipy needs two or more observations)
        worse = diff[0] < 0 if higher_is_better else diff[0] > 0
        return (1.0, 0.5 if worse else 1.0)

    def stat(x, y, axis=-1):
        return np.mean(y, axis=axis) - np.mean(x, axis=axis)

    worse = "less" if higher_is_better else "greater"
    res = permutation_test(
        (base, var), stat, permutation_type="samples", vectorized=True, n_resamples=n_resamples, alternative=worse, rng=np.random.default_rng(seed)
    )
    p_worse = float(res.pvalue)
    res2 = permutation_test(
        (base, var), stat, permutation_type="samples", vectorized=True, n_resamples=n_resamples, alternative="two-sided", rng=np.random.default_rng(seed)
    )
    return (float(res2.pvalue), p_worse)


def perm_p_min(base: np.ndarray, var: np.ndarray, n_resamples: int = N_PERMUTATIONS) -> float:
    """Smallest one-sided p a sign-flip permutation test can give: only nonzero differences flip."""
    nz = int(np.count_nonzero(var - base))
    if nz == 0:
        return 1.0
    return max(0.5**nz, 1.0 / (n_resamples + 1)) if nz > math.log2(n_resamples) else 0.5**nz


def paired_test(
    base: np.ndarray, var: np.ndarray, *, pass_fail: bool, higher_is_better: bool, flips: tuple[int, int] = (0, 0), seed: int = 0
) -> tuple[float, float, float]:
    """(two-sided p, one-sided p of "the variant is worse", smallest p_worse this test could reach).

    `base` and `var` are the per-case values, paired by position; `flips` is (pass->fail, fail->pass)
    for a pass/fail metric. 0/1 pass/fail values get the exact McNemar and binomial tests (p_min
    conditional on the discordant cases); anything else the paired permutation test.
    """
    if pass_fail and bool(np.all(np.isin(base, (0.0, 1.0))) and np.all(np.isin(var, (0.0, 1.0)))):
        p2f, f2p = flips
        both = int(np.sum((base >= 0.5) & (var >= 0.5)))
        neither = int(np.sum((base < 0.5) & (var < 0.5)))
        return mcnemar_p([[both, p2f], [f2p, neither]]), binom_worse_p(p2f, f2p), 0.5 ** (p2f + f2p)
    p_two, p_worse = permutation_p(base, var, True if pass_fail else higher_is_better, seed)
    return p_two, p_worse, perm_p_min(base, var)


# ---------------------------------------------------------------------------------------------
# multiple testing


def tarone_k(p_min: Sequence[float], alpha: float) -> int:
    """Tarone's K: the smallest K such that at most K tests can reach p <= alpha/K at all.

    A discrete test that cannot reach a small p (an exact McNemar test with 2 discordant cases can
    never go below 0.25) cannot cause a false alarm, so it need not use up the error budget
    (Tarone 1990, Biometrics 46:515). With every test able to reach 0, K is the family size.
    """
    m = len(p_min)
    for k in range(1, m + 1):
        if sum(1 for p in p_min if p <= alpha / k) <= k:
            return k
    return max(m, 1)


def adjust_pvalues(pvals: Sequence[float], p_min: Sequence[float], method: str, alpha: float) -> list[float]:
    """Family-wise adjusted p-values: tarone (modified Bonferroni), holm, bonferroni (statsmodels) or none."""
    if not pvals or method == "none":
        return list(pvals)
    if method == "tarone":
        k = tarone_k(p_min, alpha)
        return [min(1.0, p * k) if pm <= alpha / k else 1.0 for p, pm in zip(pvals, p_min)]
    from statsmodels.stats.multitest import multipletests

    return [float(x) for x in multipletests(list(pvals), method=method)[1]]
