"""The one library path to the review queue: the CLI, the notebook, the gate and the tests all call these.

`queue` arguments take a path (default: `reports/review.sqlite`, or `$EVALSUITE_REVIEW_QUEUE`) or an
open ReviewStore; a reviewer defaults to `$EVALSUITE_REVIEWER`, else the login name.
"""

from __future__ import annotations

import datetime as _dt
import getpass
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..verdict.decisions import ReviewDecisions
from .agreement import agreement, miss_rate, miss_rate_line
from .policy import DEFAULT_POLICY, FlagInputs, ReviewPolicy, blind_left, flag_plan
from .settle import independent
from .store import DEFAULT_LEASE_S, DEFAULT_QUEUE, QueueError, ReviewStore, VerdictExtra, iso_utc, item_key, now_iso, output_hash

if TYPE_CHECKING:
    from ..run.store import RunStore, ScoreRecord
    from ..verdict.compare import Comparison
    from .keep import Kept

ANSWERS = ("left_worse", "same", "right_worse")  #: a blind pairwise review's answers

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
    "audit",
    "triage",
    "priority",
    "fingerprint",
    "output_hash",
    "baseline_output",
    "variant_output",
    "created",
)


def default_queue_path(store: RunStore | None = None, *, runs_dir: str | Path | None = None) -> Path:
    """`$EVALSUITE_REVIEW_QUEUE`, else `review.sqlite` beside the runs folder (reports/review.sqlite)."""
    from ..run.store import beside_runs

    env = os.environ.get("EVALSUITE_REVIEW_QUEUE")
    return Path(env) if env else beside_runs(DEFAULT_QUEUE.name, store, runs_dir=runs_dir)


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


@dataclass(frozen=True, kw_only=True)
class FlagResult:
    """What `flag_run` did."""

    run_id: str
    queue: str
    flagged: int  #: outputs the policy flagged in this run
    added: tuple[int, ...]  #: new items
    existing: tuple[int, ...]  #: already queued (identical output): sighting recorded only
    open: int  #: this run's flagged outputs still awaiting a verdict (new or old)
    reasons: Mapping[str, int] = field(default_factory=dict)  #: reason code -> flagged outputs
    audited: int = 0  #: unflagged outputs queued at random for the audit (rubric review.audit_rate)

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "queue": self.queue,
            "flagged": self.flagged,
            "added": list(self.added),
            "existing": list(self.existing),
            "open": self.open,
            "reasons": dict(self.reasons),
            "audited": self.audited,
        }


def flag(
    cmp: Comparison,
    *,
    inputs: FlagInputs | None = None,
    policy: ReviewPolicy = DEFAULT_POLICY,
    queue: str | Path | ReviewStore | None = None,
    records: Sequence[ScoreRecord] | None = None,
    fingerprints: Mapping[str, str] | None = None,
) -> FlagResult:
    """Flag a comparison's differences into the queue (pure policy, then one write transaction).

    `inputs`: a policy.FlagInputs (records, fingerprints, cases, rubric digest); `records=` and
    `fingerprints=` are accepted on their own too.
    """
    inputs = inputs or FlagInputs(records or (), fingerprints or {})
    plan = flag_plan(cmp, policy, inputs)
    with _open(queue) as q:
        res = q.add_items(plan.items, plan.audits)
        flagged_keys = {it.key for it in plan.flagged}
        ids = list(res.added) + list(res.existing)
        n_open = len(q.items(status="open", ids=ids)) if ids else 0
        path = str(q.path)
    reasons = Counter(code for it in plan.items for code in {r["code"] for r in it.reasons})
    n_audit = len(plan.items) - len(flagged_keys)
    return FlagResult(
        run_id=cmp.run_id,
        queue=path,
        flagged=len(plan.flagged),
        added=res.added,
        existing=res.existing,
        open=n_open,
        reasons=dict(sorted(reasons.items())),
        audited=n_audit,
    )


def _run_store(run: Any, runs_dir: str | Path):
    from ..run.store import RunStore

    return run if hasattr(run, "dir") and hasattr(run, "scores") else RunStore.find(runs_dir, str(run))


