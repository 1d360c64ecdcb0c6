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
against the `savvi` library's Dirichlet-multinomial test in the tests). The grid is kept here
because run-to-run noise puts fail->pass flips among the pass->fail ones, which a plug-in bet pays
for dearly (benchmarked: no gain on noisy 30% regressions).

**No large regression over the case set** (pass side), null "the drop over all N cases of the case
set is at least tau". The cases are drawn without replacement in a uniformly random order, so the
mean of the cases still to come is known under the null: mu_i = (N tau - S_{i-1}) / (N - i + 1).
prod_i (1 + lam_i (mu_i - d_i)) is then a martingale (Waudby-Smith & Ramdas 2020, "Confidence
sequences for sampling without replacement", NeurIPS 33, sec. 3). Its bets are the predictable
plug-in `plugin_bets` (aGRAPA): a clean variant shows one-sided data (every case at or below the
null mean), on which the plug-in bets nearly all-in within a few cases, where a mixture pays for
its spread (a clean case set of 80 is passed after 27 cases instead of 33). The bound tightens as
the case set runs out and is exact at the last case; when the null becomes impossible (the
remaining cases could not bring the drop up to tau, given each case's baseline value) the pass is
certain.

**The final look** (`joint_p`): a check whose case set is exhausted undecided is tested on all its
cases by a sign-flip test whose rejection region *includes* every path on which the regression
e-process would have crossed: p = P0(crossed, or sum of d >= observed) under the exchangeability
null, exact by enumeration when there are few discordant cases, else Monte Carlo. A check then
spends its whole alpha between the looks and the last one, without a split.

Everything here is a pure function of arrays: the driver, the gate, the demo replay and the
benchmark all call the same code on the same sequences.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betainc, betaln

#: number of constant bets in the grid mixture (uniform grid of midpoints in (0, 1))
GRID = 20
#: the plug-in bet's cap (a bet c keeps every factor >= 1 - c) and its prior second moment
PLUGIN_CAP = 0.9
PLUGIN_PRIOR = 0.25


def logsumexp(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """log(sum(exp(x))) along an axis (finite inputs; scipy's is slow on small arrays)."""
    m = np.max(x, axis=axis)
    return m + np.log(np.sum(np.exp(x - np.expand_dims(m, axis)), axis=axis))


def _grid(g: int = GRID) -> np.ndarray:
    return (np.arange(g) + 0.5) / g


def grid_log_e(y: np.ndarray, grid: int = GRID) -> np.ndarray:
    """log of the uniform mixture over constant bets c in (0, 1) of prod_i (1 + c y_i), after each
    step (last axis; leading axes are independent sequences). y >= -1."""
    c = _grid(grid).reshape((-1,) + (1,) * np.ndim(y))
    return logsumexp(np.cumsum(np.log1p(c * y[None]), axis=-1), axis=0) - math.log(grid)


def plugin_bets(y: np.ndarray, cap: float = PLUGIN_CAP, prior: float = PLUGIN_PRIOR) -> np.ndarray:
    """Predictable bets c_i = sum_{j<i} y_j / (prior + sum_{j<i} y_j^2), clipped to [0, cap]: the
    aGRAPA plug-in (Waudby-Smith & Ramdas 2023, sec. 5.3: the Kelly-optimal bet mean/second moment
    of the data seen so far), with one pseudo-observation of second moment `prior` so early bets
    are small. Zeros (concordant cases) change neither sum, so they neither bet nor move the bet."""
    y = np.asarray(y, dtype=float)
    s = np.cumsum(y, axis=-1) - y
    q = np.cumsum(y * y, axis=-1) - y * y
    return np.clip(s / (prior + q), 0.0, cap)


def plugin_log_e(y: np.ndarray, cap: float = PLUGIN_CAP) -> np.ndarray:
    """log of prod_i (1 + c_i y_i) with the plug-in bets, after each step (last axis)."""
    return np.cumsum(np.log1p(plugin_bets(y, cap) * y), axis=-1)


def regression_log_e(d: np.ndarray, grid: int = GRID) -> np.ndarray:
    """log e-value after each case of the grid-mixture e-process against "no regression" (E[d] <= 0).

    `d` in [-1, 1] (clipped); leading axes are independent sequences. Entry i of the last axis is
    the log e-value after cases 0..i.
    """
    d = np.clip(np.asarray(d, dtype=float), -1.0, 1.0)
    if d.shape[-1] == 0:
        return np.zeros(d.shape)
    return grid_log_e(d, grid)


def no_large_drop_log_e(d: np.ndarray, population: int, tau: float, dmax_rest: np.ndarray | None = None) -> np.ndarray:
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
    s_prev = np.concatenate([[0.0], np.cumsum(d)[:-1]])
    remaining = big_n - np.arange(n)  # cases not yet seen, the current one included
    mu = (big_n * tau - s_prev) / remaining  # null mean of the current case given the past
    live = (mu < 1.0) & (mu > -1.0)
    # y = (mu - d) / (1 - mu) >= -1 for d <= 1 has null mean 0; no bet where mu is outside (-1, 1)
    y = np.where(live, (mu - d) / np.where(live, 1.0 - mu, 1.0), 0.0)
    out = plugin_log_e(y)
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

    def rejects(m: float) -> bool:  # null E[d] <= m: y = (d - m) / (1 + m) >= -1
        return bool(np.max(grid_log_e((d - m) / (1.0 + m), grid)) >= math.log(1 / alpha))

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


def joint_p(d: np.ndarray, alpha_seq: float, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The final look of a check whose every case is in: (p, p_min, p_cross).

    Null: baseline and variant outputs of a case are exchangeable, so each nonzero d_i has a random
    sign. Statistic: +inf on a path on which the regression e-process ever reached 1/alpha_seq (the
    sequential fail's region, material or not), else the sum of d. p = P0(statistic >= observed);
    p_min = the smallest p any sign pattern could give (for Tarone); p_cross = P0(crossed) (the
    sequential region's own mass). Zeros neither move the e-process nor the sum, so only the nonzero
    d's are flipped: all 2^m patterns when that is at most `resamples` (exact, the observed among
    them), else `resamples` seeded patterns and the observed one ((1 + count) / (resamples + 1)).

    Rejecting when p <= level (or earlier, on crossing) has chance at most level under the null:
    the whole rejection region is {crossed} U {sum >= the critical sum}, and p measures exactly that
    region. (Monte Carlo adds at most P0(crossed) * P(Binomial(resamples, P0(crossed)) >= level *
    resamples), below 1e-6 at the default sizes since alpha_seq <= level / 2.)"""
    d = np.clip(np.asarray(d, dtype=float), -1.0, 1.0)
    nz = d[d != 0.0]
    m = nz.size
    if m == 0:
        return 1.0, 1.0, 0.0
    mag = np.abs(nz)
    if np.allclose(mag, mag[0]):
        return _joint_p_walk(int(np.sum(nz > 0)), m, float(mag[0]), alpha_seq)
    exact = m <= math.log2(max(resamples, 1))
    if exact:
        signs = 1.0 - 2.0 * ((np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(resamples, m))
    sims = signs * mag[None, :]
    crossed = np.max(regression_log_e(sims), axis=-1) >= math.log(1.0 / alpha_seq) - 1e-12
    total = sims.sum(axis=-1)
    hit = crossed | (total >= nz.sum() - 1e-9)
    top = crossed | (total >= mag.sum() - 1e-9)
    if exact:
        return float(hit.mean()), float(top.mean()), float(crossed.mean())
    r = resamples + 1
    return float((1 + hit.sum()) / r), float((1 + top.sum()) / r), float((1 + crossed.sum()) / r)


def _joint_p_walk(b_obs: int, m: int, a: float, alpha_seq: float) -> tuple[float, float, float]:
    """`joint_p` exactly when every nonzero d has the same size a (pass/fail flips: a = 1): the grid
    e-process after b positive and c negative steps depends on (b, c) only, so the null walk is
    followed by dynamic programming over (steps, b), with crossing as an absorbing state."""
    lam = _grid()[:, None, None]
    b = np.arange(m + 1)[None, :, None]
    c = np.arange(m + 1)[None, None, :]
    log_e = logsumexp(b * np.log1p(lam * a) + c * np.log1p(-lam * a), axis=0) - math.log(GRID)
    over = log_e >= math.log(1.0 / alpha_seq) - 1e-12  # over[b, c]
    alive = np.zeros(m + 1)
    alive[0] = 1.0
    crossed = 0.0
    for k in range(1, m + 1):
        nxt = np.zeros(m + 1)
        nxt[1 : k + 1] += 0.5 * alive[:k]  # a positive step
        nxt[:k] += 0.5 * alive[:k]  # a negative step
        bs = np.arange(k + 1)
        hit = over[bs, k - bs]
        crossed += float(nxt[: k + 1][hit].sum())
        nxt[: k + 1][hit] = 0.0
        alive = nxt
    return crossed + float(alive[b_obs:].sum()), crossed + float(alive[m]), crossed
