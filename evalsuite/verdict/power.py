"""Power of the gate's flip test: which regressions can a case set of n cases detect?

Model (one pass/fail metric, paired cases): a regression turns a share `r` of the cases from pass to
fail; on top, run-to-run noise flips a share `q` of the cases in *each* direction. So per case,
pass->fail has probability r + q and fail->pass q. The gate fails when the one-sided exact McNemar
p-value (binomial on the discordant cases) is below alpha / K, with K the Tarone count of metrics
that moved (1 when only the damaged metric moved; the whole block family, 8 in the shipped rubric,
when everything is noisy), and the drop (b - c) / n exceeds `max_drop`.

Power is computed exactly by summing the trinomial distribution of (pass->fail, fail->pass) counts,
not simulated. Run `python -m evalsuite.verdict.power` (or benchmarks/power_table.py) for the tables in
docs/thresholds.md.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom


def power(n: int, r: float, q: float = 0.0, alpha: float = 0.05, k: int = 1, max_drop: float = 0.02) -> float:
    """P(the gate fails) for n cases, regression share r, per-direction noise q, alpha/k."""
    p10, p01 = r + q, q
    p00 = 1.0 - p10 - p01
    if p00 < 0:
        raise ValueError("r + 2q must be at most 1")
    b = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    ok = (b + c) <= n
    rest = np.where(ok, n - b - c, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(rest + 1)
        logp = logp + np.where(b > 0, b * np.log(p10 if p10 > 0 else 1e-300), 0.0)
        logp = logp + np.where(c > 0, c * np.log(p01 if p01 > 0 else 1e-300), 0.0)
        logp = logp + np.where(rest > 0, rest * np.log(p00 if p00 > 0 else 1e-300), 0.0)
    prob = np.where(ok, np.exp(logp), 0.0)
    d = b + c
    p_one = np.where(d > 0, binom.sf(b - 1, np.maximum(d, 1), 0.5), 1.0)
    reject = ok & (p_one < alpha / k) & ((b - c) / n > max_drop)
    return float(prob[reject].sum())


def detectable(n: int, q: float = 0.0, alpha: float = 0.05, k: int = 1, target: float = 0.8, max_drop: float = 0.02, step: float = 0.005) -> float | None:
    """Smallest regression share r (on a grid of `step`) detected with probability >= target."""
    r = step
    while r + 2 * q <= 1.0:
        if power(n, r, q, alpha, k, max_drop) >= target:
            return round(r, 4)
        r += step
    return None


def min_flips(n_discordant_max: int = 40, alpha: float = 0.05, k: int = 1) -> int | None:
    """Fewest pass->fail flips (with no fail->pass) that can ever be significant at alpha / k."""
    for b in range(1, n_discordant_max + 1):
        if 0.5**b < alpha / k:
            return b
    return None


SIZES = (20, 30, 40, 75, 80, 100, 160)
NOISE = (0.0, 0.02, 0.05)


def tables(alpha: float = 0.05, sizes=SIZES, noise=NOISE, family: int = 8) -> str:
    """The markdown tables of docs/thresholds.md."""
    out = []
    out.append(f"Smallest regression (share of cases going pass->fail) detected with 80% power, alpha={alpha}, max_drop=0.02.\n")
    out.append("| cases n | " + " | ".join(f"noise q={q:.0%}, K=1" for q in noise) + f" | noise q=2%, K={family} |")
    out.append("|---:|" + "---:|" * (len(noise) + 1))
    for n in sizes:
        cells = [detectable(n, q, alpha, 1) for q in noise] + [detectable(n, 0.02, alpha, family)]
        out.append(f"| {n} | " + " | ".join("-" if x is None else f"{x:.1%}" for x in cells) + " |")
    out.append("")
    out.append(f"Power to catch a 10% regression (pass->fail on 10% of the cases), alpha={alpha}.\n")
    out.append("| cases n | " + " | ".join(f"q={q:.0%}, K=1" for q in noise) + f" | q=2%, K={family} |")
    out.append("|---:|" + "---:|" * (len(noise) + 1))
    for n in sizes:
        powers = [power(n, 0.10, q, alpha, 1) for q in noise] + [power(n, 0.10, 0.02, alpha, family)]
        out.append(f"| {n} | " + " | ".join(f"{x:.2f}" for x in powers) + " |")
    out.append("")
    out.append(
        f"Fewest pass->fail flips (none the other way) that can be significant: {min_flips(alpha=alpha, k=1)} at alpha={alpha}, "
        f"{min_flips(alpha=alpha, k=family)} at alpha/{family}."
    )
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover
    print(tables())
