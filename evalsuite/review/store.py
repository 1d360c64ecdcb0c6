"""The review queue on disk: one SQLite file (default `reports/review.sqlite`).

Why SQLite: several reviewers (notebooks, CLIs, CI's `gate --flag`) write at once, and a verdict is
human work that must never be lost or half-written. The file is opened in WAL mode (readers never
block the writer), with a busy timeout, and every write runs in a `BEGIN IMMEDIATE` transaction: a
deferred transaction that reads first and then writes can fail with SQLITE_BUSY *despite* the busy
timeout (its read snapshot may be stale when it asks for the write lock), while an immediate one
takes the write lock up front and simply waits its turn. With WAL and `synchronous=NORMAL` (the
default) a committed transaction survives any crash of the process (tests kill writers with
SIGKILL); only an OS crash or power cut can undo the last few commits, never corrupt the file.
`synchronous="FULL"` closes that window too, at about 7x the cost per write (fsync per commit).

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

import datetime as _dt
import hashlib
import json
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError

SCHEMA_VERSION = 2
DEFAULT_QUEUE = Path("reports") / "review.sqlite"
VERDICTS = ("acceptable", "regression", "unsure")
BUSY_TIMEOUT_S = 60.0
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


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


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


class ReviewStore:
    """One connection to the queue file. Cheap to open; one per process (or thread)."""

    def __init__(self, path: str | Path = DEFAULT_QUEUE, *, busy_timeout_s: float = BUSY_TIMEOUT_S, create: bool = True, synchronous: str = "NORMAL"):
        self.path = Path(path)
        self.busy_timeout_s = float(busy_timeout_s)
        if str(synchronous).upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise QueueError(f"synchronous: must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if not create and not self.path.is_file():
            raise QueueError(f"{self.path}: no review queue here (flag a run first: evalsuite review flag RUN)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; every write says BEGIN IMMEDIATE itself
        self.db = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self._retry(lambda: self.db.execute("PRAGMA journal_mode=WAL").fetchone())
        self.db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @staticmethod
    def _retry(fn, attempts: int = 8):
        """Run fn, retrying a few times on SQLITE_BUSY/LOCKED that slipped past the busy timeout
        (the WAL-mode switch and a recovering WAL can report busy without invoking the handler)."""
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                msg = str(exc)
                if ("locked" not in msg and "busy" not in msg) or i == attempts - 1:
                    raise
                time.sleep(min(2.0, 0.05 * 2**i) * (0.5 + random.random()))

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE (waits for the write lock), COMMIT or ROLLBACK."""
        self._retry(lambda: self.db.execute("BEGIN IMMEDIATE"))
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        try:
            self._retry(lambda: self.db.execute("COMMIT"))
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def _version(self) -> int:
        has = self.db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
        if not has:
            return 0
        row = self.db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _migrate(self) -> None:
        if self._version() == SCHEMA_VERSION:
            return
        with self.write() as db:
            current = self._version()  # re-read under the write lock: another process may have migrated
            if current > SCHEMA_VERSION:
                raise QueueError(f"{self.path}: review queue schema version {current} is newer than this evalsuite ({SCHEMA_VERSION}); upgrade evalsuite")
            if current == 0:
                db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)")
            for version, statements in MIGRATIONS:
                if version <= current:
                    continue
                for sql in statements:
                    db.execute(sql)
                db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, now_iso()))

    @property
    def schema_version(self) -> int:
        return self._version()

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

    def integrity(self) -> str:
        return str(self.db.execute("PRAGMA integrity_check").fetchone()[0])


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
