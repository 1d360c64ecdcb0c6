"""notebooks/explore.ipynb runs headlessly (nbclient) against a stored run: it opens the latest run of
the suite it is pointed at, shows the verdict judge_run gives, every delta in points, missing values
as missing (the browser test, tests/report/test_explore_browser.py, looks at it in JupyterLab)."""

from __future__ import annotations

import math
import shutil

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.report import explore, load_run_frames
from evalsuite.run.store import RunStore

nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra")
nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra")


def test_explore_functions_use_points_and_keep_missing_values_missing(report_run):
    frames = load_run_frames(report_run[0])
    t = explore.delta_table(frames)
    nocite = frames.comparisons.query("variant == 'nocite' and metric == 'citations.recall'").delta.iloc[0]
    assert t.loc[("kb_qa", "citations.recall"), "nocite"] == pytest.approx(100 * nocite) and nocite < 0  # points, as in the chart
    assert t.loc[("kb_qa", "citations.recall"), "clean"] == 0 and "rerun" not in t.columns
    flips = explore.flips_table(frames)
    assert flips.loc["badjson", ("pass_to_fail", "brand")] > 0
    drops = explore.biggest_drops(frames, 3)
    assert drops["delta (points)"].iloc[0] == pytest.approx(100 * frames.comparisons[~frames.comparisons.noise_run].delta.min())
    html = explore.styled(frames.perf[["variant", "ttft_p50_s"]], 3).to_html()
    assert frames.perf.ttft_p50_s.isna().any() and "missing" in html  # the fake backend measures no TTFT: missing, not 0
    assert explore.quality_figure(frames).axes and len(explore.performance_figure(frames).axes) == 4
    assert explore.quality_chart(frames)._repr_png_().startswith(b"\x89PNG")


def test_a_missing_interval_is_not_drawn_as_zero(report_run):
    frames = load_run_frames(report_run[0])
    i = frames.comparisons.index[(frames.comparisons.variant == "nocite") & (frames.comparisons.metric == "citations.recall")][0]
    frames.comparisons.loc[i, ["ci_low", "ci_high"]] = math.nan
    ax = explore.quality_figure(frames).axes[0]
    n_bars = sum(len(c) for c in ax.containers if c.__class__.__name__ == "BarContainer")
    n_err = sum(1 for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer")
    assert n_err == n_bars - 1  # every bar but the one without an interval has its error bar


def test_pick_run_opens_the_latest_run_of_the_named_suite_or_asks(report_run, tmp_path):
    store = report_run[0]
    runs = tmp_path / "runs"
    runs.mkdir()
    a = runs / "20260101-000000-synth"
    shutil.copytree(store.dir, a)
    b = runs / "20260301-000000-other"
    shutil.copytree(store.dir, b)
    suite = RunStore(b).suite
    suite["name"], suite["path"] = "other", str(tmp_path / "other.yaml")
    (b / RunStore.SUITE).write_text(__import__("yaml").safe_dump(suite), "utf-8")
    assert explore.pick_run(runs, suite="synth").dir == a  # not the newest run overall, which is of `other`
    assert explore.pick_run(runs, suite=RunStore(a).suite["path"]).dir == a  # the suite's file works too
    assert explore.pick_run(runs, run="last").dir == b
    with pytest.raises(EvalsuiteError, match=r"runs of 2 suites under .*: other, synth; say which: SUITE = 'other'"):
        explore.pick_run(runs)
    with pytest.raises(EvalsuiteError, match="no run of suite 'nope'.*runs there are of: other, synth"):
        explore.pick_run(runs, suite="nope")


def test_explore_notebook_executes(report_run, repo, monkeypatch):
    pytest.importorskip("ipykernel", reason="ipykernel is in the dev extra")
    store = report_run[0]
    monkeypatch.setenv("EVALSUITE_RUNS_DIR", str(store.dir.parent))
    monkeypatch.setenv("EVALSUITE_SUITE", store.suite_name)
    nb = nbformat.read(repo / "notebooks" / "explore.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(repo / "notebooks")}})
    client.execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert f"run {store.run_id} of suite {store.suite_name}: baseline baseline, 6 variant(s)" in text
    pngs = [o for o in outs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(pngs) >= 2, "the quality and performance charts"
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs if o.output_type in ("display_data", "execute_result"))
    assert "citations.recall" in html and "latency_p95_s" in html and "delta (points)" in html and "missing" in html
    assert "REGRESSION" in html or "REGRESSION" in text  # the verdict, as judge_run gives it
