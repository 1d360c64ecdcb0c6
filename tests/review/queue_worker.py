"""A reviewer process for the concurrency and crash tests (run as a script, one per process).

    python queue_worker.py QUEUE MODE NAME N START_AT [ITEM_IDS...]

claim:    N times `claim_next` then `annotate` the claimed item; prints {"claimed": [...], "errors": [...]}
annotate: annotate each item id once, in a shuffled order; prints {"written": [[verdict id, item, verdict]...], "errors": [...]}
crash:    annotate item ids round-robin, and flag batches of new items, forever; after each commit
          prints "v <verdict id> <item> <verdict>" or "i <first id> <count>" (flushed) for the parent to check
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evalsuite.review.store import VERDICTS, NewItem, ReviewStore  # noqa: E402


def pick(name: str, iid: int, final: bool = False) -> str:
    """A verdict that depends on the reviewer and item; `final`: never `unsure` (which reopens the item)."""
    return VERDICTS[(sum(map(ord, name)) + iid) % (2 if final else 3)]


def main() -> None:
    queue, mode, name, n, start_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    ids = [int(x) for x in sys.argv[6:]]
    q = ReviewStore(queue)
    while time.time() < start_at:  # start together: the point is contention
        time.sleep(0.005)
    errors: list[str] = []
    if mode == "claim":
        claimed = []
        for _ in range(n):
            try:
                iid = q.claim_next(name, lease_s=600)
                if iid is None:
                    break
                claimed.append(iid)
                q.annotate(iid, pick(name, iid, final=True), name, f"{name} on {iid}")
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on any
                errors.append(f"{type(exc).__name__}: {exc}")
        print(json.dumps({"claimed": claimed, "errors": errors}))
    elif mode == "annotate":
        written = []
        order = list(ids)
        random.Random(name).shuffle(order)
        for iid in order:
            try:
                row = q.annotate(iid, pick(name, iid), name)
                written.append([row["id"], iid, row["verdict"]])
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")
        print(json.dumps({"written": written, "errors": errors}))
    elif mode == "crash":
        k = 0
        while True:
            k += 1
            if k % 7 == 0:
                batch = [NewItem(run_id=f"run-{k}", variant="opt", fingerprint="fp", case_id=f"case-{k}-{j}", scenario="kb_qa", kind="k", baseline="base", reasons=({"code": "flip"},), baseline_output="b", variant_output=f"text {k} {j} " * 20) for j in range(50)]
                res = q.add_items(batch)
                print(f"i {res.added[0]} {len(res.added)}", flush=True)
            iid = ids[k % len(ids)]
            row = q.annotate(iid, pick(name, k), name, "x" * 200)
            print(f"v {row['id']} {iid} {row['verdict']}", flush=True)


if __name__ == "__main__":
    main()
