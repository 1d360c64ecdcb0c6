"""Eight `gate` processes writing one ledger lose no decision; a write killed mid-transaction leaves
the ledger consistent, with every committed command whole and the killed one absent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evalsuite.releases.ledger import ReleaseLedger
from evalsuite.report.releases import ledger_status

WORKER = Path(__file__).with_name("ledger_worker.py")
N_PROC, TIMES = 8, 2
STAGES = ("dev", "pilot", "production")
VARIANTS = 4  # good-a, good-b, tweak, bad


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def test_eight_gate_processes_writing_one_ledger_lose_no_decision(release_run, tmp_path):
    ledger, go = tmp_path / "releases.sqlite", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "gate", str(ledger), str(release_run["runs_dir"]), release_run["store"].run_id, STAGES[k % 3], str(TIMES), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        )
        for k in range(N_PROC)
    ]
    for p in procs:  # every worker has imported evalsuite and waits: then all start at once
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.touch()
    results = []
    for p in procs:
        so, se = p.communicate(timeout=600)
        assert p.returncode == 0, se
        assert "database is locked" not in se
        results.append(json.loads(so.splitlines()[-1]))
    assert all(r["errors"] == [] for r in results), results
    for k, r in enumerate(results):  # bad regresses at pilot and production, not at dev (where the rule warns)
        assert r["exit_codes"] == [0 if STAGES[k % 3] == "dev" else 1] * TIMES
    with ReleaseLedger(ledger, create=False) as led:
        assert led.integrity() == "ok"
        assert led.counts() == {"decisions": N_PROC * TIMES * VARIANTS, "deployments": 0, "events": N_PROC * TIMES}
        rows = led.decisions()
        assert set(Counter(d.event for d in rows).values()) == {VARIANTS}  # every gate whole
        assert [d.id for d in rows] == list(range(1, len(rows) + 1))  # no gap
        by_stage = Counter(d.stage for d in rows)
        assert by_stage == {s: VARIANTS * TIMES * sum(1 for k in range(N_PROC) if STAGES[k % 3] == s) for s in STAGES}
    status = ledger_status(ledger)
    assert {(c.variant, c.stage) for c in status.cleared()} == {(v, s) for v in ("good-a", "good-b", "tweak") for s in STAGES} | {("bad", "dev")}


@pytest.mark.parametrize("mode", ["kill-gate", "kill-promote"])
def test_a_write_killed_mid_transaction_leaves_the_ledger_consistent(release_run, tmp_path, mode):
    ledger = tmp_path / "releases.sqlite"
    proc = subprocess.run(
        [sys.executable, str(WORKER), mode, str(ledger), str(release_run["runs_dir"]), release_run["store"].run_id],
        capture_output=True, text=True, env=env(), timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    committed = proc.stdout.split()[1]
    with ReleaseLedger(ledger, create=False) as led:
        assert led.integrity() == "ok"
        rows = led.decisions()
        assert {d.event for d in rows} == {committed} and len(rows) == VARIANTS  # the killed command left nothing
        assert led.deployments() == []  # a promotion is never half-recorded (a decision without its deployment)
        led.record(rows[:1])  # still writable
    assert {c.variant for c in ledger_status(ledger).cleared("dev")} == {"good-a", "good-b", "tweak", "bad"}
