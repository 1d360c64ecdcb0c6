"""notebooks/review.ipynb runs headlessly (nbclient) on a fixture run and queue, and its buttons record verdicts."""

from __future__ import annotations

import pytest

from evalsuite.review import api

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")


def test_review_notebook_executes_and_its_buttons_record_verdicts(review_run, repo, tmp_path, monkeypatch):
    q = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=q)
    monkeypatch.setenv("EVALSUITE_REVIEW_QUEUE", str(q))
    monkeypatch.setenv("EVALSUITE_REVIEWER", "notebook-test")
    nb = nbformat.read(repo / "notebooks" / "review.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # stored without outputs
    # press the panel's button in the kernel, as a reviewer would
    nb.cells.append(nbformat.v4.new_code_cell('panel.note.value = "fine"\nclicked = panel.item["id"]\npanel.buttons["acceptable"].click()\nprint("clicked", clicked)'))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(repo / "notebooks")}}).execute()
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {})) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "5 items, 5 open" in text and "kb-003" in text and 'class="diff"' in text and "JSON, path by path" in text
    clicked = int(nb.cells[-1].outputs[0]["text"].split()[1])
    shown = api.show(clicked, q)
    assert (shown["verdict"], shown["reviewer"], shown["note"]) == ("acceptable", "notebook-test", "fine")
    assert api.stats(q)["verdict_rows"] == 1
