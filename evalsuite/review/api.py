"""The one library path to the review queue: the CLI, the notebook, the gate and the tests all call these.

`queue` arguments take a path (default: `reports/review.sqlite`, or `$EVALSUITE_REVIEW_QUEUE`) or an
open ReviewStore; a reviewer defaults to `$EVALSUITE_REVIEWER`, else the login name.
"""

from __future__ import annotations

import getpass
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verdict.decisions import ReviewDecisions
from .policy import DEFAULT_POLICY, ReviewPolicy, flag_comparison
from .store import DEFAULT_LEASE_S, DEFAULT_QUEUE, QueueError, ReviewStore, item_key, output_hash

EXPORT_COLUMNS = (
    "id",
    "run_id",
    "variant",
    "case_id",
    "scenario",
    "kind",
    "reason_codes",
    "verdict",
    "reviewer",
    "note",
    "verdict_time",
    "n_verdicts",
    "n_runs",
    "fingerprint",
    "output_hash",
    "baseline_output",
    "variant_output",
    "created",
)


def default_queue_path(store: Any = None, *, runs_dir: str | Path | None = None) -> Path:
    """`$EVALSUITE_REVIEW_QUEUE`, else `review.sqlite` beside the runs folder (reports/review.sqlite)."""
    env = os.environ.get("EVALSUITE_REVIEW_QUEUE")
    if env:
        return Path(env)
    if store is not None:
        return Path(store.dir).parent.parent / "review.sqlite"
    if runs_dir is not None:
        return Path(runs_dir).parent / "review.sqlite"
    return DEFAULT_QUEUE


def default_reviewer() -> str:
    env = os.environ.get("EVALSUITE_REVIEWER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        return "reviewer"


@contextmanager
def _open(queue: str | Path | ReviewStore | None, create: bool = True) -> Iterator[ReviewStore]:
    if isinstance(queue, ReviewStore):
        yield queue
        return
    q = ReviewStore(queue or default_queue_path(), create=create)
    try:
        yield q
    finally:
        q.close()


def open_queue(queue: str | Path | None = None, *, create: bool = True) -> ReviewStore:
    """An open queue (close it, or use it as a context manager)."""
    return ReviewStore(queue or default_queue_path(), create=create)


# ---------------------------------------------------------------------------------------------
# flagging


@dataclass(frozen=True)
class FlagResult:
    """What `flag_run` did."""

    run_id: str
    queue: str
    flagged: int  #: outputs the policy flagged in this run
    added: tuple[int, ...]  #: new items
    existing: tuple[int, ...]  #: already queued (identical output): sighting recorded only
    open: int  #: this run's flagged outputs still awaiting a verdict (new or old)
    reasons: Mapping[str, int] = field(default_factory=dict)  #: reason code -> flagged outputs

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "queue": self.queue,
            "flagged": self.flagged,
            "added": list(self.added),
            "existing": list(self.existing),
            "open": self.open,
            "reasons": dict(self.reasons),
        }


def flag(
    cmp: Any,
    *,
    records: Sequence[Any] = (),
    fingerprints: Mapping[str, str] | None = None,
    policy: ReviewPolicy = DEFAULT_POLICY,
    queue: str | Path | ReviewStore | None = None,
) -> FlagResult:
    """Flag a comparison's differences into the queue (pure policy, then one write transaction)."""
    items = flag_comparison(cmp, policy, records=records, fingerprints=fingerprints)
    with _open(queue) as q:
        res = q.add_items(items)
        ids = list(res.added) + list(res.existing)
        n_open = len(q.items(status="open", ids=ids)) if ids else 0
        path = str(q.path)
    reasons = Counter(code for it in items for code in {r["code"] for r in it.reasons})
    return FlagResult(cmp.run_id, path, len(items), res.added, res.existing, n_open, dict(sorted(reasons.items())))


def _run_store(run: Any, runs_dir: str | Path):
    from ..run.store import RunStore

    return run if hasattr(run, "dir") and hasattr(run, "scores") else RunStore.find(runs_dir, str(run))


def _policy(store: Any, rubric: Any) -> ReviewPolicy:
    from ..verdict.rubric import Rubric, load_rubric, resolve_rubric_path

    if isinstance(rubric, ReviewPolicy):
        return rubric
    if not isinstance(rubric, Rubric):
        rubric = load_rubric(resolve_rubric_path(rubric, store.suite))
    return rubric.review or DEFAULT_POLICY


def flag_run(
    run: Any, *, runs_dir: str | Path = "reports/runs", queue: str | Path | ReviewStore | None = None, rubric: Any = None, cmp: Any = None
) -> FlagResult:
    """`evalsuite review flag RUN`: compare a stored run and flag its differences (policy from the rubric's `review:`)."""
    from ..verdict.compare import compare_run

    store = _run_store(run, runs_dir)
    cmp = cmp if cmp is not None else compare_run(store)
    return flag(
        cmp,
        records=store.scores(),
        fingerprints=(store.signature or {}).get("variants") or {},
        policy=_policy(store, rubric),
        queue=queue if queue is not None else default_queue_path(store),
    )


# ---------------------------------------------------------------------------------------------
# the gate's view


