"""The library path end to end on a stored run: flag, re-flag, verdicts carried to later runs, the gate, export."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.judge import judge_run
from evalsuite.review import api
from evalsuite.verdict.decisions import REVIEW_RULE

from .conftest import run_suite_at


@pytest.fixture
def queue(review_run, tmp_path):
    """A fresh queue for each test, flagged from the shared run."""
    q = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=q)
    return q


def by_case(queue, variant="opt"):
    return {it["case_id"]: it for it in api.list_items(queue, status="all", variant=variant)}


def test_flag_run_flags_the_planted_differences_only(review_run, tmp_path):
    res = api.flag_run(review_run["store"], queue=tmp_path / "q.sqlite")
    assert res.flagged == 5 and len(res.added) == 5 and res.open == 5 and res.existing == ()
    got = {(it["variant"], it["case_id"]): set(it["reason_codes"]) for it in api.list_items(res.queue, status="all")}
    assert got == {
        ("opt", "kb-003"): {"flip", "citations"},  # citation dropped
        ("opt", "kb-004"): {"flip", "similarity"},  # rephrased (rubric: min_similarity 40)
        ("opt", "kb-000"): {"flip", "leak"},  # canary
        ("opt", "brand-001"): {"flip", "json_drift"},
        ("spec", "kb-006"): {"speculative"},
    }
    it = by_case(res.queue)["kb-003"]
    assert it["scenario"] == "kb_qa" and "[doc-003]" in it["baseline_output"] and "[doc-003]" not in it["variant_output"]
    assert it["variant_scores"]["citations.recall"]["passed"] is False and it["baseline_scores"]["citations.recall"]["passed"] is True
    assert it["fingerprint"] == review_run["store"].signature["variants"]["opt"]


def test_reflagging_the_same_run_or_identical_outputs_adds_nothing(review_run, queue):
    again = api.flag_run(review_run["store"], queue=queue)
    assert again.added == () and len(again.existing) == 5
    assert api.stats(queue)["items"] == 5


def test_a_verdict_applies_to_the_identical_output_in_a_later_run(review_run, queue, tmp_path):
    item = by_case(queue)["kb-003"]
    api.annotate(item["id"], "acceptable", note="dropping the marker is fine here", reviewer="alice", queue=queue)
    later = run_suite_at(review_run["suite"])  # same suite again: same outputs (from the cache), a new run id
    assert later.run_id != review_run["store"].run_id
    res = api.flag_run(later, queue=queue)
    assert res.added == () and res.open == 4  # kb-003 is decided; nothing new
    assert [s["run_id"] for s in api.show(item["id"], queue)["sightings"]] == [review_run["store"].run_id, later.run_id]
    from evalsuite.verdict.compare import compare_run

    d = api.decisions(compare_run(later), later.signature["variants"], queue)
    assert dict(d.accepted) == {"opt": {"kb-003": "item #%d, alice: dropping the marker is fine here" % item["id"]}} and d.n_open == 4


def _gate(store, rubric, queue, **kw):
    from typer.testing import CliRunner

    from evalsuite.cli import app

    out = store.dir / "verdict.json"
    args = ["gate", str(store.dir), "--runs-dir", str(store.dir.parent), "--stage", "production", "--json", str(out), "--queue", str(queue), "--rubric", str(rubric), "--verbose"]
    res = CliRunner().invoke(app, args + (["--flag"] if kw.get("flag") else []))
    return res.exit_code, res.output, json.loads(out.read_text())


def test_acceptable_verdicts_turn_the_failing_gate_into_a_passing_one(review_run, tmp_path):
    store, rubric, q = review_run["store"], review_run["rubric"], tmp_path / "q.sqlite"
    code, text, data = _gate(store, rubric, q)  # no queue yet: the plain gate
    assert code == 1 and data["review"] == {} and not q.exists()
    code, text, data = _gate(store, rubric, q, flag=True)  # --flag fills the queue first
    assert code == 1 and data["review"]["open"] == 5 and "kb-citation-recall" in text
    items = by_case(q)
    for case in ("kb-003", "brand-001"):
        api.annotate(items[case]["id"], "acceptable", reviewer="alice", queue=q)
    code, text, data = _gate(store, rubric, q)
    assert code == 0 and data["passed"] and "PASS" in text
    res = {(r["variant"], r["rule"]): r for r in data["results"]}
    assert res[("opt", "kb-citation-recall")]["status"] == "pass" and "waived by review" in res[("opt", "kb-citation-recall")]["note"]
    assert any("reviewers accepted kb-003" in n for n in data["notes"])
    assert data["review"]["accepted"] == {"opt": ["brand-001", "kb-003"]} and data["review"]["open"] == 3


def test_a_regression_verdict_turns_the_passing_gate_into_a_failing_one(review_run, tmp_path, write):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    lenient = write("lenient.yaml", "rules:\n  - {name: kb-citation-recall, scenario: kb_qa, metric: citations.recall, max_flips: 5}\nreview: {max_open: 10}\n")
    assert judge_run(store, lenient, queue=q, flag=True).verdict.exit_code == 0
    spec = by_case(q, "spec")["kb-006"]
    api.annotate(spec["id"], "regression", note="the exclamation mark is not ours", reviewer="bob", queue=q)
    code, text, data = _gate(store, lenient, q)
    assert code == 1 and "REGRESSION" in text and "human-review" in text and "the exclamation mark" in text
    (viol,) = data["violations"]
    assert (viol["rule"], viol["variant"], viol["cases"]) == (REVIEW_RULE, "spec", ["kb-006"])


def test_too_many_open_items_need_review(review_run, tmp_path, write):
    strict = write("strict.yaml", "rules:\n  - {name: r, scenario: kb_qa, metric: citations.recall, max_flips: 5}\nreview: {max_open: 2}\n")
    code, text, data = _gate(review_run["store"], strict, tmp_path / "q.sqlite", flag=True)
    assert code == 3 and data["needs_review"] and data["passed"] and "NEEDS REVIEW" in text


def test_next_show_and_claims(queue):
    first = api.next_item("alice", queue=queue)
    second = api.next_item("bob", queue=queue)
    assert first["id"] != second["id"] and api.next_item("alice", queue=queue)["id"] == first["id"]
    shown = api.show(first["id"], queue)
    assert shown["claim"]["reviewer"] == "alice" and shown["history"] == [] and shown["reasons"]
    api.annotate(first["id"], "unsure", note="ask the KB owner", reviewer="alice", queue=queue)
    api.annotate(first["id"], "acceptable", reviewer="carol", queue=queue)
    shown = api.show(first["id"], queue)
    assert [h["verdict"] for h in shown["history"]] == ["unsure", "acceptable"] and shown["verdict"] == "acceptable" and shown["claim"] is None


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_and_stats(queue, tmp_path, fmt):
    items = api.list_items(queue, status="all")
    api.annotate(items[0]["id"], "regression", note="worse", reviewer="alice", queue=queue)
    out = api.export(tmp_path / f"queue.{fmt}", queue=queue)
    df = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert len(df) == 5 and list(df.columns) == list(api.EXPORT_COLUMNS)
    row = df[df["id"] == items[0]["id"]].iloc[0]
    assert (row["verdict"], row["reviewer"], row["note"]) == ("regression", "alice", "worse")
    s = api.stats(queue)
    assert (s["items"], s["verdict_rows"], s["open"], s["current"]["regression"]) == (5, 1, 4, 1)
    assert s["by_reason"]["flip"] == 4 and s["by_variant"]["spec"] == {"open": 1}


def test_errors_name_the_problem(queue, tmp_path):
    from evalsuite.review.store import QueueError

    with pytest.raises(QueueError, match="no review queue here"):
        api.list_items(tmp_path / "missing.sqlite")
    with pytest.raises(QueueError, match="exports are csv or parquet; name a .csv or .parquet file, or give --format"):  # issue 38: no --format was given
        api.export(tmp_path / "x.xlsx", queue=queue)
    with pytest.raises(QueueError, match="status: must be one of"):
        api.list_items(queue, status="done")


# ---------------------------------------------------------------------------------------------
# skip, undo, back; double review, the audit, expiring waivers


def test_after_skip_next_returns_another_item(queue):
    first = api.next_item("alice", queue=queue)
    assert api.next_item("alice", queue=queue)["id"] == first["id"]  # her own claim comes back ...
    api.skip(first["id"], "alice", queue)
    again = api.next_item("alice", queue=queue)
    assert again["id"] != first["id"]  # ... but not after a skip
    assert api.next_item("bob", queue=queue)["id"] == first["id"]  # and bob may take it at once


def test_undo_and_back_through_the_api(queue):
    a = api.next_item("alice", queue=queue)
    api.annotate(a["id"], "acceptable", reviewer="alice", queue=queue)
    b = api.next_item("alice", queue=queue)
    api.annotate(b["id"], "regression", reviewer="alice", queue=queue)
    assert api.back("alice", queue)["id"] == b["id"] and api.back("alice", queue, steps=2)["id"] == a["id"]
    assert api.back("alice", queue, steps=3) is None
    res = api.undo(b["id"], "alice", queue)
    assert res["undone"] == "regression" and api.show(b["id"], queue)["verdict"] is None
    assert [h["role"] for h in api.show(b["id"], queue)["history"]] == ["review", "retraction"]


def _answer_all(q, who: str, pick) -> list[int]:
    done = []
    while (it := api.next_item(who, queue=q)) is not None:
        api.annotate(it["id"], pick(it), reviewer=who, queue=q)
        done.append(it["id"])
    return done


def test_double_review_gives_kappa_lists_disagreements_and_the_adjudication_reaches_the_gate(review_run, tmp_path):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    res = api.flag_run(store, queue=q, rubric=review_run["audit_rubric"])
    assert res.flagged == 5 and res.audited == 2 and all(i["reviews_needed"] == 2 for i in api.list_items(q, status="all"))
    a = _answer_all(q, "alice", lambda it: "acceptable")
    assert len(a) == 7 and all(i["verdict"] == "pending" for i in api.list_items(q, status="all"))
    audit_case = min(i["case_id"] for i in api.list_items(q, status="all") if i["audit"])
    b = _answer_all(q, "bob", lambda it: "regression" if it["case_id"] in ("kb-000", audit_case) else "acceptable")
    assert sorted(b) == sorted(a)  # the same items, answered independently
    s = api.stats(q)
    (pair,) = s["agreement"]["pairs"]
    assert pair["reviewers"] == ["alice", "bob"] and (pair["items"], pair["agree"], pair["disagree"]) == (7, 5, 2) and pair["kappa"] == 0.0
    disputed = {d["case_id"]: d for d in s["agreement"]["disagreements"]}
    assert set(disputed) == {"kb-000", audit_case} and disputed["kb-000"]["adjudicated"] is None
    j = judge_run(store, review_run["audit_rubric"], queue=q)
    assert any("is disputed (alice acceptable, bob regression)" in n for n in j.verdict.notes) and j.verdict.review["disputed"]
    api.adjudicate(disputed["kb-000"]["id"], "regression", note="the canary is a leak", reviewer="carol", queue=q)
    j = judge_run(store, review_run["audit_rubric"], queue=q)
    assert j.verdict.result("opt", REVIEW_RULE).status == "fail" and "adjudicated by carol" in j.verdict.result("opt", REVIEW_RULE).violations[0].diffs[0]
    assert any("adjudicated by carol: regression (independent reviews: alice acceptable, bob regression)" in n for n in j.verdict.notes)
    r = CliRunner().invoke(app, ["review", "stats", "--queue", str(q)])
    assert "alice & bob" in r.output and "disagreement on item" in r.output and "adjudicated regression by carol" in r.output


def test_the_audit_share_is_queued_and_estimates_what_the_flags_miss_in_stats_and_report(review_run, tmp_path):
    from evalsuite.report import write_report

    store, q = review_run["store"], tmp_path / "q.sqlite"
    api.flag_run(store, queue=q, rubric=review_run["audit_rubric"])
    audited = api.list_items(q, status="all")
    audited = [i for i in audited if i["audit"]]
    assert len(audited) == 2 and all(i["reason_codes"] == ["audit"] and i["variant"] == "opt" for i in audited)
    assert {i["case_id"] for i in audited} <= {"kb-007", "kb-008", "kb-009", "kb-010", "kb-011"}
    again = api.flag_run(store, queue=q, rubric=review_run["audit_rubric"])
    assert again.added == () and {i["id"] for i in api.list_items(q, status="all") if i["audit"]} == {i["id"] for i in audited}  # seeded: the same sample
    est = api.stats(q)["audit"]
    assert (est["population"], est["sampled"], est["reviewed"], est["miss_rate"]) == (5, 2, 0, None)
    for who in ("alice", "bob"):
        api.annotate(audited[0]["id"], "regression", reviewer=who, queue=q)
        api.annotate(audited[1]["id"], "acceptable", reviewer=who, queue=q)
    est = api.stats(q)["audit"]
    assert (est["reviewed"], est["regressions"], est["miss_rate"]) == (2, 1, 0.5) and est["ci"][0] < 0.5 < est["ci"][1] and est["missed"] == 2.5
    rep = write_report(judge_run(store, review_run["audit_rubric"], queue=q), out_dir=tmp_path / "rep", plots=False)
    html, md = rep.html.read_text(), rep.markdown.read_text()
    assert 'id="review-audit"' in html and "2 of 5 unflagged output(s)" in html and "the flags miss about 50%" in html
    assert "Audit of the review flags:** audit: 2 of 5" in md


def test_an_expired_waiver_reopens_its_item_and_the_gate_says_why(review_run, tmp_path, write):
    store, rubric, q = review_run["store"], review_run["rubric"], tmp_path / "q.sqlite"
    api.flag_run(store, queue=q)
    items = by_case(q)
    api.annotate(items["kb-003"]["id"], "acceptable", note="ok until the fix ships", reviewer="alice", queue=q, expires="2020-06-30")
    api.annotate(items["brand-001"]["id"], "acceptable", note="ok under these rules", reviewer="alice", queue=q, expires="rubric")
    j = judge_run(store, rubric, queue=q)
    assert j.verdict.exit_code == 1 and j.verdict.result("opt", "kb-citation-recall").status == "fail"  # the lapsed waiver no longer waives
    assert j.verdict.result("opt", "brand-json-valid").status == "pass"  # the rubric is the same: that waiver holds
    assert any("the waiver on item #%d (opt/kb-003) by alice expired on 2020-07-01 00:00 UTC" % items["kb-003"]["id"] in n for n in j.verdict.notes)
    assert "1 expired waiver(s) (kb-003)" in j.verdict.result("opt", REVIEW_RULE).note and items["kb-003"]["id"] in j.verdict.review["open_items"]["opt"]
    changed = write("changed.yaml", review_run["rubric"].read_text().replace("max_open: 100", "max_open: 99"))
    j = judge_run(store, changed, queue=q)
    assert j.verdict.result("opt", "brand-json-valid").status == "fail" and any("was given until the rubric changed" in n for n in j.verdict.notes)
    assert api.next_item("bob", queue=q)["case_id"] in ("kb-003",) or "kb-003" in {i["case_id"] for i in api.list_items(q, status="open")}
    with pytest.raises(Exception, match="expires: expected a date"):
        api.annotate(items["kb-004"]["id"], "acceptable", reviewer="alice", queue=q, expires="next tuesday")


def test_the_release_ledger_sees_lapsed_and_undone_waivers(review_run, tmp_path):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    api.flag_run(store, queue=q)
    items = by_case(q)
    api.annotate(items["kb-003"]["id"], "acceptable", reviewer="alice", queue=q, expires="2020-01-01")
    api.annotate(items["kb-004"]["id"], "acceptable", reviewer="alice", queue=q)
    api.undo(items["kb-004"]["id"], "alice", q)
    api.annotate(items["kb-000"]["id"], "acceptable", reviewer="alice", queue=q)
    fp = store.signature["variants"]["opt"]
    got = {v["case_id"]: v["verdict"] for v in api.fingerprint_verdicts(q, [fp])[fp].values()}
    assert got == {"kb-003": "expired", "kb-004": "open", "kb-000": "acceptable"}  # never-reviewed items are left out
