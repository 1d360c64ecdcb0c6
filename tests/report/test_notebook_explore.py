"""notebooks/explore.ipynb runs headlessly (nbclient) against a stored run and draws its charts."""

from __future__ import annotations

import pytest

from evalsuite.report import explore, load_run_frames

nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra")
nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra")


def test_explore_functions(report_run):
    frames = load_run_frames(report_run[0])
    t = explore.delta_table(frames)
    assert t.loc[("kb_qa", "citations.recall"), "nocite"] < 0 and t.loc[("kb_qa", "citations.recall"), "clean"] == 0
    assert "rerun" not in t.columns
    flips = explore.flips_table(frames)
    assert flips.loc["badjson", ("pass_to_fail", "brand")] > 0
    assert explore.quality_figure(frames).axes and len(explore.performance_figure(frames).axes) == 4
    assert explore.quality_chart(frames)._repr_png_().startswith(b"\x89PNG")


def test_explore_notebook_executes(report_run, repo, monkeypatch):
    pytest.importorskip("ipykernel", reason="ipykernel is in the dev extra")
    store = report_run[0]
    monkeypatch.setenv("EVALSUITE_RUN", str(store.dir))
    nb = nbformat.read(repo / "notebooks" / "explore.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(repo / "notebooks")}})
    client.execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert f"run {store.run_id}: baseline baseline, 6 variant(s)" in text
    pngs = [o for o in outs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(pngs) >= 2, "the quality and performance charts"
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs if o.output_type in ("display_data", "execute_result"))
    assert "citations.recall" in html and "latency_p95_s" in html
