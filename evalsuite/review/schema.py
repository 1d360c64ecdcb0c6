"""The queue file's tables, their migrations, and the SQL that says which items are open.

Schema version 3 (older files are migrated in place when opened; stored fixtures of versions 1 and 2
are read by the tests):

- `items`: one row per distinct flagged (or audited) output, unique on `item_key` = sha256 of (case
  id, variant fingerprint, output hash). Beside the outputs and scores: the item's `context` (what
  was asked, the documents, expectations, checks: JSON), how it is reviewed (`mode` anchors or
  pairwise with its blind `left_side`, `reviews_needed`), triage (`priority`, `triage` knife-edge or
  substantive, the baseline's logit `margin`), `audit` (queued at random from the unflagged
  outputs), the `rubric_digest` it was last flagged under, and mirrors of its settled state
  (`current_verdict`, `current_row`, `waiver_until`, `waiver_rubric`), written in the same
  transaction as the history so that finding open items is an index lookup.
- `sightings`: (item, run) pairs: every run in which the item's exact output was flagged.
- `verdicts`: the append-only history. A row is a reviewer's verdict (`role` review), an
  adjudicator's (`role` adjudication, which settles a disputed double review), or the retraction of
  an earlier row (`role` retraction, verdict `retracted`, `retracts` its id): undo never deletes.
  An `acceptable` row may carry an expiry (`expires`, a UTC time, or `expires_rubric`, the digest of
  the rubric it holds under); a blind pairwise answer keeps its raw `answer` and the `left_side` shown.
- `claims`: at most one live claim per item (`review next`), with an expiry time (a lease).
- `skips`: (item, reviewer) -> until: a skipped item goes behind the others for that reviewer.
- `audits`: per (run, variant): how many unflagged outputs differed from the baseline's (the
  population), how many were queued at random, at which rate and seed.
"""

from __future__ import annotations

SCHEMA_VERSION = 3

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
    (
        3,
        (
            # the verdict table gains roles (retraction, adjudication), expiries and blind answers: SQLite
            # cannot widen a CHECK constraint in place, so the table is rebuilt with every row and id kept
            "CREATE TABLE verdicts_v3 ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " item_id INTEGER NOT NULL REFERENCES items(id),"
            " verdict TEXT NOT NULL CHECK (verdict IN ('acceptable', 'regression', 'unsure', 'retracted')),"
            " reviewer TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', created TEXT NOT NULL,"
            " role TEXT NOT NULL DEFAULT 'review' CHECK (role IN ('review', 'adjudication', 'retraction')),"
            " retracts INTEGER, expires TEXT, expires_rubric TEXT, answer TEXT, left_side TEXT,"
            " CHECK ((role = 'retraction') = (verdict = 'retracted')), CHECK ((role = 'retraction') = (retracts IS NOT NULL)))",
            "INSERT INTO verdicts_v3 (id, item_id, verdict, reviewer, note, created) SELECT id, item_id, verdict, reviewer, note, created FROM verdicts",
            "DROP TABLE verdicts",
            "ALTER TABLE verdicts_v3 RENAME TO verdicts",
            "CREATE INDEX verdicts_item ON verdicts(item_id, id)",
            "CREATE INDEX verdicts_reviewer ON verdicts(reviewer, id)",
            "CREATE INDEX verdicts_retracts ON verdicts(retracts)",
            "ALTER TABLE items ADD COLUMN current_row INTEGER",
            "UPDATE items SET current_row=(SELECT MAX(id) FROM verdicts v WHERE v.item_id=items.id)",
            "ALTER TABLE items ADD COLUMN context TEXT",
            "ALTER TABLE items ADD COLUMN reviews_needed INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE items ADD COLUMN mode TEXT NOT NULL DEFAULT 'anchors'",
            "ALTER TABLE items ADD COLUMN left_side TEXT",
            "ALTER TABLE items ADD COLUMN priority REAL NOT NULL DEFAULT 0",
            "ALTER TABLE items ADD COLUMN triage TEXT",
            "ALTER TABLE items ADD COLUMN margin REAL",
            "ALTER TABLE items ADD COLUMN audit INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE items ADD COLUMN rubric_digest TEXT",
            "ALTER TABLE items ADD COLUMN waiver_until TEXT",
            "ALTER TABLE items ADD COLUMN waiver_rubric TEXT",
            "CREATE INDEX items_triage ON items(current_verdict, priority DESC, id)",
            "CREATE TABLE skips (item_id INTEGER NOT NULL REFERENCES items(id), reviewer TEXT NOT NULL, until REAL NOT NULL, PRIMARY KEY (item_id, reviewer))",
            "CREATE TABLE audits (run_id TEXT NOT NULL, variant TEXT NOT NULL, population INTEGER NOT NULL, sampled INTEGER NOT NULL,"
            " rate REAL NOT NULL, seed INTEGER NOT NULL, created TEXT NOT NULL, PRIMARY KEY (run_id, variant))",
        ),
    ),
]

#: an `acceptable` whose waiver has lapsed by the time bound to the one `?` (ISO 8601, UTC), or whose
#: rubric changed since (the item was flagged again under another rubric)
EXPIRED_SQL = (
    "(i.current_verdict='acceptable' AND ((i.waiver_until IS NOT NULL AND i.waiver_until <= ?)"
    " OR (i.waiver_rubric IS NOT NULL AND i.rubric_digest IS NOT NULL AND i.waiver_rubric != i.rubric_digest)))"
)
#: open: never reviewed, unsure, a double review waiting for its second verdict, disputed, or a lapsed waiver (one `?`: now)
OPEN_SQL = "(i.current_verdict IS NULL OR i.current_verdict IN ('unsure', 'pending', 'disputed') OR " + EXPIRED_SQL + ")"
#: a row that still stands: not a retraction and not retracted
STANDING_SQL = "v.role != 'retraction' AND NOT EXISTS (SELECT 1 FROM verdicts r WHERE r.retracts = v.id)"
#: the reviewer bound to the one `?` has a standing review of the item, so it waits for someone else
#: when it is still open (unsure, pending its second independent review, or disputed)
ANSWERED_SQL = (
    "(i.current_verdict IN ('unsure', 'pending', 'disputed') AND EXISTS (SELECT 1 FROM verdicts v WHERE v.item_id = i.id AND v.reviewer = ?"
    " AND v.role = 'review' AND " + STANDING_SQL + "))"
)
#: an item with what a reviewer needs beside it; one `?` (now) for `waiver_expired`
ITEM_SQL = (
    "SELECT i.*, i.current_verdict AS verdict, lv.reviewer AS reviewer, lv.note AS note, lv.created AS verdict_time, lv.role AS verdict_role,"
    " lv.expires AS waiver_expires, " + EXPIRED_SQL + " AS waiver_expired,"
    " (SELECT COUNT(*) FROM verdicts v WHERE v.item_id=i.id AND v.role != 'retraction') AS n_verdicts,"
    " (SELECT COUNT(*) FROM sightings s WHERE s.item_id=i.id) AS n_runs,"
    " c.reviewer AS claimed_by, c.expires AS claim_expires"
    " FROM items i LEFT JOIN verdicts lv ON lv.id = i.current_row LEFT JOIN claims c ON c.item_id = i.id"
)
HISTORY_COLUMNS = "id, item_id, verdict, reviewer, note, created, role, retracts, expires, expires_rubric, answer, left_side"
