"""The ledger file: schema version, append-only, one transaction per command, the stored v1 fixture."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evalsuite.releases.ledger import SCHEMA_VERSION, Decision, Deployment, LedgerError, ReleaseLedger

FIXTURE = Path(__file__).parent / "fixtures" / "ledger-v1.sql"


def decision(stage="dev", status="pass", variant="v", fp="f1", **kw) -> Decision:
    base = dict(identity={"fingerprint": fp, "backend": "fake", "artefacts": {}}, spec={"name": variant}, run_id="run-1", run_dir="/runs/run-1",
                rubric="r.yaml", rubric_digest="d1", actor="ci")
    return Decision(kind=kw.pop("kind", "gate"), stage=stage, variant=variant, fingerprint=fp, status=status, **{**base, **kw})


def deployment(variant="v", fp="f1", action="promote", stage="production", decision_id=1, **kw) -> Deployment:
    return Deployment(action=action, stage=stage, variant=variant, fingerprint=fp, identity={"fingerprint": fp}, spec={"name": variant}, decision_id=decision_id, **kw)


def test_a_new_ledger_has_the_schema_and_refuses_updates_and_deletes(tmp_path):
    with ReleaseLedger(tmp_path / "l.sqlite") as led:
        assert led.schema_version == SCHEMA_VERSION == 2 and led.integrity() == "ok"
        assert led.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        stored, dep = led.record([decision()], deployment(decision_id=0))
        for sql in ("UPDATE decisions SET status='regression'", "DELETE FROM decisions", "DELETE FROM deployments", "UPDATE deployments SET note='x'"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                led.db.execute(sql)
        assert led.decisions() == stored and led.deployments() == [dep]


def test_one_command_is_one_event_and_a_deployment_points_at_its_decision(tmp_path):
    with ReleaseLedger(tmp_path / "l.sqlite") as led:
        gate_rows, _ = led.record([decision(variant="a", fp="fa"), decision(variant="b", fp="fb")])
        rows, dep = led.record([decision(kind="promote", stage="pilot", variant="a", fp="fa")], deployment("a", "fa", stage="pilot", decision_id=0))
        assert len({d.event for d in gate_rows}) == 1 and gate_rows[0].event != rows[0].event
        assert dep.decision_id == rows[0].id == 3 and dep.event == rows[0].event and dep.created == rows[0].created
        assert led.decisions(fingerprint="fa") == [gate_rows[0], rows[0]] and led.deployments(stage="pilot") == [dep]
        assert led.counts() == {"decisions": 3, "deployments": 1, "events": 2}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([decision(kind="deploy")],), "kind: must be one of gate, promote"),
        (([decision(status="ok")],), "status: must be one of pass, regression"),
        (((), deployment(action="revert")), "action: must be one of promote, rollback"),
        (((), deployment(decision_id=0)), "a deployment needs the decision that cleared it"),
    ],
)
def test_a_malformed_row_is_refused_before_anything_is_written(tmp_path, args, message):
    with ReleaseLedger(tmp_path / "l.sqlite") as led:
        with pytest.raises(LedgerError, match=message):
            led.record(*args)
        assert led.counts()["events"] == 0


def test_a_deployment_decided_on_a_stale_view_writes_nothing(tmp_path):
    with ReleaseLedger(tmp_path / "l.sqlite") as led:
        led.record([decision()], deployment(decision_id=0), after=0)
        with pytest.raises(LedgerError, match=r"another promotion or rollback \(#1\) was recorded meanwhile"):
            led.record([decision(variant="w", fp="f2")], deployment("w", "f2", decision_id=0), after=0)
        assert led.counts() == {"decisions": 1, "deployments": 1, "events": 1}


def test_a_newer_schema_is_refused_and_a_missing_file_named(tmp_path):
    path = tmp_path / "l.sqlite"
    ReleaseLedger(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_version VALUES (9, 'later')")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="release ledger schema version 9 is newer than this evalsuite"):
        ReleaseLedger(path)
    with pytest.raises(LedgerError, match="no release ledger here"):
        ReleaseLedger(tmp_path / "none.sqlite", create=False)


def test_the_stored_v1_ledger_reads(tmp_path):
    path = tmp_path / "v1.sqlite"
    db = sqlite3.connect(path)
    db.executescript(FIXTURE.read_text("utf-8"))
    db.close()
    with ReleaseLedger(path, create=False) as led:  # migrated to version 2 on opening, every row and id kept
        assert led.schema_version == 2 and led.integrity() == "ok"
        assert led.db.execute("PRAGMA foreign_key_check").fetchall() == []
        d = led.decisions()
        assert [(x.kind, x.stage, x.status) for x in d] == [("gate", "dev", "pass"), ("gate", "pilot", "regression"), ("promote", "pilot", "pass")]
        assert d[1].failed_rules == ("kb-citation-recall",) and d[2].waivers["kb-004"]["item"] == 7
        assert d[0].identity["artefacts"]["model"]["files"] == 3 and d[0].spec["quantization"] == {"method": "bnb", "bits": 8}
        assert [(x.environment, x.recheck) for x in d] == [(None, {})] * 3  # recorded before environments: unknown
        (dep,) = led.deployments()
        assert (dep.action, dep.stage, dep.decision_id) == ("promote", "pilot", 3)
        led.record([decision(kind="recheck", environment={"libraries": {"torch": "2.13.0"}}, recheck={"of": 3})])  # still writable, ids continue
        new = led.decisions()[-1]
        assert (new.id, new.kind, new.environment, new.recheck) == (4, "recheck", {"libraries": {"torch": "2.13.0"}}, {"of": 3})
        for sql in ("UPDATE decisions SET status='regression'", "DELETE FROM deployments"):  # still append-only
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                led.db.execute(sql)
        with pytest.raises(sqlite3.IntegrityError):  # and a deployment still needs its decision
            led.db.execute("INSERT INTO deployments (event, action, stage, variant, fingerprint, identity, spec, decision_id, replaces, registry, actor, origin, note, created)"
                           " VALUES ('e', 'promote', 'dev', 'v', 'f', '{}', '{}', 99, '', '{}', 'a', '', '', 'now')")


def test_the_stored_v2_ledger_reads_with_its_environments_and_recheck(tmp_path):
    from evalsuite.releases.environment import check_environment

    path = tmp_path / "v2.sqlite"
    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "fixtures" / "ledger-v2.sql").read_text("utf-8"))
    db.close()
    with ReleaseLedger(path, create=False) as led:
        assert led.schema_version == 2 and led.integrity() == "ok"
        d = led.decisions()
        assert [(x.kind, x.stage, x.status) for x in d][3:] == [("gate", "production", "pass"), ("recheck", "production", "pass")]
        assert [x.environment for x in d[:3]] == [None] * 3  # migrated from version 1: unknown
        gate, recheck = d[3], d[4]
        assert recheck.recheck["of"] == gate.id and recheck.recheck["changes"] == ["transformers 5.24.0 → 5.25.0"]
        assert check_environment(gate.environment, recheck.environment).changes == ("transformers 5.24.0 → 5.25.0",)
        assert check_environment(recheck.environment, recheck.environment).state == "fresh"
