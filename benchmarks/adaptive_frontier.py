"""What *any* adaptive gate could do on the benchmark's data: the bounds the adaptive figures are read against.

Two bounds, both for the pass side (passing a check early is where an adaptive gate saves cases on
a good variant, and where it can miss a regression):

1. **Indistinguishable prefixes** (no noise). Without run-to-run noise, a variant whose K damaged
   cases of a check's N all lie after the n cases read so far shows exactly what an unchanged
   variant shows. A procedure that passes the unchanged variant after n cases therefore misses
   that regression with probability at least C(N - K, n) / C(N, n) (`prefix_miss`), whatever its
   statistics. `share_for_miss` inverts it: the share of a check's cases that must be read before
   a pass for the miss rate to stay at or below a target, and `prefix_floor` unites those prefixes
   over a suite's checks: the fewest cases any gate with that miss rate can generate.

2. **An oracle pass side** (with noise). The sequential probability ratio test between two simple
   hypotheses that know the noise rate q exactly: H1 "unchanged" (each side's outcome flips with
   probability q) against H0 "K = ceil(N tau) of the N cases are damaged (the variant fails them),
   the rest unchanged", the damaged cases a uniform random K-subset, the order random
   (`oracle_log_lr`). Any pass side that keeps its error "passes a drop of tau early" at or below
   alpha for every distribution in the composite null also keeps it for this one, and among the
   tests with that error the SPRT needs the fewest cases on average under H1 (Wald & Wolfowitz 1948,
   "Optimum character of the sequential probability ratio test", Ann. Math. Stat. 19(3)). Putting
   it in place of evalsuite's pass side (`patched`, benchmark only) gives, for this suite's checks
   and rules, about the fewest cases any valid adaptive gate could generate for an unchanged variant.

Only pass/fail checks (d in {-1, 0, 1}) get the oracle; continuous metrics keep evalsuite's e-process.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from scipy.special import gammaln

from evalsuite.adaptive import sequential as sq
from evalsuite.adaptive import checks as vd


def _log_comb(n, k):
    n, k = np.asarray(n, dtype=float), np.asarray(k, dtype=float)
    ok = (k >= 0) & (k <= n)
    out = gammaln(n + 1) - gammaln(np.where(ok, k, 0) + 1) - gammaln(np.where(ok, n - k, 0) + 1)
    return np.where(ok, out, -np.inf)


def prefix_miss(population: int, damaged: int, read: int) -> float:
    """P(none of `damaged` random cases among the first `read` of `population`) = C(N-K, n) / C(N, n)."""
    return float(np.exp(_log_comb(population - damaged, read) - _log_comb(population, read)))


def share_for_miss(population: int, damaged: int, miss: float) -> float:
    """The smallest share of the population to read before a pass so that `prefix_miss` <= `miss`."""
    for n in range(population + 1):
        if prefix_miss(population, damaged, n) <= miss:
            return n / population
    return 1.0


def prefix_floor(checks, order, miss: float, drop: float = 0.10) -> float:
    """The share of `order` that any gate must generate on an unchanged variant (no noise) to miss a
    planted drop of `drop` in any one check with probability at most `miss`: each sequential check's
    first N * share_for_miss(N, ceil(N drop), miss) cases, united over the checks. (Exact rules are
    left out, so this is a floor, not an estimate.)"""
    need: set = set()
    for ch in checks:
        if ch.sequential:
            n_pop = len(ch.population)
            need.update(ch.population[: math.ceil(share_for_miss(n_pop, math.ceil(n_pop * drop - 1e-9), miss) * n_pop - 1e-9)])
    return len(need) / len(order)


def oracle_log_lr(d: np.ndarray, population: int, tau: float, q: float) -> np.ndarray:
    """log of L(prefix | unchanged) / L(prefix | K damaged) after each case, d in {-1, 0, 1}.

    Per undamaged case d = +1 and d = -1 each have probability a = q (1 - q), d = 0 has c = 1 - 2a;
    a damaged case fails on the variant, so d = +1 with probability 1 - q (the baseline passed) and
    d = 0 with probability q. Given j damaged among the t cases seen (hypergeometric), every
    j-subset of the t positions is equally likely; a subset of i '+' and j - i '0' positions
    changes the unchanged likelihood by (1 / q)^i (q / c)^(j - i)."""
    d = np.asarray(d, dtype=float)
    t = np.arange(1, d.size + 1)
    npos, nneg = np.cumsum(d > 0), np.cumsum(d < 0)
    nzero = t - npos - nneg
    k = int(math.ceil(population * tau - 1e-9))
    if q <= 0.0:  # no noise: any flip is impossible when unchanged; a clean prefix is 1 / P(no damaged case in it)
        clean = (npos == 0) & (nneg == 0)
        return np.where(clean, _log_comb(population, t) - _log_comb(population - k, t), -np.inf)
    c = 1.0 - 2.0 * q * (1.0 - q)
    terms = []
    with np.errstate(invalid="ignore"):  # impossible (-inf) terms
        terms += _oracle_terms(k, t, population, npos, nzero, q, c)
    stacked = np.stack(terms)
    return -sq.logsumexp(np.where(np.isnan(stacked), -np.inf, stacked), axis=0)


def _oracle_terms(k, t, population, npos, nzero, q, c):
    terms = []
    for j in range(0, k + 1):
        log_h = _log_comb(k, j) + _log_comb(population - k, t - j) - _log_comb(population, t) - _log_comb(t, j)
        for i in range(0, j + 1):
            terms.append(log_h + _log_comb(npos, i) + _log_comb(nzero, j - i) - i * math.log(q) + (j - i) * math.log(q / c))
    return terms


@contextlib.contextmanager
def patched(q: float | str | None, pass_max_seen: float | None = None):
    """Inside: evalsuite's pass side is the oracle SPRT for noise rate q (pass/fail checks; None:
    evalsuite's own; "free": every sequential check may pass at its first case, which leaves the
    cost of the rest: exact rules, the fail side, final looks), and the 'drop seen so far' condition
    on early passes is at most pass_max_seen of tau (None: evalsuite's PASS_MAX_SEEN)."""
    original, seen = sq.no_large_drop_log_e, vd.PASS_MAX_SEEN

    def oracle(d, population, tau, dmax_rest=None):
        if q == "free":
            return np.full(np.size(d), np.inf)
        base = original(d, population, tau, dmax_rest)
        d = np.asarray(d, dtype=float)
        if d.size == 0 or not np.all(np.isin(d, (-1.0, 0.0, 1.0))):
            return base
        return np.where(np.isinf(base) & (base > 0), np.inf, oracle_log_lr(d, population, tau, q))

    if q is not None:
        sq.no_large_drop_log_e = oracle
    if pass_max_seen is not None:
        vd.PASS_MAX_SEEN = pass_max_seen
    try:
        yield
    finally:
        sq.no_large_drop_log_e, vd.PASS_MAX_SEEN = original, seen
