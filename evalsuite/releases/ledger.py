"""The release ledger on disk: one SQLite file (default `reports/releases.sqlite`, beside the review queue).

Append-only: triggers refuse every UPDATE and DELETE, so what was cleared, promoted and rolled back
stays on record. The file handling (WAL, busy timeout, `BEGIN IMMEDIATE` writes, what survives a
kill, migrations) is evalsuite.sqlitefile's, shared with the review queue. Every command writes its
rows in one transaction, under one `event` id: a killed write leaves all of them or none.

Tables (schema version 2; `schema_version` holds the number):

- `decisions`: one row per (judged variant, command): `evalsuite gate` writes one per variant of the
  run it judged (kind `gate`), `evalsuite promote` one for the variant it judged (kind `promote`),
  `evalsuite recheck` one per stale clearance it judged again (kind `recheck`, for the cleared build).
  The variant's fingerprint and identity (model files' hashes), its suite block, the stage, its
  verdict (`status`), the run, the rubric and the digest of the stage's rules, the review verdicts
  that counted (waivers: accepted outputs; regressions), who ran it and from which CI job; since
  version 2 also the `environment` its outputs were computed in (the run's signature: libraries,
  python, device, driver; NULL: recorded before environments were, unknown) and, for a recheck,
  `recheck`: the decision it re-judged, what changed, and how its outputs compare with the cleared run's.
- `deployments`: one row per promotion (action `promote`) or rollback (action `rollback`): which
  variant the stage runs from then on, the decision that cleared it, the fingerprint it replaced,
  and the MLflow registry alias it moved, if any.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from ..errors import EvalsuiteError
from ..sqlitefile import BUSY_TIMEOUT_S, SqliteFile, now_iso
from ..states import VERDICT_STATUSES

SCHEMA_VERSION = 2
LEDGER_FILE = "releases.sqlite"
KINDS = ("gate", "promote", "recheck")
ACTIONS = ("promote", "rollback")
STATUSES = VERDICT_STATUSES


def _append_only(table: str) -> tuple[str, ...]:
    return tuple(
        f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} BEGIN SELECT RAISE(ABORT, 'the release ledger is append-only'); END"
        for op in ("UPDATE", "DELETE")
    )


_V1_DECISION_COLUMNS = (
    "id, event, kind, stage, variant, fingerprint, identity, spec, status, run_id, run_dir, rubric, rubric_digest, queue,"
    " waivers, regressions, failed_rules, actor, origin, created"
)

MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (
        1,
        (
            "CREATE TABLE decisions ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL,"
            " kind TEXT NOT NULL CHECK (kind IN ('gate', 'promote')), stage TEXT NOT NULL,"
            " variant TEXT NOT NULL, fingerprint TEXT NOT NULL, identity TEXT NOT NULL, spec TEXT NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('pass', 'regression', 'cannot judge', 'needs review')),"
            " run_id TEXT NOT NULL, run_dir TEXT NOT NULL, rubric TEXT NOT NULL, rubric_digest TEXT NOT NULL, queue TEXT NOT NULL,"
            " waivers TEXT NOT NULL, regressions TEXT NOT NULL, failed_rules TEXT NOT NULL,"
            " actor TEXT NOT NULL, origin TEXT NOT NULL, created TEXT NOT NULL)",
            "CREATE INDEX decisions_variant ON decisions(fingerprint, stage, id)",
            "CREATE INDEX decisions_event ON decisions(event)",
            "CREATE TABLE deployments ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL,"
            " action TEXT NOT NULL CHECK (action IN ('promote', 'rollback')), stage TEXT NOT NULL,"
            " variant TEXT NOT NULL, fingerprint TEXT NOT NULL, identity TEXT NOT NULL, spec TEXT NOT NULL,"
            " decision_id INTEGER NOT NULL REFERENCES decisions(id), replaces TEXT NOT NULL, registry TEXT NOT NULL,"
            " actor TEXT NOT NULL, origin TEXT NOT NULL, note TEXT NOT NULL, created TEXT NOT NULL)",
            "CREATE INDEX deployments_stage ON deployments(stage, id)",
            *_append_only("decisions"),
            *_append_only("deployments"),
        ),
    ),
    (
        2,
        (
            # kind `recheck`, and the environment a decision was judged in: SQLite cannot widen a CHECK in
            # place, so both tables are rebuilt with every row and id kept (deployments first: it points at
            # decisions, and dropping a table that is still pointed at fails its foreign keys)
            "CREATE TABLE decisions_v2 ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL,"
            " kind TEXT NOT NULL CHECK (kind IN ('gate', 'promote', 'recheck')), stage TEXT NOT NULL,"
            " variant TEXT NOT NULL, fingerprint TEXT NOT NULL, identity TEXT NOT NULL, spec TEXT NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('pass', 'regression', 'cannot judge', 'needs review')),"
            " run_id TEXT NOT NULL, run_dir TEXT NOT NULL, rubric TEXT NOT NULL, rubric_digest TEXT NOT NULL, queue TEXT NOT NULL,"
            " waivers TEXT NOT NULL, regressions TEXT NOT NULL, failed_rules TEXT NOT NULL,"
            " actor TEXT NOT NULL, origin TEXT NOT NULL, created TEXT NOT NULL,"
            " environment TEXT, recheck TEXT NOT NULL DEFAULT '{}')",
            f"INSERT INTO decisions_v2 ({_V1_DECISION_COLUMNS}) SELECT {_V1_DECISION_COLUMNS} FROM decisions",
            "CREATE TABLE deployments_v2 ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL,"
            " action TEXT NOT NULL CHECK (action IN ('promote', 'rollback')), stage TEXT NOT NULL,"
            " variant TEXT NOT NULL, fingerprint TEXT NOT NULL, identity TEXT NOT NULL, spec TEXT NOT NULL,"
            " decision_id INTEGER NOT NULL REFERENCES decisions_v2(id), replaces TEXT NOT NULL, registry TEXT NOT NULL,"
            " actor TEXT NOT NULL, origin TEXT NOT NULL, note TEXT NOT NULL, created TEXT NOT NULL)",
            "INSERT INTO deployments_v2 SELECT * FROM deployments",
            "DROP TABLE deployments",
            "DROP TABLE decisions",
            "ALTER TABLE decisions_v2 RENAME TO decisions",  # deployments_v2's reference follows the rename
            "ALTER TABLE deployments_v2 RENAME TO deployments",
            "CREATE INDEX decisions_variant ON decisions(fingerprint, stage, id)",
            "CREATE INDEX decisions_event ON decisions(event)",
            "CREATE INDEX deployments_stage ON deployments(stage, id)",
            *_append_only("decisions"),
            *_append_only("deployments"),
        ),
    ),
]

_JSON_FIELDS = ("identity", "spec", "waivers", "regressions", "failed_rules", "registry", "environment", "recheck")
_NULLABLE = ("environment",)  #: NULL in the file, None in the record: not known (a row written before the column existed)


class LedgerError(EvalsuiteError):
    """A problem with the release ledger, or a release step it refuses (no target, changed files...)."""


@dataclass(frozen=True)
class Decision:
    """One variant's verdict at one stage, as `gate` or `promote` judged it (a `decisions` row)."""

    kind: str  #: gate | promote
    stage: str
    variant: str  #: the variant's name in the run
    fingerprint: str  #: the variant build (evalsuite.cases.suite.Variant.fingerprint)
    identity: Mapping[str, Any]  #: its artefacts' hashes (evalsuite.releases.identity)
    spec: Mapping[str, Any]  #: its block of the resolved suite: what to deploy
    status: str  #: pass | regression | cannot judge | needs review (Verdict.variant_status)
    run_id: str
    run_dir: str
    rubric: str  #: the rubric file's path
    rubric_digest: str  #: Rubric.digest(stage) when judged
    queue: str = ""  #: the review queue whose verdicts counted ("" when none existed)
    waivers: Mapping[str, Any] = field(default_factory=dict)  #: case id -> {item, why}: accepted outputs that counted
    regressions: Mapping[str, Any] = field(default_factory=dict)  #: case id -> {item, why}: outputs a reviewer judged worse
    failed_rules: Sequence[str] = ()
    actor: str = ""  #: who ran the command
    origin: str = ""  #: the CI job that ran it (a URL), if any
    #: where its outputs were computed (the run signature's `environments` entry: libraries, python,
    #: device, driver); None: not known (decided before environments were recorded)
    environment: Mapping[str, Any] | None = None
    #: a recheck's record: {of: the decision it re-judged, cleared_run, fingerprint (the rerun's),
    #: changes (what changed in the environment), against_cleared: per variant, outputs and flips vs the cleared run}
    recheck: Mapping[str, Any] = field(default_factory=dict)
    id: int = 0  #: set when recorded
    event: str = ""  #: the command's id: every row one command wrote shares it
    created: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """A stage's variant from then on: a promotion or a rollback (a `deployments` row)."""

    action: str  #: promote | rollback
    stage: str
    variant: str
    fingerprint: str
    identity: Mapping[str, Any]
    spec: Mapping[str, Any]
    decision_id: int  #: the decision that cleared it (0: the one recorded with it)
    replaces: str = ""  #: the fingerprint the stage ran before ("" for its first)
    registry: Mapping[str, Any] = field(default_factory=dict)  #: the MLflow alias moved: {model, version, alias}
    actor: str = ""
    origin: str = ""
    note: str = ""
    id: int = 0
    event: str = ""
    created: str = ""


