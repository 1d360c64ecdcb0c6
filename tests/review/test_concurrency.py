"""Several reviewers at once lose nothing; a killed writer leaves a consistent queue with every commit kept."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evalsuite.review.store import NewItem, ReviewStore

WORKER = Path(__file__).with_name("queue_worker.py")
N_PROC, PER_PROC = 8, 200


def items(n: int, run: str = "run-1") -> list[NewItem]:
    return [NewItem(run_id=run, variant="opt", fingerprint="fp-opt", case_id=f"case-{i:04d}", scenario="kb_qa", kind="grounded", baseline="base", reasons=({"code": "flip", "metric": "m", "message": "", "detail": {}},),
                    baseline_output="baseline text", variant_output=f"variant text {i}") for i in range(n)]


def spawn(queue: Path, mode: str, n: int, ids=(), names=None) -> list[dict]:
    start_at = time.time() + 1.5  # every worker imported and connected before the first write
    names = names or [f"reviewer-{k}" for k in range(N_PROC)]
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(queue), mode, name, str(n), str(start_at), *map(str, ids)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in names]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=240)
        assert p.returncode == 0, se
        assert "database is locked" not in se
        out.append(json.loads(so))
    return out


@pytest.mark.slow  # 8 processes × 200 items, about 50 s: `make test-slow` (and .ci/run) runs it
def test_eight_reviewers_claiming_and_annotating_200_items_each(tmp_path):
    queue = tmp_path / "q.sqlite"
    with ReviewStore(queue) as q:
        assert len(q.add_items(items(N_PROC * PER_PROC)).added) == N_PROC * PER_PROC
    results = spawn(queue, "claim", PER_PROC)
    assert all(r["errors"] == [] for r in results)  # no 'database is locked' (or anything else) surfaced
    claimed = [iid for r in results for iid in r["claimed"]]
    assert [len(r["claimed"]) for r in results] == [PER_PROC] * N_PROC
    assert len(claimed) == len(set(claimed)) == N_PROC * PER_PROC  # no item claimed twice
    with ReviewStore(queue) as q:
        assert q.integrity() == "ok"
        assert q.counts()["verdict_rows"] == N_PROC * PER_PROC
        per_item = Counter(r[0] for r in q.db.execute("SELECT item_id FROM verdicts"))
        assert set(per_item.values()) == {1}
        owner = {iid: f"reviewer-{k}" for k, r in enumerate(results) for iid in r["claimed"]}
        rows = q.items(status=None)
        assert all(r["reviewer"] == owner[r["id"]] and r["note"] == f"{owner[r['id']]} on {r['id']}" for r in rows)
        assert q.items(status="open") == [] and q.counts()["claimed"] == 0


def test_eight_reviewers_annotating_the_same_items_keep_every_verdict_and_one_latest(tmp_path):
    n = 60  # every item gets 8 verdicts, in a different order per reviewer
    queue = tmp_path / "q.sqlite"
    with ReviewStore(queue) as q:
        ids = q.add_items(items(n)).added
    results = spawn(queue, "annotate", 0, ids)
    assert all(r["errors"] == [] for r in results)
    written = [tuple(w) for r in results for w in r["written"]]
    assert len(written) == N_PROC * n == len({w[0] for w in written})
    with ReviewStore(queue) as q:
        assert q.integrity() == "ok"
        rows = q.db.execute("SELECT id, item_id, verdict FROM verdicts ORDER BY id").fetchall()
        assert len(rows) == N_PROC * n and sorted(tuple(r) for r in rows) == sorted(written)  # every reported commit is there, nothing else
        latest = {}
        for vid, iid, verdict in rows:
            latest[iid] = verdict  # ordered by id: the last one wins
        current = {r["id"]: r["verdict"] for r in q.items(status=None)}
        mirrored = dict(q.db.execute("SELECT id, current_verdict FROM items").fetchall())
        assert current == latest == mirrored and all(n == N_PROC for n in Counter(r[1] for r in rows).values())
        keyed = q.latest_by_key([it.key for it in items(n)])
        assert {v["id"]: v["verdict"] for v in keyed.values()} == latest


@pytest.mark.parametrize("seed", [1, 2])
def test_a_writer_killed_at_a_random_moment_loses_nothing_committed(tmp_path, seed):
    queue = tmp_path / "q.sqlite"
    with ReviewStore(queue) as q:
        ids = q.add_items(items(20)).added
    proc = subprocess.Popen([sys.executable, str(WORKER), str(queue), "crash", "killed", "0", "0", *map(str, ids)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rng = random.Random(seed)
    want = rng.randint(30, 150)
    reported: list[str] = []
    while len(reported) < want:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        reported.append(line.split())
    time.sleep(rng.random() * 0.05)  # land somewhere inside a later transaction
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reported += [line.split() for line in proc.stdout.read().splitlines() if line.strip()]
    with ReviewStore(queue) as q:
        assert q.integrity() == "ok"
        verdicts = {r[0]: (r[1], r[2]) for r in q.db.execute("SELECT id, item_id, verdict FROM verdicts")}
        for kind, a, b, *rest in reported:
            if kind == "v":  # every verdict reported as committed is there, as written
                assert verdicts[int(a)] == (int(b), rest[0])
            else:  # every flagged batch reported is there, whole
                assert q.db.execute("SELECT COUNT(*) FROM items WHERE id BETWEEN ? AND ?", (int(a), int(a) + int(b) - 1)).fetchone()[0] == int(b)
        n_items = q.counts()["items"]
        assert (n_items - 20) % 50 == 0  # no batch half-written
        assert sorted(verdicts) == list(range(1, len(verdicts) + 1))  # no gap, no partial row
        q.annotate(ids[0], "acceptable", "after")  # still writable
