"""Paired ratio statistics on interleaved timing blocks.

A speed ratio is multiplicative, so it is averaged on the log scale: for each round i the log of
(variant figure / baseline figure), then the mean of those logs with a Student t interval, and the
exponential of both back. The geometric-mean ratio is symmetric (A vs B is exactly 1/(B vs A)) and
one slow block moves it far less than it moves an arithmetic mean of ratios.

On a shared machine a round now and then catches another job's burst. From 5 rounds on, the centre
is the 20% trimmed mean of the log ratios with the Tukey-McLaughlin interval (scipy.stats.mstats:
winsorized variance, t with n - 2g - 1 degrees of freedom), so one or two wild rounds neither drag
the ratio nor blow the interval up; with fewer rounds it is the plain mean with a Student t interval.
A spike that still widens the interval can only turn a verdict into "cannot judge", never into a
false failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from ..errors import EvalsuiteError

DEFAULT_LEVEL = 0.95
TRIM = 0.2  #: share trimmed from each end of the log ratios (Tukey-McLaughlin trimmed-mean interval)
TRIM_FROM = 5  #: rounds from which trimming drops at least one round per end (fewer: the plain t interval)


@dataclass(frozen=True)
class RatioCI:
    """A paired ratio (variant / baseline, geometric mean over rounds) with its confidence interval."""

    ratio: float
    low: float  #: lower bound of the interval (0.0 when n < 2: nothing is known)
    high: float  #: upper bound (inf when n < 2)
    n: int  #: paired rounds
    level: float = DEFAULT_LEVEL

    @property
    def width(self) -> float:
        """How many times larger the upper bound is than the lower (1.0: a point)."""
        return self.high / self.low if self.low > 0 else math.inf

    def to_dict(self) -> dict:
        d = asdict(self)
        d["high"] = None if math.isinf(self.high) else self.high
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RatioCI:
        return cls(
            float(d["ratio"]), float(d["low"]), math.inf if d.get("high") is None else float(d["high"]), int(d["n"]), float(d.get("level", DEFAULT_LEVEL))
        )

    def text(self) -> str:
        hi = "inf" if math.isinf(self.high) else f"{self.high:.2f}"
        return f"x{self.ratio:.2f} [{self.low:.2f}, {hi}] ({int(round(100 * self.level))}% CI, {self.n} rounds)"


def paired_ratio(baseline: Sequence[float], variant: Sequence[float], level: float = DEFAULT_LEVEL) -> RatioCI:
    """The ratio variant/baseline of paired positive figures (one pair per round), with an interval
    on the (trimmed) mean log ratio. Pairs with a non-positive or missing figure are dropped."""
    if len(baseline) != len(variant):
        raise EvalsuiteError(f"paired ratio needs as many baseline figures as variant figures ({len(baseline)} vs {len(variant)})")
    if not 0 < level < 1:
        raise EvalsuiteError(f"confidence level must be between 0 and 1, got {level!r}")
    logs = [math.log(v / b) for b, v in zip(baseline, variant) if b is not None and v is not None and b > 0 and v > 0]
    n = len(logs)
    if n == 0:
        return RatioCI(math.nan, 0.0, math.inf, 0, level)
    mean = sum(logs) / n
    if n < 2:
        return RatioCI(math.exp(mean), 0.0, math.inf, n, level)
    if n < TRIM_FROM:
        from scipy import stats

        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
        return RatioCI(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, level)
    import numpy as np
    from scipy.stats import mstats

    x = np.asarray(logs)
    if np.ptp(x) == 0:  # every round gave the same ratio (the trimmed standard error would divide by 0)
        return RatioCI(math.exp(mean), math.exp(mean), math.exp(mean), n, level)
    limits = (TRIM, TRIM)
    centre = float(mstats.trimmed_mean(x, limits=limits))
    low, high = (float(b) for b in mstats.trimmed_mean_ci(x, limits=limits, alpha=1 - level))
    return RatioCI(math.exp(centre), math.exp(low), math.exp(high), n, level)


def paired_figures(doc: Mapping, variant: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per-round (baseline, variant) figures of a timing document: block wall time, p95 latency,
    tokens/s. Rounds where either block had an error are left out."""
    base = doc["baseline"]
    by: dict[tuple[int, str], dict] = {(b["round"], b["variant"]): b for b in doc.get("blocks", [])}
    rounds = sorted({r for r, _ in by})
    out: dict[str, tuple[list[float], list[float]]] = {"wall_s": ([], []), "latency_p95_s": ([], []), "tokens_per_s": ([], [])}
    for r in rounds:
        b, v = by.get((r, base)), by.get((r, variant))
        if b is None or v is None or b.get("errors") or v.get("errors"):
            continue
        for key in ("wall_s", "latency_p95_s"):
            if b.get(key) and v.get(key):
                out[key][0].append(float(b[key]))
                out[key][1].append(float(v[key]))
        if b.get("new_tokens") and v.get("new_tokens") and b["wall_s"] > 0 and v["wall_s"] > 0:
            out["tokens_per_s"][0].append(b["new_tokens"] / b["wall_s"])
            out["tokens_per_s"][1].append(v["new_tokens"] / v["wall_s"])
    return out
