"""vLLM's own metrics (its Prometheus series), read twice and summarised as what happened in between.

Both ways vLLM runs report the same series: the OpenAI server on `/metrics` (Prometheus text,
`parse_metrics`), the offline engine through `LLM.get_metrics()` (the worker flattens it to the
same sample names). `metrics_delta(before, after)` turns two readings into a summary: requests
finished, mean TTFT and queue time (from the histograms' sums and counts), prefix-cache queries,
hits and hit rate, preemptions, and speculative decoding's drafted and accepted tokens with the
acceptance rate. A series the engine does not expose is left out of the summary (the report says
"not exposed"); a figure with nothing to divide by is None.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

from .wire import prometheus_samples

#: Prometheus series read: our name -> vLLM's sample name (summed over its labels)
SERIES = {
    "requests": "vllm:request_success_total",
    "ttft_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
    "queue_sum": "vllm:request_queue_time_seconds_sum",
    "queue_count": "vllm:request_queue_time_seconds_count",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "preemptions": "vllm:num_preemptions_total",
    "spec_drafts": "vllm:spec_decode_num_drafts_total",
    "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}
#: the summary's figures, in the order the report shows them, with their labels
FIGURES = {
    "requests": "requests",
    "ttft_mean_s": "mean TTFT s",
    "queue_time_mean_s": "mean queue s",
    "prefix_cache_hit_rate": "prefix-cache hit rate",
    "prefix_cache_hits": "prefix-cache hits",
    "prefix_cache_queries": "prefix-cache queries",
    "preemptions": "preemptions",
    "spec_acceptance_rate": "spec acceptance",
    "spec_accepted_tokens": "spec accepted tokens",
    "spec_draft_tokens": "spec drafted tokens",
}
#: a series the engine or server does not expose: the report's cell, and load's queue wait (evalsuite.run.load_records)
NOT_EXPOSED = "not exposed"


def parse_metrics(text: str) -> dict[str, float]:
    """The `SERIES` from Prometheus text (each summed over its label sets; absent ones left out)."""
    return from_samples(prometheus_samples(text))


def from_samples(samples: Iterable[Sequence[str | float]]) -> dict[str, float]:
    """The `SERIES` from (sample name, value) pairs, summed per name (the worker's flattened metrics)."""
    wanted = {v: k for k, v in SERIES.items()}
    out: dict[str, float] = {}
    for name, value in samples:  # (sample name, value): a parsed page's pairs, the worker's [name, value] lists
        if name in wanted:
            with contextlib.suppress(TypeError, ValueError):
                out[wanted[name]] = out.get(wanted[name], 0.0) + float(value)
    return out


def metrics_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float | int | None] | None:
    """What happened between two readings (None when either is missing); figures of series the
    engine does not expose are left out."""
    if before is None or after is None:
        return None
    d = {k: after[k] - before.get(k, 0.0) for k in SERIES if k in after}

    def mean(total: str, count: str) -> float | None:
        return round(d[total] / d[count], 6) if d.get(count) else None

    def ratio(part: str, whole: str) -> float | None:
        return round(d[part] / d[whole], 6) if d.get(whole) else None

    out: dict[str, float | int | None] = {}
    if "requests" in d:
        out["requests"] = int(d["requests"])
    if "ttft_count" in d:
        out["ttft_mean_s"] = mean("ttft_sum", "ttft_count")
    if "queue_count" in d:
        out["queue_time_mean_s"] = mean("queue_sum", "queue_count")
    if "prefix_cache_queries" in d:
        out |= {"prefix_cache_queries": int(d["prefix_cache_queries"]), "prefix_cache_hits": int(d.get("prefix_cache_hits", 0))}
        out["prefix_cache_hit_rate"] = ratio("prefix_cache_hits", "prefix_cache_queries")
    if "preemptions" in d:
        out["preemptions"] = int(d["preemptions"])
    if "spec_draft_tokens" in d:
        out |= {"spec_draft_tokens": int(d["spec_draft_tokens"]), "spec_accepted_tokens": int(d.get("spec_accepted_tokens", 0))}
        out["spec_acceptance_rate"] = ratio("spec_accepted_tokens", "spec_draft_tokens")
    return out


__all__ = ["FIGURES", "NOT_EXPOSED", "SERIES", "from_samples", "metrics_delta", "parse_metrics"]
