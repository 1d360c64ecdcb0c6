"""Anytime-valid tests on paired per-case differences: valid at every look, not only at the end.

Per case i a check sees d_i in [-1, 1]: how much worse the variant is than the baseline on that
case (1 = pass->fail, -1 = fail->pass, 0 = no change; a share or metric difference when a case has
several samples or a continuous metric). Two one-sided questions are asked of the sequence, each
with its own e-process (a nonnegative process whose expectation under its null is at most 1, so by
Ville's inequality it ever reaches 1/alpha with probability at most alpha, however often one looks):

**Regression** (fail side), null "no regression": given the past, E[d_i] <= 0. Under an unchanged
variant the baseline and variant outputs of a case are exchangeable, so each discordant pair is a
fair coin. The e-process is a mixture of betting martingales prod_i (1 + lam * d_i) over a uniform
grid of constant bets lam in (0, 1) (Waudby-Smith & Ramdas 2023, "Estimating means of bounded
random variables by betting", JRSS-B 86(1), sec. 5.7 mixtures; for 0/1 flips it is the one-sided
mixture SPRT of Robbins 1970 with a uniform prior on P(pass->fail | discordant) in [1/2, 1), whose
closed form `beta_mixture_e` is the check; the two-sided form of the same closed form is checked
against the `savvi` library's Dirichlet-multinomial test in the tests).

**No large regression over the case set** (pass side), null "the drop over all N cases of the case
set is at least tau". The cases are drawn without replacement in a uniformly random order, so the
mean of the cases still to come is known under the null: mu_i = (N tau - S_{i-1}) / (N - i + 1).
prod_i (1 + lam_i (mu_i - d_i)) is then a martingale (Waudby-Smith & Ramdas 2020, "Confidence
sequences for sampling without replacement", NeurIPS 33, sec. 3). The bound tightens as the case
set runs out and is exact at the last case; when the null becomes impossible (the remaining cases
could not bring the drop up to tau, given each case's baseline value) the pass is certain.

Everything here is a pure function of arrays: the driver, the gate, the demo replay and the
benchmark all call the same code on the same sequences.
"""

from __future__ import annotations

import math
import numpy as np
from scipy.special import betaln, betainc

#: number of constant bets in the mixtures (uniform grid of midpoints in (0, 1))
GRID = 20


