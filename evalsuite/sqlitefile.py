"""An append-only SQLite file shared by several processes: the review queue and the release ledger.

Why these settings: several writers (notebooks, CLIs, CI jobs) write at once, and what they write is
a record that must never be lost or half-written. The file is opened in WAL mode (readers never
block the writer), with a busy timeout, and every write runs in a `BEGIN IMMEDIATE` transaction: a
deferred transaction that reads first and then writes can fail with SQLITE_BUSY *despite* the busy
timeout (its read snapshot may be stale when it asks for the write lock), while an immediate one
takes the write lock up front and simply waits its turn. With WAL and `synchronous=NORMAL` (the
default) a committed transaction survives any crash of the process; only an OS crash or power cut
can undo the last few commits, never corrupt the file. `synchronous="FULL"` closes that window too,
at about 7x the cost per write (fsync per commit).

A subclass names its schema: `SCHEMA_VERSION`, `MIGRATIONS` (applied in order under the write lock,
recorded in a `schema_version` table), `KIND` (what the file is, for messages) and `ERROR` (the
EvalsuiteError subclass its problems raise).
"""

from __future__ import annotations

import datetime as _dt
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, TypeVar

from .errors import EvalsuiteError

BUSY_TIMEOUT_S = 60.0
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

T = TypeVar("T")


def now_iso() -> str:
    """The current UTC time, to the millisecond: how these files stamp their rows."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def retry_busy(fn: Callable[[], T], attempts: int = 8) -> T:
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
    raise AssertionError("unreachable")  # pragma: no cover


class SqliteFile:
    """One connection to an append-only, schema-versioned SQLite file. Cheap to open; one per process (or thread)."""

    SCHEMA_VERSION: ClassVar[int] = 0
    MIGRATIONS: ClassVar[list[tuple[int, tuple[str, ...]]]] = []  #: (version, statements) bringing version-1 to version
    KIND: ClassVar[str] = "SQLite file"
    ERROR: ClassVar[type[EvalsuiteError]] = EvalsuiteError

    def __init__(self, path: str | Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S, create: bool = True, synchronous: str = "NORMAL"):
        self.path = Path(path)
        self.busy_timeout_s = float(busy_timeout_s)
        if str(synchronous).upper() not in SYNCHRONOUS:
            raise self.ERROR(f"synchronous: must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if not create and not self.path.is_file():
            raise self.ERROR(self.missing_message())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; every write says BEGIN IMMEDIATE itself
            self.db = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            retry_busy(lambda: self.db.execute("PRAGMA journal_mode=WAL").fetchone())
        except (OSError, sqlite3.Error) as exc:
            raise self.ERROR(f"{self.path}: cannot open the {self.KIND}: {exc}") from exc
        self.db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def missing_message(self) -> str:
        """Why opening a file that is not there (with create=False) fails, and what to do."""
        return f"{self.path}: no {self.KIND} here"

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE (waits for the write lock), COMMIT or ROLLBACK."""
        retry_busy(lambda: self.db.execute("BEGIN IMMEDIATE"))
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        try:
            retry_busy(lambda: self.db.execute("COMMIT"))
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
        if self._version() == self.SCHEMA_VERSION:
            return
        with self.write() as db:
            current = self._version()  # re-read under the write lock: another process may have migrated
            if current > self.SCHEMA_VERSION:
                raise self.ERROR(f"{self.path}: {self.KIND} schema version {current} is newer than this evalsuite ({self.SCHEMA_VERSION}); upgrade evalsuite")
            if current == 0:
                db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)")
            for version, statements in self.MIGRATIONS:
                if version <= current:
                    continue
                for sql in statements:
                    db.execute(sql)
                db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, now_iso()))

    @property
    def schema_version(self) -> int:
        return self._version()

    def integrity(self) -> str:
        """SQLite's own check of the file: "ok", or what is broken."""
        return str(self.db.execute("PRAGMA integrity_check").fetchone()[0])
