"""What a reviewer sees of an item (view.py) and the panel's actions (desk.py), driven as its keys and
buttons drive it (the browser test, test_browser.py, presses the real keys in JupyterLab)."""

from __future__ import annotations

import pytest

from evalsuite.review import api, view

pytest.importorskip("anywidget")

from evalsuite.review.desk import ReviewDesk, ReviewPanel  # noqa: E402


@pytest.fixture
def queue(review_run, tmp_path):
    q = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=q)
    return q


def item_for(queue, case, variant="opt"):
    return next(api.show(it["id"], queue) for it in api.list_items(queue, status="all") if it["case_id"] == case and it["variant"] == variant)


@pytest.mark.parametrize(
    "left, right, expect",
    [
        ("Service 3 restarts every 5 hours [doc-003].", "Service 3 restarts every 5 hours.", ["hours<del> [doc-003]</del>.", "Service 3 restarts every 5 hours."]),
        ("def f(x):\n    if x:\n        return 1", "def f(x):\n    if x:\n        return 2", ["        return <del>1</del>", "        return <ins>2</ins>"]),  # indentation kept
        ("a\nb", "a\nb\nc", ['<tr class="add">', "<ins>c</ins>"]),
        ("same", "same", ["the two outputs are identical"]),
        (None, "text", ["the baseline output was not stored"]),
    ],
)
def test_the_diff_aligns_lines_marks_words_and_keeps_whitespace(left, right, expect):
    html = view.diff_html(left, right, ("baseline", "variant"))
    assert '<table class="sbs">' in html and html.count("<col ") == 4  # two text columns, not six
    for e in expect:
        assert e in html


@pytest.mark.parametrize(
    "reason, words",
    [
        ({"code": "citations", "detail": {"only_baseline": ["doc-003"], "only_variant": []}}, "cites different sources: the baseline alone cites doc-003, the variant alone nothing"),
        ({"code": "leak", "detail": {"canaries": ["CANARY-1"], "overlaps": [{}]}}, "leaks restricted content: canary CANARY-1, 1 verbatim passage(s)"),
        ({"code": "json_drift", "detail": {"extra_keys": ["$.extra"], "counts": {}}}, "the JSON structure changed (added: $.extra)"),
        ({"code": "similarity", "metric": "similarity.chrf", "detail": {"value": 35.123}}, "reads differently from the baseline: similarity.chrf 35.1 of 100"),
        ({"code": "audit"}, "not flagged: drawn at random to audit what the automatic flags miss"),
    ],
)
def test_reasons_are_said_in_words(reason, words):
    assert view.reason_words(reason, {}) == words


def test_scores_compare_only_metrics_with_a_value_on_both_sides_rounded():
    item = {
        "baseline_scores": {"citations.recall": {"value": 1.0, "passed": True}, "grounding.leak": {"value": 0.0, "passed": True}},
        "variant_scores": {"citations.recall": {"value": 0.3333333333333333, "passed": False}, "similarity.chrf": {"value": 61.23456789}, "logits.kl_mean": {"value": 0.01}},
    }
    rows = view.scores_rows(item)
    assert [r["metric"] for r in rows] == ["citations.recall"] and rows[0]["worse"]  # similarity and logits: the baseline has none
    html = view.scores_html(item)
    assert "0.333 fail" in html and "0.3333333" not in html and "similarity" not in html


def test_the_item_carries_its_context_documents_with_cited_spans_and_labels(queue):
    kb = item_for(queue, "kb-003")
    tabs = {t["id"]: t["html"] for t in view.context_tabs(kb, kb["history"])}
    assert "How often does service 3 restart?" in tabs["asked"] and "a good answer" in tabs["asked"] and "doc-003" in tabs["asked"]
    assert '<mark class="cb"' in tabs["docs"] and "cited by baseline" in tabs["docs"] and "internal" in tabs["docs"]
    assert view.first_tab(kb) == "docs"
    leak = item_for(queue, "kb-000")
    assert 'class="tag restricted"' in view.documents_html(leak) and "refuse" in view.asked_html(leak)
    card = item_for(queue, "brand-001")
    checks = view.checks_html(card)
    assert "JSON, key by key" in checks and "$.extra" in checks and "glossary terms" in checks and "schema" in checks