#: a ledger row as its record
Row = TypeVar("Row", Decision, Deployment)


def _columns(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if f.name != "id"]


def _row_values(obj: Decision | Deployment) -> list[object]:
    d = asdict(obj)
    return [_encoded(k, d[k]) for k in _columns(type(obj))]


def _encoded(key: str, value: object) -> object:
    if key not in _JSON_FIELDS or (value is None and key in _NULLABLE):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _from_row(cls: type[Row], row: sqlite3.Row) -> Row:
    d = {k: row[k] for k in row.keys()}
    for k in _JSON_FIELDS:
        if k in d and d[k] is not None:
            d[k] = json.loads(d[k])
    if "failed_rules" in d:
        d["failed_rules"] = tuple(d["failed_rules"])
    return cls(**d)


class ReleaseLedger(SqliteFile):
    """One connection to the ledger file. Cheap to open; one per process (or thread)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    MIGRATIONS = MIGRATIONS
    KIND = "release ledger"
    ERROR = LedgerError

    def __init__(self, path: str | Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S, create: bool = True, synchronous: str = "NORMAL"):
        super().__init__(path, busy_timeout_s=busy_timeout_s, create=create, synchronous=synchronous)

    def missing_message(self) -> str:
        return f"{self.path}: no release ledger here (`evalsuite gate RUN` records its decisions in one)"

    def record(
        self, decisions: Sequence[Decision] = (), deployment: Deployment | None = None, *, after: int | None = None
    ) -> tuple[list[Decision], Deployment | None]:
        """Append one command's rows in one transaction, under one event id; a deployment whose
        `decision_id` is 0 points at the last decision recorded with it. `after`: the id of the
        stage's latest deployment the change was decided on (0: none): if another promotion or
        rollback landed meanwhile, nothing is written. Returns the rows as stored."""
        for d in decisions:
            _check(d.kind in KINDS, f"kind: must be one of {', '.join(KINDS)}, got {d.kind!r}")
            _check(d.status in STATUSES, f"status: must be one of {', '.join(STATUSES)}, got {d.status!r}")
        if deployment is not None:
            _check(deployment.action in ACTIONS, f"action: must be one of {', '.join(ACTIONS)}, got {deployment.action!r}")
            _check(bool(deployment.decision_id or decisions), "a deployment needs the decision that cleared it")
        event, ts = uuid.uuid4().hex, now_iso()
        stored: list[Decision] = []
        with self.write() as db:
            if deployment is not None and after is not None:
                latest = db.execute("SELECT MAX(id) FROM deployments WHERE stage=?", (deployment.stage,)).fetchone()[0] or 0
                _check(
                    latest == after,
                    f"{deployment.stage}: another promotion or rollback (#{latest}) was recorded meanwhile; nothing written, run the command again",
                )
            for d in decisions:
                stored.append(replace(d, id=self._insert(db, "decisions", replace(d, event=event, created=ts)), event=event, created=ts))
            if deployment is not None:
                dep = replace(deployment, event=event, created=ts, decision_id=deployment.decision_id or stored[-1].id)
                deployment = replace(dep, id=self._insert(db, "deployments", dep))
        return stored, deployment

    @staticmethod
    def _insert(db: sqlite3.Connection, table: str, obj: Decision | Deployment) -> int:
        cols = _columns(type(obj))
        cur = db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", _row_values(obj))
        return int(cur.lastrowid or 0)  # an INSERT always sets it

    def decisions(self, *, fingerprint: str | None = None, stage: str | None = None, event: str | None = None) -> list[Decision]:
        """Decisions, oldest first, filtered by variant build, stage and command."""
        where, args = _where(fingerprint=fingerprint, stage=stage, event=event)
        return [_from_row(Decision, r) for r in self.db.execute(f"SELECT * FROM decisions{where} ORDER BY id", args)]

    def decision(self, decision_id: int) -> Decision:
        row = self.db.execute("SELECT * FROM decisions WHERE id=?", (int(decision_id),)).fetchone()
        if row is None:
            raise LedgerError(f"decision {decision_id}: no such decision in {self.path}")
        return _from_row(Decision, row)

    def deployments(self, *, stage: str | None = None) -> list[Deployment]:
        """Promotions and rollbacks, oldest first."""
        where, args = _where(stage=stage)
        return [_from_row(Deployment, r) for r in self.db.execute(f"SELECT * FROM deployments{where} ORDER BY id", args)]

    def counts(self) -> dict:
        """Rows per table and distinct commands (events)."""
        q = self.db.execute
        return {
            "decisions": q("SELECT COUNT(*) FROM decisions").fetchone()[0],
            "deployments": q("SELECT COUNT(*) FROM deployments").fetchone()[0],
            "events": q("SELECT COUNT(*) FROM (SELECT event FROM decisions UNION SELECT event FROM deployments)").fetchone()[0],
        }


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise LedgerError(message)


def _where(**filters: str | None) -> tuple[str, list[str]]:
    used = {k: v for k, v in filters.items() if v is not None}
    return (" WHERE " + " AND ".join(f"{k}=?" for k in used) if used else ""), list(used.values())


def open_ledger(path: str | Path, *, create: bool = True) -> ReleaseLedger:
    """An open ledger (close it, or use it as a context manager)."""
    return ReleaseLedger(path, create=create)
