"""How cost grows with context: cost points from generations, the fitted slope per 1k tokens, the
per-variant summary."""

from __future__ import annotations

import math

import pytest

from evalsuite.backends.base import Generation
from evalsuite.perf.context import context_cost, cost_points, fit_slope, variant_cost


def _gen(variant="v", case="c", tokens=1000, cost=None, batch_size=1, error=None, ttft=None):
    extra = {"cost": cost} if cost is not None else {}
    return Generation(case_id=case, variant=variant, sample=0, text="x", prompt_tokens=tokens, ttft_s=ttft, batch_size=batch_size, error=error, extra=extra)


@pytest.mark.parametrize(
    "xs, ys, per_1k, intercept, r2",
    [
        ([1000, 2000, 4000], [2.5, 3.0, 4.0], 0.5, 2.0, 1.0),  # y = 2 + 0.5 per 1k tokens
        ([2000, 7000], [100.0, 100.0], 0.0, 100.0, None),  # flat: nothing to explain
        ([1000, 1000, 3000, 3000], [1.0, 3.0, 5.0, 7.0], 2.0, 0.0, 0.8),  # scatter around the line
    ],
)
def test_fit_slope(xs, ys, per_1k, intercept, r2):
    s = fit_slope(xs, ys)
    assert s is not None
    assert math.isclose(s.per_1k, per_1k, abs_tol=1e-9) and math.isclose(s.intercept, intercept, abs_tol=1e-9)
    assert (s.r2 is None) if r2 is None else math.isclose(s.r2, r2, abs_tol=1e-9)
    assert (s.n, s.tokens_low, s.tokens_high) == (len(xs), min(xs), max(xs))
    assert math.isclose(s.at(7000), intercept + 7 * per_1k, abs_tol=1e-9)


@pytest.mark.parametrize("xs, ys", [([], []), ([2000], [1.0]), ([2000, 2000], [1.0, 2.0])])
def test_fit_slope_needs_two_distinct_lengths(xs, ys):
    assert fit_slope(xs, ys) is None


def test_cost_points_keep_one_request_calls_with_a_cost_record():
    cost = {"prefill_s": 0.4, "peak_memory_mb": 700.0, "kv_cache_bytes": 3 * 2**20}
    gens = [
        _gen(case="ok", cost=cost, ttft=0.5),
        _gen(case="no-cost"),
        _gen(case="batched", cost=cost, batch_size=4),  # a batch's figures are all its rows'
        _gen(case="failed", cost=cost, error="boom"),
    ]
    (p,) = cost_points(gens)
    assert (p.case_id, p.tokens, p.prefill_s, p.ttft_s, p.peak_memory_mb, p.kv_cache_mb) == ("ok", 1000, 0.4, 0.5, 700.0, 3.0)


def test_variant_cost_quotes_each_measure_at_7k_only_where_the_points_reach_it():
    gens = [_gen(case=f"c{t}", tokens=t, cost={"prefill_s": 0.1 * t / 1000, "peak_memory_mb": 500 + 20 * t / 1000}) for t in (2000, 4000, 7100)]
    summary = variant_cost(cost_points(gens))
    pre = summary["measures"]["prefill_s"]
    assert math.isclose(pre["per_1k"], 0.1) and math.isclose(pre["fitted_at"], 0.7) and math.isclose(pre["measured_at"], 0.71)
    assert math.isclose(summary["measures"]["peak_memory_mb"]["per_1k"], 20.0)
    assert summary["points"] == 3 and summary["tokens"] == [2000, 7100]
    assert "kv_cache_mb" not in summary["measures"]  # not reported: no measure, not a zero
    short = variant_cost(cost_points(gens[:2]))["measures"]["prefill_s"]
    assert short["per_1k"] is not None and short["fitted_at"] is None and short["measured_at"] is None  # no extrapolation to 7k


def test_context_cost_per_variant():
    gens = [_gen(variant=v, case=f"{v}{t}", tokens=t, cost={"peak_memory_mb": base + k * t / 1000}) for v, base, k in (("a", 500, 10), ("b", 300, 2)) for t in (1000, 3000)]
    gens.append(_gen(variant="remote", case="r"))  # a backend that measures nothing
    out = context_cost(gens)
    assert list(out) == ["a", "b"]
    assert math.isclose(out["a"]["measures"]["peak_memory_mb"]["per_1k"], 10.0) and math.isclose(out["b"]["measures"]["peak_memory_mb"]["per_1k"], 2.0)