def test_code_items_show_both_sides_test_results(code_run, tmp_path):
    q = tmp_path / "q.sqlite"
    api.flag_run(code_run, queue=q)
    (it,) = [api.show(i["id"], q) for i in api.list_items(q, status="all")]
    checks = view.checks_html(it)
    assert "unit tests" in checks and "assert add_1(1) == 2" in checks
    assert it["context"]["code"]["baseline"]["passed"] is True and it["context"]["code"]["variant"]["passed"] is False


def test_blind_review_names_no_side(queue):
    kb = item_for(queue, "kb-003")
    left = api.blind_sides(kb)
    (la, ta, ra), (lb, tb, rb) = view.sides(kb, blind=True)
    assert (la, lb) == ("A (left)", "B (right)") and ra == left
    html = view.item_diff(kb, blind=True) + view.reasons_html(kb, blind=True) + view.header_html(kb, blind=True) + view.documents_html(kb, blind=True)
    assert "baseline" not in html and "opt" not in html and "variant" not in html.replace("class=", "")


def test_the_panel_records_skips_undoes_and_goes_back_through_the_api(queue):
    panel = ReviewPanel(queue=queue, reviewer="alice")
    first = panel.item
    assert first is not None and panel.item_id == first["id"] and f"#{first['id']}" in panel.header and "item 1 of 5" in panel.progress
    panel.act({"action": "verdict", "value": "acceptable", "note": "same meaning"})
    shown = api.show(first["id"], queue)
    assert (shown["verdict"], shown["reviewer"], shown["note"]) == ("acceptable", "alice", "same meaning") and "item 2 of 5" in panel.progress
    second = panel.item
    panel.act({"action": "skip"})
    assert panel.item["id"] != second["id"] and "skipped" in panel.status
    third = panel.item
    panel.act({"action": "verdict", "value": "regression", "note": ""})
    panel.act({"action": "undo"})
    assert panel.item["id"] == third["id"] and api.show(third["id"], queue)["verdict"] is None and "undid your regression" in panel.status
    panel.act({"action": "back"})
    assert panel.item["id"] == first["id"] and "back to" in panel.status
    panel.act({"action": "verdict", "value": "regression", "note": "on second thought"})
    assert api.show(first["id"], queue)["verdict"] == "regression"
    panel.act({"action": "dance"})
    assert panel.status_kind == "error" and "unknown action" in panel.status
    while panel.item is not None:
        panel.act({"action": "verdict", "value": "unsure"})
    assert "Nothing left for alice" in panel.diff
    assert [r.get("verdict") for r in panel.recorded[:2]] == ["acceptable", "regression"]


def test_a_blind_panel_maps_answers_back_to_verdicts(queue):
    panel = ReviewPanel(queue=queue, reviewer="bob", mode="pairwise")
    it = panel.item
    assert [b["value"] for b in panel.buttons[:3]] == ["left_worse", "same", "right_worse"] and "A (left)" in panel.diff
    left = api.blind_sides(it)
    panel.act({"action": "answer", "value": "left_worse"})
    h = api.show(it["id"], queue)["history"][-1]
    assert (h["answer"], h["left_side"], h["verdict"]) == ("left_worse", left, "regression" if left == "variant" else "acceptable")


def test_the_desk_redraws_its_views_after_each_verdict(queue):
    desk = ReviewDesk(queue, "carol", cards=2)
    assert "5 open" in desk.overview.html and desk.cards.html.count('class="evs card"') == 2
    desk.panel.act({"action": "verdict", "value": "regression", "note": "worse"})
    assert "4 open" in desk.overview.html and "worse" in desk.overview.html
