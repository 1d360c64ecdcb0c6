"""The engine column and vLLM's own metrics in the report, and the same engine column in `evalsuite run`'s table."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from verdict_synth import write_sets, write_suite

#: what a vLLM engine's counters showed over a variant (vllm_metrics.metrics_delta); no speculative series
_METRICS = {
    "requests": 6,
    "ttft_mean_s": 0.25,
    "queue_time_mean_s": None,
    "prefix_cache_queries": 64,
    "prefix_cache_hits": 32,
    "prefix_cache_hit_rate": 0.5,
    "preemptions": 2,
}
_RUBRIC = "schema_version: 1\nname: r\nrules:\n  - {name: reliability, max_error_rate: 0.5}\n"


@pytest.fixture(scope="module")
def metered_run(tmp_path_factory):
    """A fake-backend run whose variant `metered` reports a vLLM engine and its counters, and whose
    variant `plain` reports none; then `evalsuite run`'s table of it, as printed."""
    from evalsuite.backends.fake import FakeBackend
    from evalsuite.cases.suite import load_suite
    from evalsuite.cli import running
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    root = tmp_path_factory.mktemp("engines")
    outputs = write_sets(root, n_kb=3, n_code=1, n_brand=2)
    (root / "rubric.yaml").write_text(_RUBRIC, "utf-8")
    variants = [
        {"name": "metered", "backend": "fake", "options": {"outputs": outputs, "engine_metrics": _METRICS}},
        {"name": "plain", "backend": "fake", "options": {"outputs": outputs}},
    ]
    suite = write_suite(root, outputs, variants, rubric=str(root / "rubric.yaml"))
    mp = pytest.MonkeyPatch()
    identity = FakeBackend.engine_identity
    mp.setattr(
        FakeBackend,
        "engine_identity",
        lambda self: {"engine": "vllm", "version": "0.32.0", "device": "cpu"} if self.variant.name == "metered" else identity(self),
    )
    try:
        res = run_suite(load_suite(suite), RunOptions(progress=False))
        out = io.StringIO()
        mp.setattr(running, "console", Console(file=out, width=400))
        running.print_variant_table(res.variants, engines=running.run_engines(res.store))
    finally:
        mp.undo()
    return res.store, root / "rubric.yaml", out.getvalue()


@pytest.fixture(scope="module")
def metered_report(metered_run, tmp_path_factory):
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report

    store, rubric, _ = metered_run
    return write_report(judge_run(store, rubric, "pilot"), out_dir=tmp_path_factory.mktemp("report"))


def test_report_and_terminal_show_the_same_engine_per_variant(metered_run, metered_report):
    from evalsuite.cli.running import run_engines

    store, _, table = metered_run
    engines = run_engines(store)
    assert engines == {"baseline": "fake", "metered": "vllm 0.32.0 · cpu", "plain": "fake"}
    assert store.signature["engines"]["metered"] == {"engine": "vllm", "version": "0.32.0", "device": "cpu"}
    assert {m["name"]: m["engine"] for m in metered_report.data.models} == engines
    cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in table.replace("┃", "│").splitlines() if "│" in line]
    assert cells[0][:2] == ["variant", "engine"]
    assert {row[0]: row[1] for row in cells[1:]} == engines  # `evalsuite run`'s table: the same words
    md = metered_report.markdown.read_text("utf-8")
    assert "| `metered` | vllm 0.32.0 · cpu |" in md
    html = metered_report.html.read_text("utf-8")
    assert html.count('<td class="l engine">vllm 0.32.0 · cpu</td>') == 2  # the performance table and the variant matrix


def test_vllm_metrics_per_variant_with_not_exposed_where_absent(metered_report):
    rows = {r["variant"]: r["cells"] for r in metered_report.data.engine_metrics}
    assert list(rows) == ["metered"]  # `plain` reports no engine metrics and is no vLLM variant
    cells = rows["metered"]
    assert cells["requests"] == "6" and cells["ttft_mean_s"] == "0.250" and cells["prefix_cache_hit_rate"] == "50.0%" and cells["preemptions"] == "2"
    assert cells["queue_time_mean_s"] == "-"  # exposed, nothing queued
    assert cells["spec_acceptance_rate"] == "not exposed" and cells["spec_draft_tokens"] == "not exposed"
    md = metered_report.markdown.read_text("utf-8")
    assert "### vLLM's own metrics per variant" in md and "| `metered` | 6 | 0.250 | - | 50.0% | 32 | 64 | 2 | not exposed |" in md
    assert 'id="engine-metrics"' in metered_report.html.read_text("utf-8")


def test_a_vllm_variant_without_a_reading_says_not_recorded():
    from evalsuite.report.frames import engine_metrics_rows

    suite = {
        "variants": [
            {"name": "b", "backend": "transformers"},
            {"name": "v", "backend": "vllm"},
            {"name": "s", "backend": "http", "options": {"serve": {"launcher": "vllm"}}},
        ]
    }
    rows = engine_metrics_rows({"b": {}, "v": {}, "s": {"engine_metrics": {"requests": 2}}}, suite)
    assert [r["variant"] for r in rows] == ["v", "s"]
    assert set(rows[0]["cells"].values()) == {"not recorded"} and rows[1]["cells"]["requests"] == "2" and rows[1]["cells"]["ttft_mean_s"] == "not exposed"
