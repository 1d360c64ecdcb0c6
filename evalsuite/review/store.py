"""The review queue on disk: one SQLite file (default `reports/review.sqlite`).

Why SQLite: several reviewers (notebooks, CLIs, CI's `gate --flag`) write at once, and a verdict is
human work that must never be lost or half-written. The file handling (WAL, busy timeout, `BEGIN
IMMEDIATE` writes, what survives a kill, migrations) is evalsuite.sqlitefile's, shared with the
release ledger; tests kill writers with SIGKILL.

Tables (schema version 2; `schema_version` holds the number and migrations upgrade older files):

- `items`: one row per distinct flagged output, unique on `item_key` = sha256 of (case id,
  variant fingerprint, output hash). Re-flagging the same output in a later run adds no row.
- `sightings`: (item, run) pairs: every run in which the item's exact output was flagged.
- `verdicts`: append-only history of `acceptable` / `regression` / `unsure` verdicts; the latest
  row (highest id) per item is its current verdict (mirrored in `items.current_verdict`, written in
  the same transaction, so that `review next` finds open items through an index).
- `claims`: at most one live claim per item (`review next`), with an expiry time (a lease).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError
from ..sqlitefile import BUSY_TIMEOUT_S, SqliteFile, now_iso

SCHEMA_VERSION = 2
DEFAULT_QUEUE = Path("reports") / "review.sqlite"
VERDICTS = ("acceptable", "regression", "unsure")
DEFAULT_LEASE_S = 30 * 60.0

#: (version, statements) applied in order to bring a file from version-1 to version
MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (
        1,
        (
            "CREATE TABLE items ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " item_key TEXT NOT NULL UNIQUE,"
            " case_id TEXT NOT NULL, variant TEXT NOT NULL, fingerprint TEXT NOT NULL, output_hash TEXT NOT NULL,"
            " scenario TEXT NOT NULL DEFAULT '', kind TEXT NOT NULL DEFAULT '',"
            " run_id TEXT NOT NULL, baseline TEXT NOT NULL DEFAULT '',"
            " reasons TEXT NOT NULL,"
            " baseline_output TEXT, variant_output TEXT,"
            " baseline_scores TEXT NOT NULL DEFAULT '{}', variant_scores TEXT NOT NULL DEFAULT '{}',"
            " created TEXT NOT NULL)",
            "CREATE TABLE verdicts ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " item_id INTEGER NOT NULL REFERENCES items(id),"
            " verdict TEXT NOT NULL CHECK (verdict IN ('acceptable', 'regression', 'unsure')),"
            " reviewer TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', created TEXT NOT NULL)",
            "CREATE INDEX verdicts_item ON verdicts(item_id, id)",
        ),
    ),
    (
        2,
        (
            "CREATE TABLE sightings (item_id INTEGER NOT NULL REFERENCES items(id), run_id TEXT NOT NULL, seen TEXT NOT NULL, PRIMARY KEY (item_id, run_id))",
            "INSERT OR IGNORE INTO sightings SELECT id, run_id, created FROM items",
            "CREATE TABLE claims (item_id INTEGER PRIMARY KEY REFERENCES items(id), reviewer TEXT NOT NULL, expires REAL NOT NULL)",
            "CREATE INDEX items_case ON items(case_id, fingerprint)",
            # the latest verdict, kept beside the history in the same transaction, so that finding the
            # next open item is an index lookup instead of a scan of every item's history
            "ALTER TABLE items ADD COLUMN current_verdict TEXT",
            "UPDATE items SET current_verdict=(SELECT verdict FROM verdicts v WHERE v.item_id=items.id ORDER BY v.id DESC LIMIT 1)",
            "CREATE INDEX items_open ON items(current_verdict, id)",
        ),
    ),
]


class QueueError(EvalsuiteError):
    """A problem with the review queue (unknown item, bad verdict, newer schema...)."""


def output_hash(text: str | None) -> str:
    """sha256 of an output's text (None, a missing output, hashes like the empty string's marker)."""
    return hashlib.sha256(("\x00missing" if text is None else text).encode("utf-8")).hexdigest()


def item_key(case_id: str, fingerprint: str, out_hash: str) -> str:
    """The identity of a flagged output: the same case, the same variant build, the same text."""
    return hashlib.sha256("\x1f".join((case_id, fingerprint, out_hash)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewItem:
    """What flagging hands the store: one flagged output and why."""

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

    @property
    def output_hash(self) -> str:
        return output_hash(self.variant_output)

    @property
    def key(self) -> str:
        return item_key(self.case_id, self.fingerprint, self.output_hash)


@dataclass(frozen=True)
class AddResult:
    """What one flagging pass did to the queue."""

    added: tuple[int, ...]  #: new item ids
    existing: tuple[int, ...]  #: items already in the queue (same output): only a sighting recorded


class ReviewStore(SqliteFile):
    """One connection to the queue file. Cheap to open; one per process (or thread)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    MIGRATIONS = MIGRATIONS
    KIND = "review queue"
    ERROR = QueueError

    def __init__(self, path: str | Path = DEFAULT_QUEUE, *, busy_timeout_s: float = BUSY_TIMEOUT_S, create: bool = True, synchronous: str = "NORMAL"):
        super().__init__(path, busy_timeout_s=busy_timeout_s, create=create, synchronous=synchronous)

    def missing_message(self) -> str:
        return f"{self.path}: no review queue here (flag a run first: evalsuite review flag RUN)"

    # -- writes -----------------------------------------------------------------------------

    def add_items(self, items: Iterable[NewItem]) -> AddResult:
        """Insert flagged outputs in one transaction; an output already queued gets a sighting only."""
        added: list[int] = []
        existing: list[int] = []
        ts = now_iso()
        with self.write() as db:
            for it in items:
                row = db.execute("SELECT id FROM items WHERE item_key=?", (it.key,)).fetchone()
                if row is None:
                    cur = db.execute(
                        "INSERT INTO items (item_key, case_id, variant, fingerprint, output_hash, scenario, kind, run_id, baseline, reasons,"
                        " baseline_output, variant_output, baseline_scores, variant_scores, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (
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
                        ),
                    )
                    iid = int(cur.lastrowid)
                    added.append(iid)
                else:
                    iid = int(row[0])
                    if iid not in existing and iid not in added:
                        existing.append(iid)
                db.execute("INSERT OR IGNORE INTO sightings VALUES (?, ?, ?)", (iid, it.run_id, ts))
        return AddResult(tuple(added), tuple(existing))

    def annotate(self, item_id: int, verdict: str, reviewer: str, note: str = "") -> dict:
        """Append a verdict (never overwrites one) and release the reviewer's claim on the item."""
        if verdict not in VERDICTS:
            raise QueueError(f"verdict: must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        if not reviewer or not str(reviewer).strip():
            raise QueueError("reviewer: a verdict needs a reviewer name")
        with self.write() as db:
            if db.execute("SELECT 1 FROM items WHERE id=?", (int(item_id),)).fetchone() is None:
                raise QueueError(f"item {item_id}: no such item in {self.path}")
            ts = now_iso()
            cur = db.execute(
                "INSERT INTO verdicts (item_id, verdict, reviewer, note, created) VALUES (?,?,?,?,?)", (int(item_id), verdict, reviewer, note or "", ts)
            )
            db.execute("UPDATE items SET current_verdict=? WHERE id=?", (verdict, int(item_id)))
            db.execute("DELETE FROM claims WHERE item_id=?", (int(item_id),))
        return {"id": int(cur.lastrowid), "item_id": int(item_id), "verdict": verdict, "reviewer": reviewer, "note": note or "", "created": ts}

    def claim_next(self, reviewer: str, lease_s: float = DEFAULT_LEASE_S, *, now: float | None = None) -> int | None:
        """Claim the oldest open item nobody else holds a live lease on; None when none is left.

        Open: no verdict yet, or the latest is `unsure`. The reviewer's own live claim is returned
        first (a notebook restarted mid-item gets its item back). The whole choice runs under the
        write lock, so two reviewers can never be handed the same item while a lease is live.
        """
        if not reviewer:
            raise QueueError("reviewer: claiming an item needs a reviewer name")
        t = time.time() if now is None else now
        with self.write() as db:
            row = db.execute(
                "SELECT c.item_id FROM claims c JOIN items i ON i.id=c.item_id WHERE c.reviewer=? AND c.expires>? AND "
                + _OPEN_SQL
                + " ORDER BY c.item_id LIMIT 1",
                (reviewer, t),
            ).fetchone()
            if row is None:
                row = db.execute(
                    "SELECT i.id FROM items i LEFT JOIN claims c ON c.item_id=i.id WHERE (c.item_id IS NULL OR c.expires<=?) AND "
                    + _OPEN_SQL
                    # an item this reviewer just marked `unsure` waits for someone else
                    + " AND NOT (i.current_verdict='unsure' AND EXISTS (SELECT 1 FROM verdicts v WHERE v.item_id=i.id AND v.reviewer=? AND v.id=(SELECT MAX(id) FROM verdicts w WHERE w.item_id=i.id)))"
                    + " ORDER BY i.id LIMIT 1",
                    (t, reviewer),
                ).fetchone()
            if row is None:
                return None
            iid = int(row[0])
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", (iid, reviewer, t + float(lease_s)))
        return iid

    def release(self, item_id: int, reviewer: str) -> bool:
        """Give a claimed item back before its lease ends."""
        with self.write() as db:
            cur = db.execute("DELETE FROM claims WHERE item_id=? AND reviewer=?", (int(item_id), reviewer))
        return cur.rowcount > 0

    # -- reads ------------------------------------------------------------------------------

    def item(self, item_id: int) -> dict:
        row = self.db.execute(_ITEM_SQL + " WHERE i.id=?", (int(item_id),)).fetchone()
        if row is None:
            raise QueueError(f"item {item_id}: no such item in {self.path}")
        return _item_dict(row)

    def items(
        self, *, status: str | None = None, run_id: str | None = None, variant: str | None = None, ids: Sequence[int] | None = None, limit: int | None = None
    ) -> list[dict]:
        """Items with their current verdict. status: open | acceptable | regression | unsure | reviewed | None (all)."""
        where, args = [], []
        if status == "open":
            where.append("(lv.verdict IS NULL OR lv.verdict='unsure')")
        elif status == "reviewed":
            where.append("lv.verdict IS NOT NULL")
        elif status in VERDICTS:
            where.append("lv.verdict=?")
            args.append(status)
        elif status not in (None, "all"):
            raise QueueError(f"status: must be one of open, reviewed, all, {', '.join(VERDICTS)}; got {status!r}")
        if run_id:
            where.append("i.id IN (SELECT item_id FROM sightings WHERE run_id=?)")
            args.append(run_id)
        if variant:
            where.append("i.variant=?")
            args.append(variant)
        if ids is not None:
            ids = [int(x) for x in ids]
            where.append(f"i.id IN ({','.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        sql = _ITEM_SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY i.id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_item_dict(r) for r in self.db.execute(sql, args).fetchall()]

    def history(self, item_id: int) -> list[dict]:
        rows = self.db.execute("SELECT id, item_id, verdict, reviewer, note, created FROM verdicts WHERE item_id=? ORDER BY id", (int(item_id),)).fetchall()
        return [dict(r) for r in rows]

    def sightings(self, item_id: int) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT run_id, seen FROM sightings WHERE item_id=? ORDER BY seen, run_id", (int(item_id),)).fetchall()]

    def claim(self, item_id: int) -> dict | None:
        row = self.db.execute("SELECT reviewer, expires FROM claims WHERE item_id=?", (int(item_id),)).fetchone()
        return dict(row) if row else None

    def latest_by_key(self, keys: Iterable[str]) -> dict[str, dict]:
        """item key -> {id, verdict (None when never reviewed), reviewer, note} for keys in the queue."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, dict] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            rows = self.db.execute(
                "SELECT i.id, i.item_key, lv.verdict, lv.reviewer, lv.note FROM items i LEFT JOIN (" + _LATEST_SQL + ") lv ON lv.item_id=i.id"
                f" WHERE i.item_key IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for r in rows:
                out[r["item_key"]] = {"id": r["id"], "verdict": r["verdict"], "reviewer": r["reviewer"], "note": r["note"]}
        return out

    def verdicts_by_fingerprint(self, fingerprints: Iterable[str]) -> dict[str, dict[int, dict]]:
        """fingerprint -> item id -> {case_id, verdict, reviewer, note, time}: the current verdict on
        each reviewed output of these variant builds (items never reviewed are left out)."""
        fps = list(dict.fromkeys(fingerprints))
        out: dict[str, dict[int, dict]] = {}
        for i in range(0, len(fps), 500):
            chunk = fps[i : i + 500]
            rows = self.db.execute(
                "SELECT i.id, i.fingerprint, i.case_id, lv.verdict, lv.reviewer, lv.note, lv.created FROM items i JOIN ("
                + _LATEST_SQL
                + ") lv ON lv.item_id=i.id"
                f" WHERE i.fingerprint IN ({','.join('?' * len(chunk))}) ORDER BY i.id",
                chunk,
            ).fetchall()
            for r in rows:
                out.setdefault(r["fingerprint"], {})[int(r["id"])] = {
                    "case_id": r["case_id"],
                    "verdict": r["verdict"],
                    "reviewer": r["reviewer"],
                    "note": r["note"],
                    "time": r["created"],
                }
        return out

    def counts(self) -> dict:
        """Totals for `review stats`: items, verdict rows, current verdicts, open items, live claims."""
        db = self.db
        cur = {
            r[0]: r[1]
            for r in db.execute("SELECT COALESCE(lv.verdict, 'open'), COUNT(*) FROM items i LEFT JOIN (" + _LATEST_SQL + ") lv ON lv.item_id=i.id GROUP BY 1")
        }
        return {
            "items": db.execute("SELECT COUNT(*) FROM items").fetchone()[0],
            "verdict_rows": db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0],
            "current": {k: cur.get(k, 0) for k in ("open",) + VERDICTS},
            "open": cur.get("open", 0) + cur.get("unsure", 0),
            "claimed": db.execute("SELECT COUNT(*) FROM claims WHERE expires>?", (time.time(),)).fetchone()[0],
            "runs": db.execute("SELECT COUNT(DISTINCT run_id) FROM sightings").fetchone()[0],
        }


_LATEST_SQL = "SELECT v.item_id, v.verdict, v.reviewer, v.note, v.created, v.id AS verdict_id FROM verdicts v WHERE v.id = (SELECT MAX(id) FROM verdicts w WHERE w.item_id = v.item_id)"
_OPEN_SQL = "(i.current_verdict IS NULL OR i.current_verdict='unsure')"
_ITEM_SQL = (
    "SELECT i.*, lv.verdict AS verdict, lv.reviewer AS reviewer, lv.note AS note, lv.created AS verdict_time,"
    " (SELECT COUNT(*) FROM verdicts v WHERE v.item_id=i.id) AS n_verdicts,"
    " (SELECT COUNT(*) FROM sightings s WHERE s.item_id=i.id) AS n_runs,"
    " c.reviewer AS claimed_by, c.expires AS claim_expires"
    " FROM items i LEFT JOIN (" + _LATEST_SQL + ") lv ON lv.item_id=i.id LEFT JOIN claims c ON c.item_id=i.id"
)


def _dumps(x: Any) -> str:
    return json.dumps(x, ensure_ascii=False, sort_keys=True, default=str)


def _item_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    for k in ("reasons", "baseline_scores", "variant_scores"):
        d[k] = json.loads(d[k]) if d.get(k) else ({} if k != "reasons" else [])
    d["reason_codes"] = sorted({r.get("code", "") for r in d["reasons"]})
    return d
