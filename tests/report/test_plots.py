"""The report's figures: embedded PNGs, and nothing drawn when there is nothing to draw."""

from __future__ import annotations

import base64

from evalsuite.report.plots import deltas_png, tradeoff_png


def _png_bytes(uri: str) -> bytes:
    assert uri.startswith("data:image/png;base64,")
    return base64.b64decode(uri.split(",", 1)[1])


def _row(variant, scenario, metric, delta, status="ok", pass_fail=True):
    return {"variant": variant, "scenario": scenario, "metric": metric, "delta": delta, "ci_low": delta - 0.1, "ci_high": delta + 0.05,
            "pass_fail": pass_fail, "n": 20, "noise_run": False, "status": status}


def test_tradeoff_plot():
    pts = [{"variant": "a", "status": "fail", "quality": -0.1, "worst": -0.3, "speedup": 1.8, "memory_ratio": 0.5},
           {"variant": "b", "status": "pass", "quality": 0.0, "worst": 0.0, "speedup": None, "memory_ratio": None}]
    assert _png_bytes(tradeoff_png(pts)).startswith(b"\x89PNG")
    assert tradeoff_png([{"variant": "a", "quality": None}]) is None


def test_deltas_plot_only_pass_rate_metrics():
    rows = [_row("a", "kb_qa", "citations.recall", -0.2, "fail"), _row("b", "kb_qa", "citations.recall", 0.0), _row("a", "code", "code.pass", -0.1, "warn")]
    assert _png_bytes(deltas_png(rows, ["a", "b"], ["code", "kb_qa"])).startswith(b"\x89PNG")
    assert deltas_png([_row("a", "kb_qa", "similarity.chrf", -3.0, pass_fail=False)], ["a"], ["kb_qa"]) is None
