"""The one percentile function, and one definition per figure name."""

from __future__ import annotations

import pytest

from evalsuite.quantiles import FIGURE_DEFINITIONS, INTERPOLATED, NEAREST_RANK, percentile
from evalsuite.run import load, timing
from evalsuite.run.runner import summarize_generations
from evalsuite.backends.base import Generation, Request


@pytest.mark.parametrize(
    "values, q, expected",
    [([], 95, None), ([3.0], 95, 3.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.0), ([1.0, 2.0, 3.0, 4.0], 95, 4.0), (list(range(1, 101)), 95, 95), (list(range(1, 21)), 95, 19)],
)
def test_nearest_rank_is_an_observed_value(values, q, expected):
    assert percentile([float(v) for v in values], q, NEAREST_RANK) == expected


def test_interpolated_is_the_default_and_the_load_windows_use_it():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == percentile([1.0, 2.0, 3.0, 4.0], 50, INTERPOLATED) == 2.5
    assert load.percentile is percentile  # one function, re-exported where load's figures are made


def test_latency_p95_s_means_the_same_in_variants_json_and_in_interleaved_timing():
    assert FIGURE_DEFINITIONS["latency_p95_s"] == NEAREST_RANK
    lat = [0.1 * i for i in range(1, 21)]
    gens = [Generation(case_id=f"c{i}", variant="v", sample=0, text="x", latency_s=x) for i, x in enumerate(lat)]

    class Timed:
        def generate(self, batch):
            return [Generation(case_id=r.case_id, variant="v", sample=0, text="x", latency_s=x) for r, x in zip(batch, lat)]

    block = timing._time_block(Timed(), [Request(f"c{i}", (("user", "hi"),)) for i in range(20)], 20)
    assert summarize_generations(gens)["latency_p95_s"] == block["latency_p95_s"] == percentile(lat, 95, NEAREST_RANK)


def test_the_report_says_which_definition_each_percentile_uses():
    from types import SimpleNamespace

    from evalsuite.report.markdown import perf_lines

    text = "\n".join(perf_lines(SimpleNamespace(models=[], perf=[], metric_rows=[])))
    assert "p95 latency: nearest rank" in text
