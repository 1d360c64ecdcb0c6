"""Who is reviewing what: claims with a lease, their release, and skips (the review queue's leases).

A claimed item is held for `lease_s` seconds; a reviewer who vanishes (a closed notebook) holds it
no longer than that. The choice of the next item runs under the write lock, so two reviewers can
never be handed the same item while a lease is live. `ReviewStore` (store.py) builds on this.
"""

from __future__ import annotations

import datetime as _dt
import time

from ..errors import EvalsuiteError
from ..sqlitefile import SqliteFile
from .schema import ANSWERED_SQL, OPEN_SQL

DEFAULT_LEASE_S = 30 * 60.0


class QueueError(EvalsuiteError):
    """A problem with the review queue (unknown item, bad verdict, newer schema...)."""


def iso_utc(t: float) -> str:
    """An epoch time as the queue writes times (ISO 8601, UTC, milliseconds), so they compare as text."""
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="milliseconds")


class LeasedQueue(SqliteFile):
    """The queue file's claims, leases and skips; the items and verdicts are ReviewStore's."""

    def claim_next(self, reviewer: str, lease_s: float = DEFAULT_LEASE_S, *, now: float | None = None, adjudicate: bool = False) -> int | None:
        """Claim the open item of highest expected impact nobody else holds a live lease on; None when none is left.

        Open: never reviewed, unsure, waiting for a second independent review, or a lapsed waiver;
        `adjudicate`: only disputed double reviews. The reviewer's own live claim is returned first (a
        notebook restarted mid-item gets its item back); items the reviewer skipped come after the
        others until the skip's lease ends; an open item the reviewer already answered (unsure, or one
        of two independent reviews) waits for someone else. The choice runs under the write lock, so
        two reviewers can never be handed the same item while a lease is live.
        """
        if not reviewer:
            raise QueueError("reviewer: claiming an item needs a reviewer name")
        t = time.time() if now is None else now
        role_sql = "i.current_verdict = 'disputed'" if adjudicate else "(i.current_verdict IS NULL OR i.current_verdict != 'disputed')"
        with self.write() as db:
            row = db.execute(
                "SELECT c.item_id FROM claims c JOIN items i ON i.id=c.item_id WHERE c.reviewer=? AND c.expires>? AND "
                + OPEN_SQL
                + " AND "
                + role_sql
                + " ORDER BY c.item_id LIMIT 1",
                (reviewer, t, iso_utc(t)),
            ).fetchone()
            if row is None:
                row = db.execute(
                    "SELECT i.id FROM items i LEFT JOIN claims c ON c.item_id=i.id LEFT JOIN skips s ON s.item_id=i.id AND s.reviewer=?"
                    " WHERE (c.item_id IS NULL OR c.expires<=?) AND "
                    + OPEN_SQL
                    + " AND "
                    + role_sql
                    + " AND NOT "
                    + ANSWERED_SQL
                    + " ORDER BY (s.until IS NOT NULL AND s.until>?), i.priority DESC, i.id LIMIT 1",
                    (reviewer, t, iso_utc(t), reviewer, t),
                ).fetchone()
            if row is None:
                return None
            iid = int(row[0])
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", (iid, reviewer, t + float(lease_s)))
        return iid

    def claim_item(self, item_id: int, reviewer: str, lease_s: float = DEFAULT_LEASE_S, *, now: float | None = None) -> bool:
        """Claim one item (going back to it); False when another reviewer holds a live lease on it."""
        t = time.time() if now is None else now
        with self.write() as db:
            if db.execute("SELECT 1 FROM items WHERE id=?", (int(item_id),)).fetchone() is None:
                raise QueueError(f"item {item_id}: no such item in {self.path}")
            held = db.execute("SELECT reviewer FROM claims WHERE item_id=? AND expires>? AND reviewer!=?", (int(item_id), t, reviewer)).fetchone()
            if held is not None:
                return False
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", (int(item_id), reviewer, t + float(lease_s)))
        return True

    def release(self, item_id: int, reviewer: str) -> bool:
        """Give a claimed item back before its lease ends."""
        with self.write() as db:
            cur = db.execute("DELETE FROM claims WHERE item_id=? AND reviewer=?", (int(item_id), reviewer))
        return cur.rowcount > 0

    def skip(self, item_id: int, reviewer: str, lease_s: float = DEFAULT_LEASE_S, *, now: float | None = None) -> float:
        """Give the item back and put it behind the others for this reviewer until the lease's time has
        passed (others may take it at once); returns that time."""
        t = time.time() if now is None else now
        with self.write() as db:
            if db.execute("SELECT 1 FROM items WHERE id=?", (int(item_id),)).fetchone() is None:
                raise QueueError(f"item {item_id}: no such item in {self.path}")
            db.execute("DELETE FROM claims WHERE item_id=? AND reviewer=?", (int(item_id), reviewer))
            db.execute("INSERT OR REPLACE INTO skips VALUES (?, ?, ?)", (int(item_id), reviewer, t + float(lease_s)))
        return t + float(lease_s)

    def claim(self, item_id: int) -> dict | None:
        row = self.db.execute("SELECT reviewer, expires FROM claims WHERE item_id=?", (int(item_id),)).fetchone()
        return dict(row) if row else None
