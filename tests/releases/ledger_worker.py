"""A process writing the release ledger, for the concurrency and kill tests (run as a script).

    python ledger_worker.py gate LEDGER RUNS_DIR RUN STAGE TIMES GO_FILE
        imports the command line, prints "ready", waits for GO_FILE to exist (every worker ready: the
        point is contention), then runs `evalsuite gate RUN --stage STAGE --ledger LEDGER` TIMES
        times; prints one JSON line {"exit_codes": [...], "errors": [...]}
    python ledger_worker.py kill-gate LEDGER RUNS_DIR RUN
        records one gate of RUN, then dies (SIGKILL) inside the next gate's transaction, after its
        second row; prints "committed <event>" after the first
    python ledger_worker.py kill-promote LEDGER RUNS_DIR RUN
        records a dev gate, then promotes good-a to pilot and dies (SIGKILL) between the promotion's
        decision row and its deployment row
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evalsuite.cli import app  # noqa: E402
from evalsuite.releases.ledger import ReleaseLedger  # noqa: E402


def gate_loop(ledger: str, runs_dir: str, run: str, stage: str, times: int, go: Path) -> None:
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.002)
    codes, errors = [], []
    for _ in range(times):
        out = io.StringIO()
        try:
            with redirect_stdout(out):  # not standalone: the command's exit code is returned
                codes.append(int(app(["gate", run, "--stage", stage, "--ledger", ledger, "--runs-dir", runs_dir], standalone_mode=False) or 0))
        except Exception as exc:  # noqa: BLE001 - the test fails on any
            codes.append(-1)
            errors.append(f"{type(exc).__name__}: {exc}")
        if "ledger: " not in out.getvalue():
            errors.append("no ledger line: " + out.getvalue()[-300:])
    print(json.dumps({"exit_codes": codes, "errors": errors}))


def die_on(table: str, nth: int) -> None:
    """SIGKILL this process when it is about to insert its nth row into `table` (counted from now)."""
    real = ReleaseLedger._insert
    seen = {"n": 0}

    def insert(db, tbl, obj):
        if tbl == table:
            seen["n"] += 1
            if seen["n"] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(db, tbl, obj)

    ReleaseLedger._insert = staticmethod(insert)


def main() -> None:
    mode, ledger, runs_dir, run = sys.argv[1:5]
    if mode == "gate":
        gate_loop(ledger, runs_dir, run, sys.argv[5], int(sys.argv[6]), Path(sys.argv[7]))
        return
    from evalsuite.judge import judge_run
    from evalsuite.promotion import PromoteRequest, promote
    from evalsuite.releases import record_gate
    from evalsuite.run.store import RunStore

    store = RunStore.find(runs_dir, run)
    rows = record_gate(judge_run(store, None, "dev"), ledger)
    print(f"committed {rows[0].event}", flush=True)
    if mode == "kill-gate":
        die_on("decisions", 3)  # the next gate's third row: two are written, in an open transaction
        record_gate(judge_run(store, None, "dev"), ledger)
    else:
        die_on("deployments", 1)  # after the promotion's decision row, before its deployment row
        promote(PromoteRequest(variant="good-a", stage="pilot", run=run, runs_dir=Path(runs_dir), ledger=Path(ledger)))
    print("survived", flush=True)


if __name__ == "__main__":
    main()
