"""The notebook's building blocks: the item as HTML, and the verdict buttons (clicked here as a reviewer would)."""

from __future__ import annotations

import pytest

from evalsuite.review import api
from evalsuite.review.view import ReviewPanel, citations, json_table, render_item, scores_table, side_by_side


@pytest.fixture
def queue(review_run, tmp_path):
    q = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=q)
    return q


def item_for(queue, case):
    return next(api.show(it["id"], queue) for it in api.list_items(queue, status="all") if it["case_id"] == case)


def test_side_by_side_highlights_the_changed_words(queue):
    html = side_by_side(item_for(queue, "kb-003"))
    assert 'class="diff"' in html and ("diff_sub" in html or "diff_chg" in html)
    assert "doc-003" in html and "baseline" in html


def test_json_drift_and_citations_are_shown_structurally(queue):
    card = item_for(queue, "brand-001")
    rows = {r["path"]: r for r in json_table(card)}
    assert rows["extra"] == {"path": "extra", "baseline": "(absent)", "variant": "new field", "changed": True}
    assert rows["features[1]"]["changed"] and not rows["product"]["changed"]
    html = render_item(card)
    assert "JSON, path by path" in html and "JSON drift" in html and "extra_keys" in html
    kb = item_for(queue, "kb-003")
    assert citations(kb) == {"baseline": ["doc-003"], "variant": [], "only_baseline": ["doc-003"], "only_variant": []}
    assert json_table(kb) is None and "<h5>citations</h5>" in render_item(kb)
    changed = {r["metric"] for r in scores_table(kb) if r["changed"]}
    assert "citations.recall" in changed


def test_the_panel_buttons_record_verdicts_through_the_api(queue):
    panel = ReviewPanel(queue=queue, reviewer="alice")
    first = panel.item
    assert first is not None and f"item #{first['id']}" in panel.out.value
    panel.note.value = "same meaning"
    panel.buttons["acceptable"].click()  # the widget's own callback path
    shown = api.show(first["id"], queue)
    assert (shown["verdict"], shown["reviewer"], shown["note"]) == ("acceptable", "alice", "same meaning")
    assert panel.item is not None and panel.item["id"] != first["id"] and panel.note.value == ""
    second = panel.item
    panel.buttons["regression"].click()
    panel.skip.click()  # gives the third item back and claims the next one
    assert api.show(second["id"], queue)["verdict"] == "regression"
    while panel.item is not None:
        panel.buttons["unsure"].click()
    assert "nothing left to review" in panel.out.value
    assert [r["verdict"] for r in panel.recorded][:2] == ["acceptable", "regression"] and api.stats(queue)["verdict_rows"] == len(panel.recorded)
