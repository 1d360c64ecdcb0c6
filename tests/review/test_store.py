"""The queue file: keys, append-only verdicts, claims with leases, WAL and busy timeout, migrations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evalsuite.review.store import SCHEMA_VERSION, NewItem, QueueError, ReviewStore, item_key, output_hash


def item(case="kb-001", text="Service restarts every 3 hours.", run="run-1", fp="fp-a", variant="opt", **kw):
    return NewItem(run_id=run, variant=variant, fingerprint=fp, case_id=case, scenario="kb_qa", kind="grounded", baseline="base",
                   reasons=({"code": "flip", "metric": "citations.recall", "message": "m", "detail": {}},), baseline_output="b", variant_output=text, **kw)


@pytest.fixture
def q(tmp_path):
    s = ReviewStore(tmp_path / "q.sqlite")
    yield s
    s.close()


def test_wal_mode_busy_timeout_and_schema_version(q):
    assert q.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert q.db.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000
    assert q.schema_version == SCHEMA_VERSION and q.integrity() == "ok"


@pytest.mark.parametrize(
    "second, same",
    [
        (dict(run="run-2"), True),  # the same output in a later run: the same item
        (dict(run="run-2", text="Service restarts every 4 hours."), False),  # another output
        (dict(fp="fp-b"), False),  # another build of the variant
        (dict(case="kb-002"), False),
    ],
)
def test_the_key_is_case_fingerprint_and_output_hash(q, second, same):
    first = q.add_items([item()])
    again = q.add_items([item(**second)])
    assert len(first.added) == 1
    assert (again.added, again.existing) == (((), first.added) if same else ((first.added[0] + 1,), ()))
    assert q.counts()["items"] == (1 if same else 2)
    if same:
        assert [s["run_id"] for s in q.sightings(first.added[0])] == ["run-1", "run-2"]


def test_reflagging_an_identical_output_adds_nothing(q):
    q.add_items([item(), item(case="kb-002")])
    before = q.db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    res = q.add_items([item(), item(case="kb-002")])
    assert res.added == () and len(res.existing) == 2 and q.db.execute("SELECT COUNT(*) FROM items").fetchone()[0] == before == 2
    assert item_key("kb-001", "fp-a", output_hash("Service restarts every 3 hours.")) == item().key


def test_verdict_history_is_appended_and_the_latest_counts(q):
    (iid,) = q.add_items([item()]).added
    q.annotate(iid, "unsure", "alice", "not sure")
    assert q.item(iid)["verdict"] == "unsure" and [i["id"] for i in q.items(status="open")] == [iid]
    q.annotate(iid, "acceptable", "bob", "same meaning")
    q.annotate(iid, "regression", "carol", "wrong number")
    hist = q.history(iid)
    assert [h["verdict"] for h in hist] == ["unsure", "acceptable", "regression"] and [h["reviewer"] for h in hist] == ["alice", "bob", "carol"]
    it = q.item(iid)
    assert (it["verdict"], it["reviewer"], it["note"], it["n_verdicts"]) == ("regression", "carol", "wrong number", 3)
    assert q.items(status="open") == [] and [i["id"] for i in q.items(status="regression")] == [iid]
    assert q.latest_by_key([item().key])[item().key]["verdict"] == "regression"
    with pytest.raises(sqlite3.IntegrityError):  # the table itself refuses unknown verdicts
        with q.write() as db:
            db.execute("INSERT INTO verdicts (item_id, verdict, reviewer, created) VALUES (?, 'fine', 'x', 'now')", (iid,))


@pytest.mark.parametrize("args, msg", [((99, "acceptable", "a"), "item 99: no such item"), ((1, "ok", "a"), "verdict: must be one of"), ((1, "acceptable", " "), "reviewer:")])
def test_bad_annotations_are_refused_with_the_field(q, args, msg):
    q.add_items([item()])
    with pytest.raises(QueueError, match=msg):
        q.annotate(*args)
    assert q.counts()["verdict_rows"] == 0


def test_claims_are_exclusive_until_the_lease_expires(q):
    ids = q.add_items([item(case=f"kb-{i}") for i in range(3)]).added
    assert q.claim_next("alice", 60, now=1000.0) == ids[0]
    assert q.claim_next("alice", 60, now=1001.0) == ids[0]  # her own live claim comes back first
    assert q.claim_next("bob", 60, now=1001.0) == ids[1]
    assert q.claim_next("carol", 60, now=1030.0) == ids[2]
    assert q.claim_next("dave", 60, now=1003.0) is None  # everything is claimed
    assert q.claim_next("dave", 60, now=1061.0) == ids[0]  # alice's lease ran out
    q.annotate(ids[1], "acceptable", "bob")  # a verdict releases the claim and closes the item
    assert q.claim(ids[1]) is None and q.claim_next("erin", 60, now=1062.0) is None
    assert q.release(ids[2], "carol") and q.claim_next("erin", 60, now=1063.0) == ids[2]


def test_an_unsure_item_goes_to_someone_else(q):
    (iid,) = q.add_items([item()]).added
    assert q.claim_next("alice") == iid
    q.annotate(iid, "unsure", "alice", "second opinion please")
    assert q.claim_next("alice") is None and q.claim_next("bob") == iid


def test_a_stored_version_1_file_is_migrated_without_losing_anything(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "fixtures" / "queue-v1.sql").read_text("utf-8"))
    db.close()
    q = ReviewStore(path)
    assert q.schema_version == SCHEMA_VERSION and q.integrity() == "ok"
    it = q.item(1)
    assert (it["verdict"], it["reviewer"], it["current_verdict"], it["n_verdicts"]) == ("acceptable", "bob", "acceptable", 2)  # backfilled
    assert [h["verdict"] for h in q.history(1)] == ["unsure", "acceptable"] and q.sightings(1)[0]["run_id"] == "20261130-100000-demo"
    same = item(case="kb-001", fp="fp-a", text="Sessions expire after 12 hours.", run="later")
    assert q.add_items([same]).existing == (1,) and q.claim_next("carol") is None  # its key still matches; it is decided
    q.annotate(1, "regression", "carol", "on second thought")
    assert q.item(1)["current_verdict"] == "regression"
    q.close()


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    ReviewStore(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_version VALUES (?, 'future')", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(QueueError, match="newer than this evalsuite"):
        ReviewStore(path)


def test_a_missing_queue_is_not_created_by_readers(tmp_path):
    with pytest.raises(QueueError, match="no review queue here"):
        ReviewStore(tmp_path / "none.sqlite", create=False)
    assert not (tmp_path / "none.sqlite").exists()


def test_a_failed_transaction_leaves_nothing(q):
    with pytest.raises(sqlite3.IntegrityError):
        q.add_items([item(), NewItem(**{**item(case="kb-9").__dict__, "scenario": None})])  # second insert violates NOT NULL
    assert q.counts()["items"] == 0


def test_a_stored_version_2_file_is_migrated_with_its_history_claims_and_ids(tmp_path):
    path = tmp_path / "v2.sqlite"
    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "fixtures" / "queue-v2.sql").read_text("utf-8"))
    db.close()
    q = ReviewStore(path)
    assert q.schema_version == SCHEMA_VERSION and q.integrity() == "ok"
    assert [(h["id"], h["verdict"], h["role"], h["retracted"]) for h in q.history(1)] == [(1, "unsure", "review", False), (2, "acceptable", "review", False)]
    assert (q.item(1)["verdict"], q.item(1)["reviewer"], q.item(2)["verdict"], q.item(3)["verdict"]) == ("acceptable", "bob", "regression", None)
    assert q.claim(3)["reviewer"] == "dave" and q.item(1)["context"] is None and q.item(1)["reviews_needed"] == 1
    row = q.annotate(3, "acceptable", "erin")
    assert row["id"] == 4  # ids continue after the migrated rows
    q.retract(2, "carol")
    assert q.item(2)["verdict"] is None and [h["role"] for h in q.history(2)] == ["review", "retraction"]
    q.close()


def test_skip_puts_the_item_behind_the_others_for_that_reviewer_only(q):
    ids = q.add_items([item(case=f"kb-{i}") for i in range(3)]).added
    assert q.claim_next("alice", 60, now=1000.0) == ids[0]
    q.skip(ids[0], "alice", 60, now=1001.0)
    assert q.claim_next("alice", 60, now=1002.0) == ids[1]  # not the item she just skipped
    assert q.claim_next("bob", 60, now=1002.0) == ids[0]  # others may take it at once
    q.release(ids[0], "bob")
    q.annotate(ids[1], "acceptable", "alice")
    assert q.claim_next("alice", 60, now=1003.0) == ids[2]
    q.annotate(ids[2], "acceptable", "alice")
    assert q.claim_next("alice", 60, now=1004.0) == ids[0]  # behind the others, not gone


def test_a_skip_lasts_the_lease(q):
    ids = q.add_items([item(case=f"kb-{i}") for i in range(2)]).added
    q.skip(ids[0], "alice", 60, now=1000.0)
    assert q.claim_next("alice", 60, now=1010.0) == ids[1]
    q.release(ids[1], "alice")
    assert q.claim_next("alice", 60, now=1061.0) == ids[0]  # the skip ran out: oldest first again


def test_undo_appends_a_retraction_and_the_earlier_verdict_counts_again(q):
    (iid,) = q.add_items([item()]).added
    q.annotate(iid, "acceptable", "alice", "fine")
    q.annotate(iid, "regression", "bob", "no")
    res = q.retract(iid, "bob", "clicked the wrong button")
    assert (res["undone"], res["state"]) == ("regression", "acceptable") and q.item(iid)["reviewer"] == "alice"
    hist = q.history(iid)
    assert [(h["verdict"], h["role"], h["retracted"]) for h in hist] == [("acceptable", "review", False), ("regression", "review", True), ("retracted", "retraction", False)]
    assert hist[2]["retracts"] == hist[1]["id"] and q.counts()["retractions"] == 1 and q.counts()["verdict_rows"] == 2
    q.retract(iid, "alice")
    assert q.item(iid)["verdict"] is None and [i["id"] for i in q.items(status="open")] == [iid]
    with pytest.raises(QueueError, match="bob has no verdict on it to undo"):
        q.retract(iid, "bob")
    with pytest.raises(sqlite3.IntegrityError):  # a retraction always names the row it retracts
        with q.write() as db:
            db.execute("INSERT INTO verdicts (item_id, verdict, reviewer, created, role) VALUES (?, 'retracted', 'x', 'now', 'retraction')", (iid,))


def test_double_review_waits_for_two_independent_verdicts_then_adjudication(q):
    from evalsuite.review.store import ItemReview, VerdictExtra

    (iid,) = q.add_items([item(review=ItemReview(reviews_needed=2))]).added
    assert q.claim_next("alice") == iid
    assert q.annotate(iid, "acceptable", "alice")["state"] == "pending"
    assert q.claim_next("alice") is None and q.claim_next("bob") == iid  # alice answered: it waits for someone else
    assert q.annotate(iid, "regression", "bob")["state"] == "disputed"
    assert q.claim_next("carol") is None and q.claim_next("carol", adjudicate=True) == iid
    with pytest.raises(QueueError, match="an adjudication must decide"):
        q.annotate(iid, "unsure", "carol", extra=VerdictExtra(role="adjudication"))
    assert q.annotate(iid, "regression", "carol", "wrong unit", VerdictExtra(role="adjudication"))["state"] == "regression"
    assert q.item(iid)["verdict_role"] == "adjudication" and q.items(status="open") == []
    (other,) = q.add_items([item(case="kb-9")]).added
    with pytest.raises(QueueError, match="not disputed"):
        q.annotate(other, "acceptable", "carol", extra=VerdictExtra(role="adjudication"))


def test_a_waiver_expires_by_date_or_when_the_item_is_flagged_under_another_rubric(q):
    from evalsuite.review.store import ItemReview, VerdictExtra, iso_utc

    a, b = q.add_items([item(review=ItemReview(rubric_digest="r1")), item(case="kb-2", review=ItemReview(rubric_digest="r1"))]).added
    q.annotate(a, "acceptable", "alice", "fine for now", VerdictExtra(expires=iso_utc(2000.0)))
    q.annotate(b, "acceptable", "alice", "fine under this rubric", VerdictExtra(expires_rubric="r1"))
    assert [i["id"] for i in q.items(status="open", now=1999.0)] == []
    assert [i["id"] for i in q.items(status="open", now=2000.0)] == [a] and q.item(a, now=2001.0)["waiver_expired"]
    assert q.claim_next("bob", now=2001.0) == a
    q.add_items([item(case="kb-2", run="run-2", review=ItemReview(rubric_digest="r2"))])  # the same output, flagged under another rubric
    assert q.item(b)["waiver_expired"] and q.counts(now=1000.0)["current"]["expired"] == 1
    with pytest.raises(QueueError, match="only an acceptable verdict"):
        q.annotate(a, "regression", "bob", extra=VerdictExtra(expires=iso_utc(3000.0)))


def test_the_queue_hands_out_the_highest_expected_impact_first(q):
    from evalsuite.review.store import ItemReview

    ids = q.add_items([item(case="low", review=ItemReview(priority=1.0)), item(case="high", review=ItemReview(priority=5.0)), item(case="mid", review=ItemReview(priority=3.0))]).added
    assert [q.claim_next(r) for r in ("a", "b", "c")] == [ids[1], ids[2], ids[0]]