def _rubric(store: RunStore, rubric: Any) -> tuple[ReviewPolicy, str | None]:
    """The review policy and the rubric's digest (None when given a bare policy)."""
    from ..verdict.rubric import Rubric, load_rubric, resolve_rubric_path

    if isinstance(rubric, ReviewPolicy):
        return rubric, None
    if not isinstance(rubric, Rubric):
        rubric = load_rubric(resolve_rubric_path(rubric, store.suite))
    return rubric.review or DEFAULT_POLICY, rubric.rules_digest()


def _cases(store: RunStore) -> dict:
    """The run's cases by id, for the items' context; none when they cannot be loaded (the items
    are still queued, without their context)."""
    from ..errors import EvalsuiteError
    from ..scoring.run import run_cases

    try:
        return {c.id: c for c in run_cases(store)}
    except (EvalsuiteError, OSError, ValueError):
        return {}


def flag_run(
    run: Any, *, runs_dir: str | Path = "reports/runs", queue: str | Path | ReviewStore | None = None, rubric: Any = None, cmp: Any = None
) -> FlagResult:
    """`evalsuite review flag RUN`: compare a stored run and flag its differences (policy from the
    rubric's `review:`), each item with its context, plus the policy's audit sample."""
    from ..verdict.compare import compare_run

    store = _run_store(run, runs_dir)
    cmp = cmp if cmp is not None else compare_run(store)
    policy, digest = _rubric(store, rubric)
    from ..scoring.evidence import trim_drops  # here: `review annotate` never needs the scorers

    inputs = FlagInputs(store.scores(), (store.signature or {}).get("variants") or {}, _cases(store), digest, dropped=trim_drops(store.generations()))
    return flag(cmp, inputs=inputs, policy=policy, queue=queue if queue is not None else default_queue_path(store))


# ---------------------------------------------------------------------------------------------
# the gate's view


def _epoch(now: float | _dt.datetime | None) -> float:
    """An epoch time from None (now), a number or a datetime."""
    if now is None:
        return time.time()
    if isinstance(now, _dt.datetime):
        return (now if now.tzinfo else now.replace(tzinfo=_dt.timezone.utc)).timestamp()
    return float(now)


def _who(row: Mapping[str, Any]) -> str:
    head = (
        f"item #{row['id']}, " + ("adjudicated by " if row.get("verdict_role") == "adjudication" else "") + f"{row['reviewer']}: {row['note'] or '(no note)'}"
    )
    if row.get("waiver_until"):
        head += f" (waiver until {row['waiver_until'][:16].replace('T', ' ')} UTC)"
    elif row.get("waiver_rubric"):
        head += " (waiver until the rubric changes)"
    return head


