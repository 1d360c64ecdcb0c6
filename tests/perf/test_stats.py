"""Paired log-ratio statistics (evalsuite/perf/stats.py)."""

from __future__ import annotations

import math
import random

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.perf.stats import RatioCI, paired_ratio


@pytest.mark.parametrize(
    "base, var, ratio, low, high",
    [
        # constant ratio: a point interval
        ([1.0, 2.0, 4.0], [2.0, 4.0, 8.0], 2.0, 2.0, 2.0),
        # logs ln(1.1), ln(0.9), 0: mean -0.003350, sd 0.100377, t(0.975, 2)=4.302653 -> half 0.249350
        ([1.0, 1.0, 1.0], [1.1, 0.9, 1.0], 0.99666, 0.77670, 1.27890),
    ],
)
def test_paired_ratio_table(base, var, ratio, low, high):
    ci = paired_ratio(base, var)
    assert ci.ratio == pytest.approx(ratio, rel=1e-4)
    assert ci.low == pytest.approx(low, rel=1e-3)
    assert ci.high == pytest.approx(high, rel=1e-3)
    assert ci.n == len(base)


def test_ratio_is_symmetric_and_a_drift_in_both_cancels():
    """A vs B is exactly 1/(B vs A); a machine that gets 3x busier over the rounds (both sides
    alike) does not change the paired ratio."""
    rng = random.Random(3)
    base = [rng.uniform(0.9, 1.1) * (1 + 2 * i / 9) for i in range(10)]
    var = [b * 1.25 for b in base]
    ab, ba = paired_ratio(base, var), paired_ratio(var, base)
    assert ab.ratio == pytest.approx(1 / ba.ratio)
    assert ab.low == pytest.approx(1 / ba.high)
    assert ab.ratio == pytest.approx(1.25) and ab.low == pytest.approx(1.25)


def test_interval_covers_the_true_ratio_about_95_percent():
    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        base = [math.exp(rng.gauss(0, 0.2)) for _ in range(8)]
        var = [b * 1.3 * math.exp(rng.gauss(0, 0.15)) for b in base]
        ci = paired_ratio(base, var)
        covered += ci.low <= 1.3 <= ci.high
    assert 0.91 <= covered / 400 <= 0.99


def test_too_few_or_bad_pairs_give_an_unbounded_interval():
    one = paired_ratio([1.0], [2.0])
    assert (one.ratio, one.low, one.high, one.n) == (2.0, 0.0, math.inf, 1)
    none = paired_ratio([0.0, None], [1.0, 2.0])  # non-positive and missing figures are dropped
    assert none.n == 0 and math.isnan(none.ratio)
    with pytest.raises(EvalsuiteError, match="as many baseline figures"):
        paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(EvalsuiteError, match="confidence level"):
        paired_ratio([1.0, 2.0], [1.0, 2.0], level=1.5)


def test_round_trip_through_a_dict():
    ci = RatioCI(1.2, 1.1, math.inf, 1)
    assert RatioCI.from_dict(ci.to_dict()) == ci
    assert "x1.20 [1.10, inf]" in ci.text()