def logsumexp(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """log(sum(exp(x))) along an axis (finite inputs; scipy's is slow on small arrays)."""
    m = np.max(x, axis=axis)
    return m + np.log(np.sum(np.exp(x - np.expand_dims(m, axis)), axis=axis))


def _grid(g: int = GRID) -> np.ndarray:
    return (np.arange(g) + 0.5) / g


def regression_log_e(d: np.ndarray, grid: int = GRID) -> np.ndarray:
    """log e-value after each case of the mixture e-process against "no regression" (E[d] <= 0).

    `d` in [-1, 1] (clipped). Returns an array of len(d): entry i is the log e-value after cases 0..i.
    """
    d = np.clip(np.asarray(d, dtype=float), -1.0, 1.0)
    if d.size == 0:
        return np.zeros(0)
    lam = _grid(grid)[:, None]
    logw = np.cumsum(np.log1p(lam * d[None, :]), axis=1)  # (grid, n)
    return logsumexp(logw, axis=0) - math.log(grid)


def no_large_drop_log_e(d: np.ndarray, population: int, tau: float, dmax_rest: np.ndarray | None = None, grid: int = GRID) -> np.ndarray:
    """log e-value after each case of the without-replacement e-process against "the mean of d over
    all `population` cases is >= tau"; +inf once that null is impossible.

    `dmax_rest[i]`: the largest sum of d the cases after i could still add (from the baseline
    values: a case that fails on the baseline cannot go pass->fail); default: one per remaining case.
    """
    d = np.clip(np.asarray(d, dtype=float), -1.0, 1.0)
    n, big_n = d.size, int(population)
    if n == 0:
        return np.zeros(0)
    if n > big_n:
        raise ValueError(f"{n} observations from a population of {big_n}")
    c = _grid(grid)[:, None]
    s_prev = np.concatenate([[0.0], np.cumsum(d)[:-1]])
    remaining = big_n - np.arange(n)  # cases not yet seen, the current one included
    mu = (big_n * tau - s_prev) / remaining  # null mean of the current case given the past
    live = (mu < 1.0) & (mu > -1.0)
    # bet lam = c / (1 - mu) keeps every factor >= 1 - c > 0 for d <= 1; no bet where mu is outside (-1, 1)
    lam = np.where(live, c / np.where(live, 1.0 - mu, 1.0), 0.0)
    logw = np.cumsum(np.log1p(lam * (mu - d)[None, :]), axis=1)
    out = logsumexp(logw, axis=0) - math.log(grid)
    # certainty: the drop over the whole population cannot reach tau any more
    s = np.cumsum(d)
    rest = (big_n - np.arange(1, n + 1)).astype(float) if dmax_rest is None else np.asarray(dmax_rest, dtype=float)
    impossible = (s + rest) < big_n * tau - 1e-9
    if impossible.any():
        first = int(np.argmax(impossible))
        out[first:] = np.inf
    return out


def beta_mixture_e(b: int, c: int, a: float = 1.0, one_sided: bool = True) -> float:
    """Closed-form e-value of a Beta(a, a)-mixture SPRT for "discordant pairs are fair coins", after
    b pass->fail and c fail->pass flips (Robbins 1970). One-sided: the prior is restricted to
    P(pass->fail) >= 1/2 (renormalised); two-sided: the whole Beta(a, a) (as in savvi's Multinomial)."""
    n = b + c
    log_two_sided = betaln(a + b, a + c) - betaln(a, a) + n * math.log(2.0)
    if not one_sided:
        return math.exp(log_two_sided)
    # mass of the posterior-shaped integrand above 1/2, over the prior mass above 1/2 (= 1/2)
    upper = 1.0 - betainc(a + b, a + c, 0.5)
    return math.exp(log_two_sided) * upper / 0.5


def first_crossing(log_e: np.ndarray, alpha: float, also: np.ndarray | None = None) -> int | None:
    """Index of the first case after which the e-process has reached 1/alpha (at that case or
    before: Ville's inequality covers the running maximum) and `also` holds; None if never."""
    if log_e.size == 0:
        return None
    crossed = np.maximum.accumulate(log_e) >= math.log(1.0 / alpha) - 1e-12
    if also is not None:
        crossed = crossed & also
    return int(np.argmax(crossed)) if crossed.any() else None


def lower_bound(d: np.ndarray, alpha: float, grid: int = GRID, tol: float = 1e-3) -> float:
    """Lower end of the (1 - alpha) confidence sequence of E[d] after all of `d` (running intersection
    not taken: the value at the last case), by bisection on the shifted regression e-process."""
    d = np.clip(np.asarray(d, dtype=float), -1.0, 1.0)
    if d.size == 0:
        return -1.0
    lam0 = _grid(grid)[:, None]

    def rejects(m: float) -> bool:  # null E[d] <= m, bets lam/(1+m) keep factors positive
        lam = lam0 / (1.0 + m)
        logw = np.cumsum(np.log1p(lam * (d[None, :] - m)), axis=1)
        return bool(np.max(logsumexp(logw, axis=0) - math.log(grid)) >= math.log(1 / alpha))

    lo, hi = -1.0, 1.0
    if not rejects(lo + 1e-9):
        return -1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo


def upper_bound(d: np.ndarray, population: int, alpha: float, dmax_rest: np.ndarray | None = None, tol: float = 1e-3) -> float:
    """Upper end of the (1 - alpha) without-replacement confidence sequence of the population mean
    of d after all of `d` (by bisection on `no_large_drop_log_e`)."""
    if len(d) == 0:
        return 1.0

    def rejects(tau: float) -> bool:
        return bool(np.max(no_large_drop_log_e(d, population, tau, dmax_rest)) >= math.log(1 / alpha))

    lo, hi = -1.0, 1.0
    if not rejects(hi - 1e-9):
        return 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
    return hi
