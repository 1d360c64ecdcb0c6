"""The generation cache (SQLite): successful generations by variant fingerprint, request and sample,
and stored scores by scorer and input (evalsuite.scoring.reuse); shared by every run of a machine."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..backends.base import Generation

SCHEMA_VERSION = 1  #: of a stored generation record (the cache's rows, a run's status)
DEFAULT_CACHE = Path("reports") / "cache" / "generations.sqlite"
#: versions (scorer keys) of each scorer whose stored scores the cache keeps: switching between two
#: versions (two branches) reuses both, and older versions' scores are dropped
KEEP_SCORER_VERSIONS = 3


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class GenerationCache:
    """SQLite cache of successful generations keyed by (variant fingerprint, request hash, sample),
    and of scores keyed by (scorer key, input key) (evalsuite.scoring.reuse)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS generations ("
            " fingerprint TEXT NOT NULL, request_hash TEXT NOT NULL, sample INTEGER NOT NULL,"
            " payload TEXT NOT NULL, schema_version INTEGER NOT NULL, created TEXT NOT NULL,"
            " PRIMARY KEY (fingerprint, request_hash, sample))"
        )
        # stored scores (evalsuite.scoring.reuse): an unchanged output is not scored twice
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS scores ("
            " scorer_key TEXT NOT NULL, input_key TEXT NOT NULL, payload TEXT NOT NULL, created TEXT NOT NULL,"
            " PRIMARY KEY (scorer_key, input_key))"
        )
        # which scorer (by name) each scorer key belongs to, and when it was last used: bounds the scores
        self._db.execute("CREATE TABLE IF NOT EXISTS scorer_keys (scorer_key TEXT PRIMARY KEY, name TEXT NOT NULL, last_used TEXT NOT NULL)")
        self._db.commit()
        self._recorded_keys: dict[str, str] = {}  #: scorer name -> key, recorded by this connection

    def get(self, fingerprint: str, request_hash: str, sample: int) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT payload FROM generations WHERE fingerprint=? AND request_hash=? AND sample=?", (fingerprint, request_hash, sample)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def get_many(self, fingerprint: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], dict]:
        """Stored generations of one variant fingerprint, by (request hash, sample): one query per
        500 keys rather than one per request (missing keys are absent)."""
        out: dict[tuple[str, int], str] = {}
        hashes = list(dict.fromkeys(h for h, _ in keys))
        wanted = set(keys)
        with self._lock:
            for i in range(0, len(hashes), 500):  # SQLite's bound-parameter limit
                chunk = hashes[i : i + 500]
                rows = self._db.execute(
                    f"SELECT request_hash, sample, payload FROM generations WHERE fingerprint=? AND request_hash IN ({','.join('?' * len(chunk))})",
                    [fingerprint, *chunk],
                ).fetchall()
                out.update({(h, s): payload for h, s, payload in rows if (h, s) in wanted})
        return {k: json.loads(v) for k, v in out.items()}

    def put(self, gen: Generation) -> None:
        """Store a successful generation (errors and timeouts are not cached: they are retried)."""
        self.put_many([gen])

    def put_many(self, gens: Sequence[Generation], encoded: Sequence[str] | None = None) -> None:
        """Store a batch's successful generations in one transaction (errors and timeouts are not
        cached: they are retried). `encoded`: each generation's JSON, when the caller has it already."""
        now = utc_now()
        payloads = encoded if encoded is not None else [json.dumps(g.to_dict(), ensure_ascii=False) for g in gens]
        rows = [(g.fingerprint, g.request_hash, g.sample, payload, SCHEMA_VERSION, now) for g, payload in zip(gens, payloads) if g.ok and not g.timeout]
        if not rows:
            return
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO generations VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.commit()

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]

    def get_scores(self, scorer_key: str, input_keys: Iterable[str]) -> dict[str, str]:
        """Stored score payloads of one scorer, by input key (missing keys are absent)."""
        keys = list(dict.fromkeys(input_keys))
        out: dict[str, str] = {}
        with self._lock:
            for i in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                chunk = keys[i : i + 500]
                rows = self._db.execute(
                    f"SELECT input_key, payload FROM scores WHERE scorer_key=? AND input_key IN ({','.join('?' * len(chunk))})", [scorer_key, *chunk]
                )
                out.update(rows.fetchall())
        return out

    def put_scores(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Store (scorer key, input key, payload) rows in one transaction."""
        now = utc_now()
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)", [(sk, ik, payload, now) for sk, ik, payload in rows])
            self._db.commit()

    def use_scorer_keys(self, keys: dict[str, str]) -> int:
        """Record that these scorer keys (scorer name -> key) are in use now. When one is new (a
        scorer's source, config or version changed), the scores of all but the KEEP_SCORER_VERSIONS
        most recently used keys of each scorer are dropped, and so are scores whose key no scorer
        claims (left by a version of evalsuite before this bookkeeping): the table holds a few
        versions of each scorer, not every version ever run. Returns the number of rows dropped.

        Keys this connection recorded already are not written again: an adaptive run scores batch
        after batch with the same scorers, and records them once."""
        if keys.items() <= self._recorded_keys.items():
            return 0
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")  # orders versions used seconds apart
        with self._lock:
            known = {k for (k,) in self._db.execute("SELECT scorer_key FROM scorer_keys")}
            self._db.executemany("INSERT OR REPLACE INTO scorer_keys VALUES (?, ?, ?)", [(k, name, now) for name, k in keys.items()])
            dropped = self._drop_stale_scores(keys) if set(keys.values()) - known else 0
            self._db.commit()
        self._recorded_keys.update(keys)
        return dropped

    def _drop_stale_scores(self, keys: dict[str, str]) -> int:
        stale = [
            k
            for (k,) in self._db.execute(
                "SELECT scorer_key FROM (SELECT scorer_key, ROW_NUMBER() OVER (PARTITION BY name ORDER BY last_used DESC, scorer_key) AS age FROM scorer_keys)"
                " WHERE age > ?",
                (KEEP_SCORER_VERSIONS,),
            )
            if k not in keys.values()
        ]
        self._db.executemany("DELETE FROM scorer_keys WHERE scorer_key=?", [(k,) for k in stale])
        return self._db.execute("DELETE FROM scores WHERE scorer_key NOT IN (SELECT scorer_key FROM scorer_keys)").rowcount

    def count_scores(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
