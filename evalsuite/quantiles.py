"""The one percentile function, and which definition each figure name uses.

Two definitions are in use, each named where its figure is written and shown in the report:

- `NEAREST_RANK`: the smallest value with at least q% of the values at or below it (an observed
  value: a latency some request really had). The run's per-variant `latency_p95_s`, in
  `variants.json` and in interleaved timing's blocks alike.
- `INTERPOLATED`: linear interpolation between ranks (numpy's default), for the load windows'
  p50/p95/p99 of TTFT, inter-token and end-to-end latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["FIGURE_DEFINITIONS", "INTERPOLATED", "NEAREST_RANK", "Method", "definition_words", "percentile", "percentiles"]

Method = Literal["interpolated", "nearest_rank"]
INTERPOLATED: Method = "interpolated"
NEAREST_RANK: Method = "nearest_rank"

#: the definition behind each percentile figure a run stores (the report says which)
FIGURE_DEFINITIONS: dict[str, Method] = {"latency_p95_s": NEAREST_RANK, "load p50/p95/p99": INTERPOLATED}
WORDS: dict[Method, str] = {
    NEAREST_RANK: "nearest rank (an observed value: the smallest with at least q% at or below it)",
    INTERPOLATED: "interpolated linearly between ranks (numpy's default)",
}


def definition_words(figure: str) -> str:
    """How a stored percentile figure is defined, in words (for the report)."""
    return WORDS[FIGURE_DEFINITIONS[figure]]


def percentile(values: Sequence[float], q: float, method: Method = INTERPOLATED) -> float | None:
    """The q-th percentile (0..100) of `values` by `method`; None when there are none."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q!r}")
    xs = sorted(values)
    if not xs:
        return None
    if method == NEAREST_RANK:
        return xs[max(0, min(len(xs) - 1, math.ceil(q / 100 * len(xs)) - 1))]
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def percentiles(values: Sequence[float], method: Method = INTERPOLATED) -> dict[str, float | None]:
    """p50, p95 and p99 of `values`."""
    return {f"p{q}": percentile(values, q, method) for q in (50, 95, 99)}
