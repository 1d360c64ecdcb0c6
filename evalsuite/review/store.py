"""The review queue on disk: one SQLite file (default `reports/review.sqlite`).

Why SQLite: several reviewers (notebooks, CLIs, CI's `gate --flag`) write at once, and a verdict is
human work that must never be lost or half-written. The file handling (WAL, busy timeout, `BEGIN
IMMEDIATE` writes, what survives a kill, migrations) is evalsuite.sqlitefile's, shared with the
release ledger; tests kill writers with SIGKILL.

The tables, their migrations and the SQL of "open": evalsuite/review/schema.py; how a verdict
history settles into an item's state (undo, double review, adjudication): evalsuite/review/settle.py.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sqlitefile import BUSY_TIMEOUT_S, now_iso
from ..states import REVIEW_VERDICTS
from .leases import DEFAULT_LEASE_S, LeasedQueue, QueueError, iso_utc
from .schema import EXPIRED_SQL, HISTORY_COLUMNS, ITEM_SQL, MIGRATIONS, OPEN_SQL, SCHEMA_VERSION, STANDING_SQL
from .settle import STATES, settle

#: what callers import from here (the lease names live in leases.py)
__all__ = [
    "DEFAULT_LEASE_S",
    "DEFAULT_QUEUE",
    "ROLES",
    "SCHEMA_VERSION",
    "VERDICTS",
    "AddResult",
    "AuditPopulation",
    "ItemReview",
    "NewItem",
    "QueueError",
    "ReviewStore",
    "VerdictExtra",
    "iso_utc",
    "item_key",
    "now_iso",
    "output_hash",
]

DEFAULT_QUEUE = Path("reports") / "review.sqlite"
VERDICTS = REVIEW_VERDICTS  #: a reviewer's verdicts (states.ReviewVerdict)
ROLES = ("review", "adjudication")


def output_hash(text: str | None) -> str:
    """sha256 of an output's text (None, a missing output, hashes like the empty string's marker)."""
    return hashlib.sha256(("\x00missing" if text is None else text).encode("utf-8")).hexdigest()


def item_key(case_id: str, fingerprint: str, out_hash: str) -> str:
    """The identity of a flagged output: the same case, the same variant build, the same text."""
    return hashlib.sha256("\x1f".join((case_id, fingerprint, out_hash)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewItem:
    """What flagging hands the store: one flagged (or audited) output, why, and how to review it."""

    run_id: str
    variant: str
    fingerprint: str
    case_id: str
    scenario: str
    kind: str
    baseline: str  #: the baseline variant's name
    reasons: tuple[dict, ...]  #: {code, metric, message, detail}
    baseline_output: str | None
    variant_output: str | None
    baseline_scores: dict = field(default_factory=dict)  #: metric -> {value, passed}
    variant_scores: dict = field(default_factory=dict)
    context: dict | None = None  #: what was asked and the checks beside it (evalsuite.review.context)
    review: ItemReview | None = None  #: how it is reviewed and where it stands in the triage order

    @property
    def output_hash(self) -> str:
        return output_hash(self.variant_output)

    @property
    def key(self) -> str:
        return item_key(self.case_id, self.fingerprint, self.output_hash)


@dataclass(frozen=True)
class ItemReview:
    """How an item is reviewed (from the rubric's `review:` policy) and its triage."""

    mode: str = "anchors"  #: anchors | pairwise (blind)
    left_side: str | None = None  #: pairwise: which side is shown on the left (baseline | variant), seeded per item
    reviews_needed: int = 1  #: independent verdicts it needs (2: double review)
    priority: float = 0.0  #: expected impact: the queue hands out the highest first
    triage: str | None = None  #: knife-edge | substantive (None: no logit margin recorded)
    margin: float | None = None  #: the baseline's logit margin at the first divergent token (nats)
    audit: bool = False  #: queued at random from the unflagged outputs (the flags' audit)
    rubric_digest: str | None = None  #: the rubric it was flagged under


@dataclass(frozen=True)
class AuditPopulation:
    """One flagging pass's audit sample for one variant: the population it was drawn from."""

    run_id: str
    variant: str
    population: int  #: unflagged outputs that differ from the baseline's
    sampled: int  #: of those, queued for review
    rate: float
    seed: int


@dataclass(frozen=True)
class VerdictExtra:
    """What a verdict row may carry besides verdict, reviewer and note."""

    role: str = "review"  #: review | adjudication
    expires: str | None = None  #: an acceptable verdict's waiver lapses at this UTC time (ISO 8601)
    expires_rubric: str | None = None  #: ... or when the item is flagged under a rubric other than this digest
    answer: str | None = None  #: blind pairwise: the raw answer (left_worse | same | right_worse)
    left_side: str | None = None  #: blind pairwise: the side that was shown on the left


@dataclass(frozen=True)
class AddResult:
    """What one flagging pass did to the queue."""

    added: tuple[int, ...]  #: new item ids
    existing: tuple[int, ...]  #: items already in the queue (same output): only a sighting recorded


_INSERT_ITEM = (
    "INSERT INTO items (item_key, case_id, variant, fingerprint, output_hash, scenario, kind, run_id, baseline, reasons,"
    " baseline_output, variant_output, baseline_scores, variant_scores, created, context, mode, left_side, reviews_needed,"
    " priority, triage, margin, audit, rubric_digest) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _item_values(it: NewItem, ts: str) -> tuple:
    r = it.review or ItemReview()
    return (
        it.key,
        it.case_id,
        it.variant,
        it.fingerprint,
        it.output_hash,
        it.scenario,
        it.kind,
        it.run_id,
        it.baseline,
        _dumps(list(it.reasons)),
        it.baseline_output,
        it.variant_output,
        _dumps(it.baseline_scores),
        _dumps(it.variant_scores),
        ts,
        None if it.context is None else _dumps(it.context),
        r.mode,
        r.left_side,
        int(r.reviews_needed),
        float(r.priority),
        r.triage,
        r.margin,
        int(bool(r.audit)),
        r.rubric_digest,
    )


class ReviewStore(LeasedQueue):
    """One connection to the queue file. Cheap to open; one per process (or thread). Claims, leases
    and skips: evalsuite/review/leases.py."""

    SCHEMA_VERSION = SCHEMA_VERSION
    MIGRATIONS = MIGRATIONS
    KIND = "review queue"
    ERROR = QueueError

    def __init__(self, path: str | Path = DEFAULT_QUEUE, *, busy_timeout_s: float = BUSY_TIMEOUT_S, create: bool = True, synchronous: str = "NORMAL"):
        super().__init__(path, busy_timeout_s=busy_timeout_s, create=create, synchronous=synchronous)

    def missing_message(self) -> str:
        return f"{self.path}: no review queue here (flag a run first: evalsuite review flag RUN)"

    # -- writes -----------------------------------------------------------------------------

    def add_items(self, items: Iterable[NewItem], audits: Iterable[AuditPopulation] = ()) -> AddResult:
        """Insert flagged outputs in one transaction; an output already queued gets a sighting (and the
        rubric it was flagged under now, and its context when it had none). `audits`: the pass's
        audit populations, recorded in the same transaction."""
        added: list[int] = []
        existing: list[int] = []
        ts = now_iso()
        with self.write() as db:
            for it in items:
                row = db.execute("SELECT id FROM items WHERE item_key=?", (it.key,)).fetchone()
                if row is None:
                    iid = int(db.execute(_INSERT_ITEM, _item_values(it, ts)).lastrowid or 0)
                    added.append(iid)
                else:
                    iid = int(row[0])
                    self._refresh_item(db, iid, it)
                    if iid not in existing and iid not in added:
                        existing.append(iid)
                db.execute("INSERT OR IGNORE INTO sightings VALUES (?, ?, ?)", (iid, it.run_id, ts))
            for a in audits:
                db.execute("INSERT OR REPLACE INTO audits VALUES (?, ?, ?, ?, ?, ?, ?)", (a.run_id, a.variant, a.population, a.sampled, a.rate, a.seed, ts))
        return AddResult(tuple(added), tuple(existing))

    @staticmethod
    def _refresh_item(db: sqlite3.Connection, iid: int, it: NewItem) -> None:
        """An item seen again: record the rubric it was flagged under now (a waiver "until the rubric
        changes" lapses when it differs), fill a missing context, and turn an audit item flagged for
        real into a flagged one."""
        r = it.review or ItemReview()
        db.execute(
            "UPDATE items SET rubric_digest=COALESCE(?, rubric_digest), context=COALESCE(context, ?) WHERE id=?",
            (r.rubric_digest, None if it.context is None else _dumps(it.context), iid),
        )
        if not r.audit:
            db.execute(
                "UPDATE items SET audit=0, reasons=?, priority=?, triage=?, margin=? WHERE id=? AND audit=1",
                (_dumps(list(it.reasons)), r.priority, r.triage, r.margin, iid),
            )

    def annotate(self, item_id: int, verdict: str, reviewer: str, note: str = "", extra: VerdictExtra | None = None) -> dict:
        """Append a verdict (never overwrites one), settle the item, and release the reviewer's claim and skip."""
        x = extra or VerdictExtra()
        _check_verdict(verdict, reviewer, x)
        with self.write() as db:
            item = db.execute("SELECT reviews_needed, current_verdict FROM items WHERE id=?", (int(item_id),)).fetchone()
            if item is None:
                raise QueueError(f"item {item_id}: no such item in {self.path}")
            if x.role == "adjudication" and item["current_verdict"] != "disputed":
                raise QueueError(f"item {item_id}: not disputed (it is {item['current_verdict'] or 'open'}); adjudication settles two reviews that disagree")
            ts = now_iso()
            cur = db.execute(
                "INSERT INTO verdicts (item_id, verdict, reviewer, note, created, role, expires, expires_rubric, answer, left_side) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (int(item_id), verdict, reviewer, note or "", ts, x.role, x.expires, x.expires_rubric, x.answer, x.left_side),
            )
            state = self._settle(db, int(item_id), int(item["reviews_needed"]), fast=(cur.lastrowid, verdict, x))
            db.execute("DELETE FROM claims WHERE item_id=?", (int(item_id),))
            db.execute("DELETE FROM skips WHERE item_id=? AND reviewer=?", (int(item_id), reviewer))
        return {
            "id": int(cur.lastrowid or 0),
            "item_id": int(item_id),
            "verdict": verdict,
            "reviewer": reviewer,
            "note": note or "",
            "created": ts,
            "state": state,
        }

    def retract(self, item_id: int, reviewer: str, note: str = "") -> dict:
        """Undo: append a retraction of the reviewer's latest standing verdict on the item (the history
        keeps both rows) and settle the item again; its earlier verdict, if any, counts once more."""
        if not reviewer or not str(reviewer).strip():
            raise QueueError("reviewer: an undo needs a reviewer name")
        with self.write() as db:
            item = db.execute("SELECT reviews_needed FROM items WHERE id=?", (int(item_id),)).fetchone()
            if item is None:
                raise QueueError(f"item {item_id}: no such item in {self.path}")
            row = db.execute(
                "SELECT v.id, v.verdict FROM verdicts v WHERE v.item_id=? AND v.reviewer=? AND " + STANDING_SQL + " ORDER BY v.id DESC LIMIT 1",
                (int(item_id), reviewer),
            ).fetchone()
            if row is None:
                raise QueueError(f"item {item_id}: {reviewer} has no verdict on it to undo")
            ts = now_iso()
            cur = db.execute(
                "INSERT INTO verdicts (item_id, verdict, reviewer, note, created, role, retracts) VALUES (?, 'retracted', ?, ?, ?, 'retraction', ?)",
                (int(item_id), reviewer, note or "", ts, int(row["id"])),
            )
            state = self._settle(db, int(item_id), int(item["reviews_needed"]))
        return {
            "id": int(cur.lastrowid or 0),
            "item_id": int(item_id),
            "retracts": int(row["id"]),
            "undone": row["verdict"],
            "reviewer": reviewer,
            "state": state,
        }

    def _settle(self, db: sqlite3.Connection, item_id: int, needed: int, fast: tuple | None = None) -> str | None:
        """Mirror the item's settled state (settle.settle over its history) into its row. `fast`: the
        (row id, verdict, extra) just appended, which alone decides a single-review item."""
        if fast is not None and needed <= 1 and fast[2].role == "review":
            rid, state, x = fast
            row: Mapping[str, Any] | None = {"id": rid, "expires": x.expires, "expires_rubric": x.expires_rubric}
        else:
            rows = [dict(r) for r in db.execute(f"SELECT {HISTORY_COLUMNS} FROM verdicts WHERE item_id=? ORDER BY id", (item_id,))]
            settled = settle(rows, needed)
            state, row = settled.state, settled.row
        waiver: Mapping[str, Any] = row if state == "acceptable" and row is not None else {}
        db.execute(
            "UPDATE items SET current_verdict=?, current_row=?, waiver_until=?, waiver_rubric=? WHERE id=?",
            (state, None if row is None else row["id"], waiver.get("expires"), waiver.get("expires_rubric"), item_id),
        )
        return state

    # -- reads ------------------------------------------------------------------------------

    def item(self, item_id: int, *, now: float | None = None) -> dict:
        row = self.db.execute(ITEM_SQL + " WHERE i.id=?", (_now_iso(now), int(item_id))).fetchone()
        if row is None:
            raise QueueError(f"item {item_id}: no such item in {self.path}")
        return _item_dict(row)

    def items(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        variant: str | None = None,
        ids: Sequence[int] | None = None,
        audit: bool | None = None,
        limit: int | None = None,
        now: float | None = None,
    ) -> list[dict]:
        """Items with their current state. status: open | reviewed | all (None) | acceptable | regression
        | unsure | pending | disputed | expired; `audit`: True/False for audit items only / flagged only;
        `limit`; `now` (epoch) for lapsed waivers."""
        when = _now_iso(now)
        where: list[str] = []
        args: list[object] = [when]
        cond = _status_sql(status)
        if cond is not None:
            where.append(cond[0])
            args.extend(when for _ in range(cond[1]))
        if run_id:
            where.append("i.id IN (SELECT item_id FROM sightings WHERE run_id=?)")
            args.append(run_id)
        if variant:
            where.append("i.variant=?")
            args.append(variant)
        if audit is not None:
            where.append("i.audit=?")
            args.append(int(bool(audit)))
        if ids is not None:
            ids = [int(x) for x in ids]
            where.append(f"i.id IN ({','.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        sql = ITEM_SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY i.id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_item_dict(r) for r in self.db.execute(sql, args).fetchall()]

    def history(self, item_id: int) -> list[dict]:
        """Every row of the item's history in order, retractions and the rows they retract included."""
        rows = self.db.execute(f"SELECT {HISTORY_COLUMNS} FROM verdicts WHERE item_id=? ORDER BY id", (int(item_id),)).fetchall()
        out = [dict(r) for r in rows]
        retracted = {r["retracts"] for r in out if r["retracts"] is not None}
        for r in out:
            r["retracted"] = r["id"] in retracted
        return out

    def histories(self, item_ids: Iterable[int]) -> dict[int, list[dict]]:
        """item id -> its history (for many items in one query)."""
        ids = [int(i) for i in item_ids]
        out: dict[int, list[dict]] = {i: [] for i in ids}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            for r in self.db.execute(f"SELECT {HISTORY_COLUMNS} FROM verdicts WHERE item_id IN ({','.join('?' * len(chunk))}) ORDER BY id", chunk):
                out[int(r["item_id"])].append(dict(r))
        return out

    def answered(self, reviewer: str, limit: int = 50) -> list[int]:
        """Items the reviewer gave a verdict on that still stands, most recent first (what `back` and undo walk through)."""
        rows = self.db.execute(
            "SELECT v.item_id, MAX(v.id) AS last FROM verdicts v WHERE v.reviewer=? AND " + STANDING_SQL + " GROUP BY v.item_id ORDER BY last DESC LIMIT ?",
            (reviewer, int(limit)),
        ).fetchall()
        return [int(r["item_id"]) for r in rows]

    def decided_by(self, reviewer: str, since: str = "") -> int:
        """How many items the reviewer gave a verdict on since a time (ISO 8601 prefix, UTC)."""
        sql = "SELECT COUNT(DISTINCT item_id) FROM verdicts WHERE reviewer=? AND role != 'retraction' AND created >= ?"
        return int(self.db.execute(sql, (reviewer, since)).fetchone()[0])

    def sightings(self, item_id: int) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT run_id, seen FROM sightings WHERE item_id=? ORDER BY seen, run_id", (int(item_id),)).fetchall()]

    def latest_by_key(self, keys: Iterable[str], *, now: float | None = None) -> dict[str, dict]:
        """item key -> the item with its current state (`verdict` None when never reviewed) for keys in the queue."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, dict] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            rows = self.db.execute(ITEM_SQL + f" WHERE i.item_key IN ({','.join('?' * len(chunk))})", [_now_iso(now), *chunk]).fetchall()
            for r in rows:
                out[r["item_key"]] = _item_dict(r)
        return out

    def audits(self, run_id: str | None = None) -> list[dict]:
        """The recorded audit populations (of one run, or all)."""
        sql, args = "SELECT * FROM audits", []
        if run_id:
            sql, args = sql + " WHERE run_id=?", [run_id]
        return [dict(r) for r in self.db.execute(sql + " ORDER BY run_id, variant", args)]

    def verdicts_by_fingerprint(self, fingerprints: Iterable[str]) -> dict[str, dict[int, dict]]:
        """fingerprint -> item id -> {case_id, verdict, reviewer, note, time}: the current state of each
        reviewed output of these variant builds (items never reviewed are left out): `acceptable`,
        `regression`, `unsure`, `pending`, `disputed`, `expired` (a lapsed waiver) or `open` (every
        verdict undone), with the reviewer, note and time of the row that decided it."""
        fps = list(dict.fromkeys(fingerprints))
        out: dict[str, dict[int, dict]] = {}
        for i in range(0, len(fps), 500):
            chunk = fps[i : i + 500]
            rows = self.db.execute(
                ITEM_SQL + f" WHERE i.fingerprint IN ({','.join('?' * len(chunk))}) AND EXISTS (SELECT 1 FROM verdicts v WHERE v.item_id = i.id) ORDER BY i.id",
                [_now_iso(None), *chunk],
            ).fetchall()
            for r in rows:
                out.setdefault(r["fingerprint"], {})[int(r["id"])] = {
                    "case_id": r["case_id"],
                    "verdict": "expired" if r["waiver_expired"] else (r["verdict"] or "open"),
                    "reviewer": r["reviewer"],
                    "note": r["note"],
                    "time": r["verdict_time"],
                }
        return out

    def counts(self, *, now: float | None = None) -> dict:
        """Totals for `review stats`: items, verdict rows, current states, open items, live claims."""
        db, t = self.db, time.time() if now is None else now
        cur = {r[0]: r[1] for r in db.execute("SELECT COALESCE(current_verdict, 'open'), COUNT(*) FROM items GROUP BY 1")}
        expired = db.execute("SELECT COUNT(*) FROM items i WHERE " + EXPIRED_SQL, (iso_utc(t),)).fetchone()[0]
        return {
            "items": db.execute("SELECT COUNT(*) FROM items").fetchone()[0],
            "verdict_rows": db.execute("SELECT COUNT(*) FROM verdicts WHERE role != 'retraction'").fetchone()[0],
            "retractions": db.execute("SELECT COUNT(*) FROM verdicts WHERE role = 'retraction'").fetchone()[0],
            "current": {k: cur.get(k, 0) for k in ("open",) + STATES} | {"expired": expired},
            "open": db.execute("SELECT COUNT(*) FROM items i WHERE " + OPEN_SQL, (iso_utc(t),)).fetchone()[0],
            "claimed": db.execute("SELECT COUNT(*) FROM claims WHERE expires>?", (t,)).fetchone()[0],
            "runs": db.execute("SELECT COUNT(DISTINCT run_id) FROM sightings").fetchone()[0],
            "audit_items": db.execute("SELECT COUNT(*) FROM items WHERE audit=1").fetchone()[0],
        }


def _now_iso(now: float | None) -> str:
    return iso_utc(time.time() if now is None else now)


def _status_sql(status: str | None) -> tuple[str, int] | None:
    """(condition, how many `now` parameters it takes) for a status filter; None: every item."""
    if status in (None, "all"):
        return None
    if status == "open":
        return OPEN_SQL, 1
    if status == "expired":
        return EXPIRED_SQL, 1
    if status == "reviewed":
        return "i.current_verdict IS NOT NULL", 0
    if status == "acceptable":
        return "i.current_verdict='acceptable' AND NOT " + EXPIRED_SQL, 1
    if status in STATES:
        return f"i.current_verdict='{status}'", 0
    raise QueueError(f"status: must be one of open, reviewed, all, {', '.join(STATES)}, expired; got {status!r}")


def _check_verdict(verdict: str, reviewer: str, x: VerdictExtra) -> None:
    if verdict not in VERDICTS:
        raise QueueError(f"verdict: must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    if not reviewer or not str(reviewer).strip():
        raise QueueError("reviewer: a verdict needs a reviewer name")
    if x.role not in ROLES:
        raise QueueError(f"role: must be one of {', '.join(ROLES)}, got {x.role!r}")
    if (x.expires or x.expires_rubric) and verdict != "acceptable":
        raise QueueError(f"expires: only an acceptable verdict (a waiver) can expire, not {verdict!r}")
    if x.role == "adjudication" and verdict == "unsure":
        raise QueueError("verdict: an adjudication must decide: acceptable or regression")


def _dumps(x: object) -> str:
    return json.dumps(x, ensure_ascii=False, sort_keys=True, default=str)


def _item_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    for k in ("reasons", "baseline_scores", "variant_scores"):
        d[k] = json.loads(d[k]) if d.get(k) else ({} if k != "reasons" else [])
    d["context"] = json.loads(d["context"]) if d.get("context") else None
    d["waiver_expired"] = bool(d.get("waiver_expired"))
    d["audit"] = bool(d.get("audit"))
    d["reason_codes"] = sorted({r.get("code", "") for r in d["reasons"]})
    return d