def _votes(hist: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{rev} {r['verdict']}" for rev, r in sorted(independent(hist).items()))


def _lapsed(row: Mapping[str, Any], now_iso: str, digest: str | None) -> str | None:
    """Why an acceptable verdict's waiver no longer holds (None: it holds)."""
    if row["verdict"] != "acceptable":
        return None
    if row.get("waiver_until") and row["waiver_until"] <= now_iso:
        return f"expired on {row['waiver_until'][:16].replace('T', ' ')} UTC"
    if row.get("waiver_rubric") and ((digest and row["waiver_rubric"] != digest) or row.get("waiver_expired")):
        return "was given until the rubric changed, and it has"
    return None


def _classify(row: Mapping[str, Any], hist: Sequence[Mapping[str, Any]], now_iso: str, digest: str | None) -> tuple[str, str, str | None]:
    """(accepted | regression | expired | disputed | open, why, a note for the gate or None) for one item."""
    where = f"item #{row['id']} ({row['variant']}/{row['case_id']})"
    lapsed = _lapsed(row, now_iso, digest)
    if lapsed:
        return "expired", f"{_who(row)}; {lapsed}", f"review: the waiver on {where} by {row['reviewer']} {lapsed}: the output counts as open again"
    if row["verdict"] == "disputed":
        return "disputed", "disputed", f"review: {where} is disputed ({_votes(hist)}): open until adjudicated (`evalsuite review next --adjudicate`)"
    if row["verdict"] in ("acceptable", "regression"):
        kind = "accepted" if row["verdict"] == "acceptable" else "regression"
        if row.get("verdict_role") != "adjudication":
            return kind, _who(row), None
        return kind, _who(row), f"review: {where} adjudicated by {row['reviewer']}: {row['verdict']} (independent reviews: {_votes(hist) or 'retracted'})"
    return "open", "", None


def decisions(
    cmp: Comparison,
    fingerprints: Mapping[str, str],
    queue: str | Path | ReviewStore | None = None,
    max_open: int | None = None,
    *,
    now: float | _dt.datetime | None = None,
    rubric_digest: str | None = None,
) -> ReviewDecisions:
    """The queue's current verdicts on this comparison's outputs (matched by item key, so a verdict
    given in an earlier run applies to the identical output now), as of `now=` (epoch or datetime;
    default the clock) and for the rubric of digest `rubric_digest=` (a waiver "until the rubric
    changes" lapses under another one); with the run's audit estimate."""
    t, digest = _epoch(now), rubric_digest
    keys: dict[str, tuple[str, str]] = {}
    for (variant, case), text in cmp.outputs.items():
        if variant in cmp.variants:
            keys[item_key(case, fingerprints.get(variant) or f"name:{variant}", output_hash(text))] = (variant, case)
    with _open(queue) as q:
        latest = q.latest_by_key(keys, now=t)
        hist = q.histories(r["id"] for r in latest.values() if r["verdict"] == "disputed" or r.get("verdict_role") == "adjudication")
        audit = audit_estimate(q, cmp.run_id)
        source = str(q.path)
    out: dict[str, dict[str, dict]] = {k: {} for k in ("accepted", "regression", "expired", "disputed", "open", "item_ids")}
    notes: list[str] = []
    for key, row in sorted(latest.items(), key=lambda kv: kv[1]["id"]):
        variant, case = keys[key]
        kind, why, note = _classify(row, hist.get(row["id"], []), iso_utc(t), digest)
        out[kind].setdefault(variant, {})[case] = why if kind in ("accepted", "regression", "expired") else row["id"]
        if kind in ("expired", "disputed"):
            out["open"].setdefault(variant, {})[case] = row["id"]
        if kind in ("accepted", "regression"):
            out["item_ids"].setdefault(variant, {})[case] = int(row["id"])
        if note:
            notes.append(note)
    return ReviewDecisions(
        accepted=out["accepted"],
        regressions=out["regression"],
        open_items={v: tuple(sorted(ids.values())) for v, ids in out["open"].items()},
        max_open=max_open,
        source=source,
        item_ids=out["item_ids"],
        expired=out["expired"],
        disputed={v: tuple(sorted(ids.values())) for v, ids in out["disputed"].items()},
        notes=tuple(notes),
        audit=audit,
        as_of=iso_utc(t),
    )


def fingerprint_verdicts(queue: str | Path | None, fingerprints: Sequence[str], *, default: str | Path | None = None) -> dict[str, dict[int, dict]]:
    """The current verdict on every reviewed output of these variant builds (by fingerprint): what the
    release ledger asks to tell whether a waiver still stands and whether a reviewer has since found
    a regression. `queue` None: `default` (else default_queue_path()); no queue file: no verdicts."""
    path = Path(queue) if queue else Path(default) if default else default_queue_path()
    if not path.is_file() or not fingerprints:
        return {}
    with _open(path, create=False) as q:
        return q.verdicts_by_fingerprint(fingerprints)


def review_decisions(
    store: RunStore,
    cmp: Comparison,
    policy: ReviewPolicy | None,
    queue: str | Path | ReviewStore | None = None,
    *,
    now: float | _dt.datetime | None = None,
    rubric_digest: str | None = None,
) -> ReviewDecisions:
    """What the gate needs from the queue for a stored run's comparison (`policy.max_open` sets when
    open items mean "needs review"); `now=` and `rubric_digest=` as in `decisions`."""
    max_open = (policy or DEFAULT_POLICY).max_open
    path = queue if queue is not None else default_queue_path(store)
    return decisions(cmp, (store.signature or {}).get("variants") or {}, path, max_open, now=now, rubric_digest=rubric_digest)


def audit_estimate(queue: str | Path | ReviewStore | None = None, run: str | None = None) -> dict:
    """The audit sample of one run (or of every run) and its estimate of the regressions the flags
    miss, with a Clopper-Pearson interval (agreement.miss_rate); empty when nothing was audited."""
    with _open(queue, create=False) as q:
        pops = q.audits(run)
        audited = q.items(status=None, run_id=run, audit=True) if pops else []
    if not pops:
        return {}
    est = miss_rate(pops, audited)
    est["line"] = miss_rate_line(est)
    return est


# ---------------------------------------------------------------------------------------------
# reviewing


def list_items(
    queue: str | Path | ReviewStore | None = None, *, status: str | None = "open", run: str | None = None, variant: str | None = None, limit: int | None = None
) -> list[dict]:
    """Items with their current state (status: open, reviewed, all, acceptable, regression, unsure, pending, disputed, expired)."""
    with _open(queue, create=False) as q:
        return q.items(status=status, run_id=run, variant=variant, limit=limit)


def show(item_id: int, queue: str | Path | ReviewStore | None = None) -> dict:
    """One item: outputs, scores, reasons, context, current state, the whole verdict history, runs, claim."""
    with _open(queue, create=False) as q:
        d = q.item(item_id)
        d["history"] = q.history(item_id)
        d["sightings"] = q.sightings(item_id)
        d["claim"] = q.claim(item_id)
    return d


def parse_expiry(value: str | None, *, now: float | None = None) -> tuple[str | None, bool]:
    """(the UTC time a waiver lapses at, or None; whether it holds only until the rubric changes)
    from `2026-03-31` (through that day, UTC), an ISO time, `30d` (days from now) or `rubric`."""
    if value is None or str(value).strip() in ("", "never"):
        return None, False
    v = str(value).strip().lower()
    if v in ("rubric", "until-rubric-changes", "until the rubric changes"):
        return None, True
    t = _epoch(now)
    try:
        if v.endswith("d") and v[:-1].isdigit():
            return iso_utc(t + 86400 * int(v[:-1])), False
        if len(v) == 10:
            day = _dt.datetime.strptime(v, "%Y-%m-%d").replace(tzinfo=_dt.timezone.utc)
            return iso_utc((day + _dt.timedelta(days=1)).timestamp()), False
        return iso_utc(_epoch(_dt.datetime.fromisoformat(str(value).strip()))), False
    except ValueError:
        pass
    raise QueueError(f"expires: expected a date (2026-03-31), a number of days (30d) or 'rubric' (until the rubric changes), got {value!r}")


def annotate(
    item_id: int,
    verdict: str,
    *,
    note: str = "",
    reviewer: str | None = None,
    queue: str | Path | ReviewStore | None = None,
    expires: str | None = None,
    role: str | None = None,
    blind: tuple[str, str] | None = None,
) -> dict:
    """Record a verdict (appended to the item's history); the notebook's panel and `review annotate` call this.

    `expires=`: an acceptable verdict's waiver lapses then (see `parse_expiry`); `role="adjudication"`
    settles a disputed double review; `blind=(answer, left side)`: a blind pairwise answer (use `answer`).
    """
    until, by_rubric = parse_expiry(expires)
    with _open(queue, create=False) as q:
        digest = None
        if by_rubric:
            digest = q.item(int(item_id))["rubric_digest"]
            if not digest:
                raise QueueError(f"item {item_id}: flagged without a rubric, so a waiver cannot be tied to one; flag its run again (evalsuite review flag RUN)")
        ans, left = blind if blind is not None else (None, None)
        extra = VerdictExtra(role=role or "review", expires=until, expires_rubric=digest, answer=ans, left_side=left)
        return q.annotate(int(item_id), verdict, reviewer or default_reviewer(), note, extra)


def answer(item_id: int, choice: str, *, note: str = "", reviewer: str | None = None, queue: str | Path | ReviewStore | None = None) -> dict:
    """A blind pairwise answer (`left_worse`, `same`, `right_worse`) for the sides the item shows,
    recorded with the answer and the sides: the variant worse -> regression, otherwise acceptable."""
    choice = choice.replace("-", "_")
    if choice not in ANSWERS:
        raise QueueError(f"answer: must be one of {', '.join(ANSWERS)}, got {choice!r}")
    with _open(queue, create=False) as q:
        left = blind_sides(q.item(int(item_id)))
        worse = {"left_worse": left, "right_worse": "baseline" if left == "variant" else "variant"}.get(choice)
        verdict = "regression" if worse == "variant" else "acceptable"
        return annotate(item_id, verdict, note=note, reviewer=reviewer, queue=q, blind=(choice, left))


def blind_sides(item: Mapping[str, Any]) -> str:
    """Which side a blind review of the item shows on the left (recorded at flagging, else seeded by its key)."""
    return item.get("left_side") or blind_left(item["item_key"])


def adjudicate(item_id: int, verdict: str, *, note: str = "", reviewer: str | None = None, queue: str | Path | ReviewStore | None = None) -> dict:
    """Settle a disputed double review: the adjudicator's verdict counts from now on (its row says so)."""
    return annotate(item_id, verdict, note=note, reviewer=reviewer, queue=queue, role="adjudication")


def next_item(
    reviewer: str | None = None, *, lease_s: float = DEFAULT_LEASE_S, queue: str | Path | ReviewStore | None = None, adjudicate: bool = False
) -> dict | None:
    """Claim the next open item for this reviewer (a lease of `lease_s` seconds), highest expected
    impact first; `adjudicate`: the next disputed double review. None when done."""
    with _open(queue, create=False) as q:
        iid = q.claim_next(reviewer or default_reviewer(), lease_s, adjudicate=adjudicate)
        return None if iid is None else q.item(iid)


def release(item_id: int, reviewer: str | None = None, queue: str | Path | ReviewStore | None = None) -> bool:
    """Give a claimed item back (others may take it at once, and so may you)."""
    with _open(queue, create=False) as q:
        return q.release(int(item_id), reviewer or default_reviewer())


def skip(item_id: int, reviewer: str | None = None, queue: str | Path | ReviewStore | None = None, *, lease_s: float = DEFAULT_LEASE_S) -> dict:
    """`review skip ID`: give the item back and put it behind the others for you for `lease_s`
    seconds, so that `next` hands you another one (others may take it at once)."""
    with _open(queue, create=False) as q:
        until = q.skip(int(item_id), reviewer or default_reviewer(), lease_s)
    return {"item_id": int(item_id), "until": iso_utc(until)}


def undo(item_id: int, reviewer: str | None = None, queue: str | Path | ReviewStore | None = None, *, note: str = "") -> dict:
    """`review undo ID`: retract your latest standing verdict on the item (a retraction appended to its
    history, never a deletion); the item's earlier verdict, if any, counts again."""
    with _open(queue, create=False) as q:
        return q.retract(int(item_id), reviewer or default_reviewer(), note)


def answered(reviewer: str | None = None, queue: str | Path | ReviewStore | None = None, limit: int = 50) -> list[int]:
    """The items you gave a verdict on, most recent first."""
    with _open(queue, create=False) as q:
        return q.answered(reviewer or default_reviewer(), limit)


def claim(item_id: int, reviewer: str | None = None, queue: str | Path | ReviewStore | None = None, *, lease_s: float = DEFAULT_LEASE_S) -> dict:
    """Claim one item to work on it again (after back or undo); `claimed` says whether you hold it
    (False: another reviewer's lease is live, and your verdict may cross theirs)."""
    with _open(queue, create=False) as q:
        ok = q.claim_item(int(item_id), reviewer or default_reviewer(), lease_s)
        return {**q.item(int(item_id)), "claimed": ok}


def back(
    reviewer: str | None = None, queue: str | Path | ReviewStore | None = None, *, steps: int = 1, lease_s: float = DEFAULT_LEASE_S, exclude: int | None = None
) -> dict | None:
    """`review back`: the item you answered `steps` items ago (leaving out `exclude`, the one you are
    on), claimed again so you can change your verdict (a new verdict is appended; undo retracts).
    None when you answered fewer items."""
    done = [i for i in answered(reviewer, queue, limit=steps + 1) if i != exclude]
    if len(done) < steps:
        return None
    return claim(done[steps - 1], reviewer, queue, lease_s=lease_s)


def stats(queue: str | Path | ReviewStore | None = None, *, run: str | None = None) -> dict:
    """Counts (items, verdict rows, current states, open, live claims; per variant and reason),
    reviewer agreement (Cohen's kappa per pair, the disagreements) and the audit's miss-rate estimate."""
    with _open(queue, create=False) as q:
        out = q.counts()
        rows = q.items(status=None)
        multi = [r["id"] for r in rows if r["n_verdicts"] >= 2]
        hist = q.histories(multi)
        out["audit"] = audit_estimate(q, run)
    by_variant: dict[str, Counter] = {}
    reasons: Counter = Counter()
    for r in rows:
        by_variant.setdefault(r["variant"], Counter())[r["verdict"] or "open"] += 1
        reasons.update(r["reason_codes"])
    out["by_variant"] = {v: dict(c) for v, c in sorted(by_variant.items())}
    out["by_reason"] = dict(sorted(reasons.items()))
    out["agreement"] = agreement(hist, {r["id"]: r for r in rows})
    return out


def progress(queue: str | Path | ReviewStore | None = None, reviewer: str | None = None) -> dict:
    """Where the queue stands, for a reviewer's progress line: per variant and per reason, items
    decided of all; open items; what this reviewer decided today (UTC)."""
    who = reviewer or default_reviewer()
    with _open(queue, create=False) as q:
        rows = q.items(status=None)
        today = q.decided_by(who, since=now_iso()[:10])
    tally: dict[str, dict[str, list[int]]] = {"variant": {}, "reason": {}}
    n_open = 0
    for r in rows:
        is_open = r["verdict"] in (None, "unsure", "pending", "disputed") or r["waiver_expired"]
        n_open += is_open
        for kind, keys in (("variant", [r["variant"]]), ("reason", r["reason_codes"])):
            for k in keys:
                t = tally[kind].setdefault(k, [0, 0])
                t[0] += not is_open
                t[1] += 1
    return {"items": len(rows), "open": n_open, "decided": len(rows) - n_open, "mine_today": today, **{f"by_{k}": v for k, v in tally.items()}}


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
    given = fmt
    fmt = (fmt or out.suffix.lstrip(".") or "csv").lower()
    if fmt not in ("csv", "parquet"):
        if given:
            raise QueueError(f"--format: must be csv or parquet, got {given!r}")
        raise QueueError(f"--out {out}: exports are csv or parquet; name a .csv or .parquet file, or give --format")
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


# ---------------------------------------------------------------------------------------------
# failures kept as cases


def keep(item_id: int, *, queue: str | Path | ReviewStore | None = None, runs_dir: str | Path | None = None, into: str | Path | None = None) -> Kept:
    """`evalsuite review keep ITEM`: the item's case, as its run asked it, written into the kept set
    (`casesets/kept/kept.yaml`) with the baseline's answer as reference and the reviewer's verdict and note."""
    from ..run.store import RunStore
    from .keep import DEFAULT_KEPT_DIR, keep_case

    it = show(item_id, queue)
    store = RunStore.find(runs_dir or _runs_dir(queue), str(it["run_id"]))
    case = _cases(store).get(it["case_id"])
    if case is None:
        raise QueueError(f"item {item_id}: case {it['case_id']!r} is not among the cases of run {it['run_id']} (its case sets cannot be loaded)")
    return keep_case(case, it, it["history"], Path(into) if into is not None else DEFAULT_KEPT_DIR)


def keep_regressions(
    run: Any, *, queue: str | Path | ReviewStore | None = None, runs_dir: str | Path = "reports/runs", into: str | Path | None = None, rubric: Any = None
) -> list[Kept]:
    """The rubric's `review: {keep: regression}`: every item of the run whose verdict is `regression`, kept
    (nothing when the rubric does not ask for it)."""
    store = _run_store(run, runs_dir)
    policy, _ = _rubric(store, rubric)
    if policy.keep != "regression":
        return []
    queue = queue if queue is not None else default_queue_path(store)
    items = list_items(queue, status="regression", run=store.run_id)
    return [keep(int(i["id"]), queue=queue, runs_dir=store.dir.parent, into=into) for i in items]


def _runs_dir(queue: str | Path | ReviewStore | None) -> Path:
    """Where a queue's runs live: the `runs` folder beside it (reports/review.sqlite -> reports/runs)."""
    path = queue.path if isinstance(queue, ReviewStore) else Path(queue or default_queue_path())
    return Path(path).parent / "runs"
