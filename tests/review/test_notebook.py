"""notebooks/review.ipynb runs headlessly (nbclient) on a fixture run and queue, and its panel records
verdicts, skips and undoes through the API (the browser test drives the same notebook by keyboard)."""

from __future__ import annotations

import pytest

from evalsuite.review import api

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("anywidget")

PRESS = '''first = desk.panel.item["id"]
desk.panel.act({"action": "verdict", "value": "acceptable", "note": "fine"})
second = desk.panel.item["id"]
desk.panel.act({"action": "skip"})
third = desk.panel.item["id"]
desk.panel.act({"action": "verdict", "value": "regression", "note": "worse"})
desk.panel.act({"action": "undo"})
print("ids", first, second, third, desk.panel.item["id"])
print("overview", "4 open" in desk.overview.html or desk.overview.html[:200])
'''


def test_review_notebook_executes_and_its_panel_records_verdicts(review_run, repo, tmp_path, monkeypatch):
    q = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=q)
    monkeypatch.setenv("EVALSUITE_REVIEW_QUEUE", str(q))
    monkeypatch.setenv("EVALSUITE_REVIEWER", "notebook-test")
    nb = nbformat.read(repo / "notebooks" / "review.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # stored without outputs
    nb.cells.append(nbformat.v4.new_code_cell(PRESS))
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(repo / "notebooks")}}).execute()
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {})) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "reviewer notebook-test" in text and "application/vnd.jupyter.widget-view+json" in text
    assert "no audit sample" in text  # the stats cell ran: this rubric has no audit_rate
    ids = [int(x) for x in nb.cells[-1].outputs[0]["text"].split("\n")[0].split()[1:]]
    first, second, third, now = ids
    assert len({first, second, third}) == 3 and now == third  # skip moved on; undo brought the third back
    assert (api.show(first, q)["verdict"], api.show(first, q)["note"]) == ("acceptable", "fine")
    hist = api.show(third, q)["history"]
    assert [h["role"] for h in hist] == ["review", "retraction"] and hist[0]["retracted"] and api.show(third, q)["verdict"] is None
    assert api.show(second, q)["verdict"] is None  # skipped, not answered
    assert "overview True" in text
