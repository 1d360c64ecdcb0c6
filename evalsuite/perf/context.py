"""How a variant's cost grows with its context length.

Each generation of a backend that measures it carries `extra["cost"]` (the transformers backend:
evalsuite.backends.transformers_cost): prefill time, peak memory and KV-cache bytes of its call,
beside its prompt tokens and time to first token. Here they become points (prompt tokens, figure)
per variant, and each measure gets a least-squares line whose slope is its growth per 1,000 tokens.

Only generations made one request at a time are points: a batch's figures belong to all its rows
at once (padded to its longest prompt), not to one context length. Cached generations keep the
figures of the call that made them, so a resumed or warm run draws the same curve.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backends.base import Generation

#: measure -> its label (a unit included) in reports
MEASURES = {"prefill_s": "prefill time (s)", "ttft_s": "time to first token (s)", "peak_memory_mb": "peak memory (MB)", "kv_cache_mb": "KV cache (MB)"}
#: the context length the summary quotes each measure at (the long cases' largest size)
AT_TOKENS = 7000
#: measured points within this share of AT_TOKENS count as "measured at" it
AT_BAND = 0.15


@dataclass(frozen=True, kw_only=True)
class CostPoint:
    """One generation's cost against its context length."""

    variant: str
    case_id: str
    sample: int
    tokens: int  #: prompt tokens (context documents and chat template included)
    prefill_s: float | None = None  #: the model's first forward pass over the prompt
    ttft_s: float | None = None  #: time to first token
    peak_memory_mb: float | None = None  #: weights plus the call's own peak working set
    kv_cache_mb: float | None = None  #: what the KV cache holds at the end of the call

    def value(self, measure: str) -> float | None:
        return getattr(self, measure)


@dataclass(frozen=True, kw_only=True)
class Slope:
    """A least-squares line of a measure against prompt tokens."""

    per_1k: float  #: growth per 1,000 prompt tokens (the measure's unit)
    intercept: float  #: the line at 0 tokens
    n: int  #: points fitted
    r2: float | None  #: share of the variance the line explains (None when the figures do not vary)
    tokens_low: int  #: the fitted range of prompt tokens
    tokens_high: int

    def at(self, tokens: float) -> float:
        """The line's value at `tokens` prompt tokens."""
        return self.intercept + self.per_1k * tokens / 1000.0

    def to_dict(self) -> dict:
        return asdict(self)


def cost_points(generations: Iterable[Generation]) -> list[CostPoint]:
    """The cost points of successful generations that carry a cost record and ran one at a time."""
    points = []
    for g in generations:
        cost = (g.extra or {}).get("cost")
        if not g.ok or not isinstance(cost, Mapping) or g.prompt_tokens is None or (g.batch_size or 1) != 1:
            continue
        kv = cost.get("kv_cache_bytes")
        points.append(
            CostPoint(
                variant=g.variant,
                case_id=g.case_id,
                sample=g.sample,
                tokens=int(g.prompt_tokens),
                prefill_s=cost.get("prefill_s"),
                ttft_s=g.ttft_s,
                peak_memory_mb=cost.get("peak_memory_mb"),
                kv_cache_mb=kv / 2**20 if kv is not None else None,
            )
        )
    return points


def fit_slope(xs: list[float], ys: list[float]) -> Slope | None:
    """The least-squares line of ys on xs (tokens); None with fewer than two distinct xs."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len({x for x, _ in pairs}) < 2:
        return None
    n = len(pairs)
    mx = sum(x for x, _ in pairs) / n
    my = sum(y for _, y in pairs) / n
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    b = sxy / sxx
    r2 = (sxy * sxy) / (sxx * syy) if syy > 0 else None
    return Slope(per_1k=b * 1000.0, intercept=my - b * mx, n=n, r2=r2, tokens_low=int(min(x for x, _ in pairs)), tokens_high=int(max(x for x, _ in pairs)))


def variant_cost(points: list[CostPoint], at_tokens: int = AT_TOKENS) -> dict:
    """One variant's curve summary: per measure its slope (growth per 1k tokens), the line's value at
    `at_tokens` when the points reach that far, and the median measured near it."""
    out: dict[str, Any] = {"points": len(points), "tokens": [min(p.tokens for p in points), max(p.tokens for p in points)] if points else None}
    measures: dict[str, dict] = {}
    for m in MEASURES:
        mine = [(p.tokens, p.value(m)) for p in points if p.value(m) is not None]
        if not mine:
            continue
        slope = fit_slope([float(t) for t, _ in mine], [float(v or 0.0) for _, v in mine])
        near = [float(v or 0.0) for t, v in mine if abs(t - at_tokens) <= AT_BAND * at_tokens]
        reaches = max(t for t, _ in mine) >= (1 - AT_BAND) * at_tokens
        measures[m] = {
            "slope": slope.to_dict() if slope else None,
            "per_1k": slope.per_1k if slope else None,
            "fitted_at": slope.at(at_tokens) if slope and reaches else None,
            "measured_at": statistics.median(near) if near else None,
        }
    out["measures"] = measures
    out["at_tokens"] = at_tokens
    return out


def context_cost(generations: Iterable[Generation], at_tokens: int = AT_TOKENS) -> dict[str, dict]:
    """Per variant (in first-seen order), its curve summary (`variant_cost`); variants without
    cost points are left out."""
    by: dict[str, list[CostPoint]] = {}
    for p in cost_points(generations):
        by.setdefault(p.variant, []).append(p)
    return {v: variant_cost(ps, at_tokens) for v, ps in by.items()}