def decisions(cmp: Any, fingerprints: Mapping[str, str], queue: str | Path | ReviewStore | None = None, max_open: int | None = None) -> ReviewDecisions:
    """The queue's current verdicts on this comparison's outputs (matched by item key, so a verdict
    given in an earlier run applies to the identical output now)."""
    keys: dict[str, tuple[str, str]] = {}
    for (variant, case), text in cmp.outputs.items():
        if variant in cmp.variants:
            keys[item_key(case, fingerprints.get(variant) or f"name:{variant}", output_hash(text))] = (variant, case)
    accepted: dict[str, dict[str, str]] = {}
    regressions: dict[str, dict[str, str]] = {}
    open_items: dict[str, list[int]] = {}
    with _open(queue) as q:
        latest = q.latest_by_key(keys)
        source = str(q.path)
    for key, row in latest.items():
        variant, case = keys[key]
        why = f"item #{row['id']}, {row['reviewer']}: {row['note'] or '(no note)'}"
        if row["verdict"] == "acceptable":
            accepted.setdefault(variant, {})[case] = why
        elif row["verdict"] == "regression":
            regressions.setdefault(variant, {})[case] = why
        else:
            open_items.setdefault(variant, []).append(int(row["id"]))
    return ReviewDecisions(accepted, regressions, {v: tuple(sorted(ids)) for v, ids in open_items.items()}, max_open, source)


def review_decisions(store: Any, cmp: Any, policy: ReviewPolicy | None, queue: str | Path | ReviewStore | None = None) -> ReviewDecisions:
    """What the gate needs from the queue for a stored run's comparison (`policy.max_open` sets when
    open items mean "needs review")."""
    max_open = (policy or DEFAULT_POLICY).max_open
    return decisions(cmp, (store.signature or {}).get("variants") or {}, queue if queue is not None else default_queue_path(store), max_open)


# ---------------------------------------------------------------------------------------------
# reviewing


def list_items(
    queue: str | Path | ReviewStore | None = None, *, status: str | None = "open", run: str | None = None, variant: str | None = None, limit: int | None = None
) -> list[dict]:
    """Items with their current verdict (status: open, reviewed, all, acceptable, regression, unsure)."""
    with _open(queue, create=False) as q:
        return q.items(status=status, run_id=run, variant=variant, limit=limit)


def show(item_id: int, queue: str | Path | ReviewStore | None = None) -> dict:
    """One item: outputs, scores, reasons, current verdict, the whole verdict history, runs, claim."""
    with _open(queue, create=False) as q:
        d = q.item(item_id)
        d["history"] = q.history(item_id)
        d["sightings"] = q.sightings(item_id)
        d["claim"] = q.claim(item_id)
    return d


def annotate(item_id: int, verdict: str, *, note: str = "", reviewer: str | None = None, queue: str | Path | ReviewStore | None = None) -> dict:
    """Record a verdict (appended to the item's history); the notebook's buttons call this."""
    with _open(queue, create=False) as q:
        return q.annotate(int(item_id), verdict, reviewer or default_reviewer(), note)


def next_item(reviewer: str | None = None, *, lease_s: float = DEFAULT_LEASE_S, queue: str | Path | ReviewStore | None = None) -> dict | None:
    """Claim the next open item for this reviewer (a lease of `lease_s` seconds); None when done."""
    with _open(queue, create=False) as q:
        iid = q.claim_next(reviewer or default_reviewer(), lease_s)
        return None if iid is None else q.item(iid)


def release(item_id: int, reviewer: str | None = None, queue: str | Path | ReviewStore | None = None) -> bool:
    with _open(queue, create=False) as q:
        return q.release(int(item_id), reviewer or default_reviewer())


def stats(queue: str | Path | ReviewStore | None = None) -> dict:
    """Counts: items, verdict rows, current verdicts, open, live claims; per variant and reason."""
    with _open(queue, create=False) as q:
        out = q.counts()
        rows = q.items(status=None)
    by_variant: dict[str, Counter] = {}
    reasons: Counter = Counter()
    for r in rows:
        by_variant.setdefault(r["variant"], Counter())[r["verdict"] or "open"] += 1
        reasons.update(r["reason_codes"])
    out["by_variant"] = {v: dict(c) for v, c in sorted(by_variant.items())}
    out["by_reason"] = dict(sorted(reasons.items()))
    return out


def dataframe(queue: str | Path | ReviewStore | None = None, *, status: str | None = None, run: str | None = None):
    """The queue as a pandas DataFrame, one row per item (the notebook's table, the export's rows)."""
    import pandas as pd

    rows = list_items(queue, status=status, run=run)
    df = pd.DataFrame([{k: (", ".join(r[k]) if k == "reason_codes" else r.get(k)) for k in EXPORT_COLUMNS} for r in rows], columns=list(EXPORT_COLUMNS))
    return df.set_index("id", drop=False)


def export(out: str | Path, *, fmt: str | None = None, queue: str | Path | ReviewStore | None = None, status: str | None = None) -> Path:
    """Write the queue (items with current verdicts) as csv or parquet, atomically."""
    from ..yamlio import atomic_path

    out = Path(out)
    fmt = (fmt or out.suffix.lstrip(".") or "csv").lower()
    if fmt not in ("csv", "parquet"):
        raise QueueError(f"--format: must be csv or parquet, got {fmt!r}")
    df = dataframe(queue, status=status)
    with atomic_path(out) as tmp:
        if fmt == "csv":
            df.to_csv(tmp, index=False)
        else:
            try:
                df.to_parquet(tmp, index=False)
            except ImportError as exc:
                raise QueueError(f"parquet export needs pyarrow: pip install pyarrow ({exc})") from exc
    return out
