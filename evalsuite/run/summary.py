"""A variant's performance figures from its stored generations (variants.json, and an imported run's)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..backends.base import Generation
from ..quantiles import FIGURE_DEFINITIONS, percentile


def summarize_generations(gens: Sequence[Generation]) -> dict:
    """Per-variant performance figures from stored generations (fresh ones only for timings)."""
    fresh = [g for g in gens if g.ok and not g.cached and g.latency_s is not None]
    lat = sorted(g.latency_s for g in fresh if g.latency_s is not None)
    ttft = sorted(g.ttft_s for g in fresh if g.ttft_s is not None)
    tps = [g.tokens_per_s for g in fresh if g.tokens_per_s]

    total_tokens = sum(g.new_tokens or 0 for g in fresh)
    return {
        "generations": len(gens),
        "errors": sum(1 for g in gens if not g.ok and not g.timeout),
        "timeouts": sum(1 for g in gens if g.timeout),
        "cached": sum(1 for g in gens if g.cached),
        "latency_median_s": statistics.median(lat) if lat else None,
        "latency_p95_s": percentile(lat, 95, FIGURE_DEFINITIONS["latency_p95_s"]),
        "ttft_median_s": statistics.median(ttft) if ttft else None,
        "tokens_per_s_median": statistics.median(tps) if tps else None,
        "new_tokens": total_tokens,
    }
