"""`evalsuite review ...`: thin typer commands over evalsuite.review.api (the notebook's API too)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import typer
from rich.markup import escape

from ..errors import EvalsuiteError
from ._app import app, console, guarded, new_table


def _api() -> ModuleType:
    """The review API, imported on first use so `evalsuite --help` does not load it."""
    from ..review import api

    return api


def _short_diff(a: str, b: str, width: int) -> str:
    from ..verdict.outcome import short_diff

    return short_diff(a, b, width=width)


review_app = typer.Typer(no_args_is_help=True, help="Human review queue: flag differences, annotate them, export verdicts.")
app.add_typer(review_app, name="review", help="Human review queue: flag, list, show, next, annotate, skip, undo, back, adjudicate, export, stats.")

QueueOpt = typer.Option(None, "--queue", help="queue file (default: $EVALSUITE_REVIEW_QUEUE, else reports/review.sqlite)")
ReviewerOpt = typer.Option(None, "--reviewer", help="who decides (default: $EVALSUITE_REVIEWER, else your login name)")


@review_app.command("flag")
@guarded()
def flag_cmd(
    run: str = typer.Argument(..., help="run id, run directory, or 'last'"),
    rubric: Path | None = typer.Option(None, help="rubric whose `review:` section sets the policy (default: the suite's)"),
    queue: Path | None = QueueOpt,
    runs_dir: Path = typer.Option(Path("reports/runs"), help="where runs live"),
) -> None:
    """Flag a run's differences (flips, low similarity, JSON drift, citations, leaks, speculative mismatches, scorer disagreements)."""
    res = _api().flag_run(run, runs_dir=runs_dir, queue=queue, rubric=rubric)
    why = ", ".join(f"{k} {v}" for k, v in res.reasons.items()) or "nothing"
    audit = f"; {res.audited} unflagged output(s) queued at random for the audit" if res.audited else ""
    console.print(
        f"run {res.run_id}: {res.flagged} output(s) flagged ({why}); {len(res.added)} new item(s), {len(res.existing)} already queued{audit}", highlight=False
    )
    console.print(f"{res.open} await review in {res.queue}: `evalsuite review list` or `make notebook`", highlight=False)


@review_app.command("list")
@guarded()
def list_cmd(
    status: str = typer.Option("open", help="open, reviewed, all, acceptable, regression, unsure, pending, disputed, expired"),
    run: str | None = typer.Option(None, help="only items seen in this run id"),
    variant: str | None = typer.Option(None, help="only this variant"),
    limit: int | None = typer.Option(None, min=0, help="at most N items"),
    as_json: bool = typer.Option(False, "--json", help="print JSON lines instead of a table"),
    queue: Path | None = QueueOpt,
) -> None:
    """List queued items with their current verdict."""
    rows = _api().list_items(queue, status=status, run=run, variant=variant, limit=limit)
    if as_json:
        for r in rows:
            print(
                json.dumps(
                    {k: r[k] for k in ("id", "run_id", "variant", "case_id", "scenario", "reason_codes", "verdict", "reviewer", "note")}, ensure_ascii=False
                )
            )
        return
    t = new_table(f"{len(rows)} item(s), status {status}, highest expected impact first", title_justify="left")
    for col in ("id", "variant", "case", "scenario", "reasons", "triage", "impact", "verdict", "runs", "claimed by"):
        t.add_column(col)
    for r in sorted(rows, key=lambda r: (-r["priority"], r["id"])):
        t.add_row(
            str(r["id"]),
            r["variant"],
            r["case_id"],
            r["scenario"],
            ", ".join(r["reason_codes"]),
            r["triage"] or "",
            f"{r['priority']:g}",
            _state(r),
            str(r["n_runs"]),
            r["claimed_by"] or "",
        )
    console.print(t)


def _state(r: dict) -> str:
    if r["waiver_expired"]:
        return "open (waiver expired)"
    return r["verdict"] or "open"


@review_app.command("show")
@guarded()
def show_cmd(item_id: int = typer.Argument(..., help="item id"), queue: Path | None = QueueOpt) -> None:
    """One item: reasons, both outputs with a word diff, scores, and the verdict history."""
    it = _api().show(item_id, queue)
    console.print(
        f"[bold]item #{it['id']}[/bold] {escape(it['case_id'])} on {escape(it['variant'])} ({it['scenario']}), current verdict: {_state(it)}"
        + (f", {it['triage']}" if it["triage"] else "")
        + (", audit sample" if it["audit"] else "")
        + (f", needs {it['reviews_needed']} independent reviews" if it["reviews_needed"] > 1 else ""),
        highlight=False,
    )
    brief = (it.get("context") or {}).get("brief") or {}
    for m in brief.get("messages") or []:
        console.print(f"[dim]{m['role']}:[/dim] {escape(m['text'] or '')}", highlight=False)
    console.print(f"first flagged in run {it['run_id']}; runs: {', '.join(s['run_id'] for s in it['sightings'])}", highlight=False)
    for r in it["reasons"]:
        console.print(f"  - {r['code']}: {escape(r['message'])}", highlight=False)
    console.print(f"[dim]baseline:[/dim] {escape(it['baseline_output'] or '')}", highlight=False)
    console.print(f"[dim]variant:[/dim]  {escape(it['variant_output'] or '')}", highlight=False)
    console.print(f"[dim]diff:[/dim]     {escape(_short_diff(it['baseline_output'], it['variant_output'], width=2000))}", highlight=False)
    for h in it["history"]:
        what = f"retracts #{h['retracts']}" if h["role"] == "retraction" else h["verdict"] + (" (adjudication)" if h["role"] == "adjudication" else "")
        gone = " (retracted)" if h["retracted"] else ""
        console.print(f"  verdict #{h['id']} {h['created']} {h['reviewer']}: {what}{gone}" + (f" ({escape(h['note'])})" if h["note"] else ""), highlight=False)
    if it["claim"]:
        console.print(f"  claimed by {it['claim']['reviewer']}", highlight=False)


@review_app.command("annotate")
@guarded()
def annotate_cmd(
    item_id: int = typer.Argument(..., help="item id"),
    verdict: str | None = typer.Option(None, "--verdict", help="acceptable, regression or unsure"),
    answer: str | None = typer.Option(
        None, "--answer", help="an item flagged in pairwise mode: left-worse, same or right-worse, the sides as the review notebook shows them"
    ),
    note: str = typer.Option("", "--note", help="why"),
    expires: str | None = typer.Option(
        None, "--expires", help="an acceptable verdict's waiver lapses: a date (2026-03-31), days (30d) or 'rubric' (until it changes)"
    ),
    reviewer: str | None = ReviewerOpt,
    queue: Path | None = QueueOpt,
) -> None:
    """Record a verdict on an item (appended to its history; the latest one counts)."""
    if (verdict is None) == (answer is None):
        raise EvalsuiteError("give either --verdict or --answer (blind pairwise)")
    _check_expires(expires)
    if answer is not None:
        if _api().show(item_id, queue).get("mode") != "pairwise":  # no blind sides were shown: a verdict is asked for
            raise EvalsuiteError(f"item #{item_id} is not in pairwise mode: --answer is for blind pairwise items; give --verdict")
        row = _api().answer(item_id, answer, note=note, reviewer=reviewer, queue=queue)
    else:
        row = _api().annotate(item_id, str(verdict), note=note, reviewer=reviewer, queue=queue, expires=expires)
    console.print(
        f"item #{row['item_id']}: {row['verdict']} by {row['reviewer']} (verdict #{row['id']}); the item is now {row['state'] or 'open'}", highlight=False
    )


def _check_expires(expires: str | None) -> None:
    """A waiver that would lapse before it is recorded is a mistake in the date, not a waiver."""
    import time

    from ..review.store import iso_utc

    until, _ = _api().parse_expiry(expires)
    if until is not None and until <= iso_utc(time.time()):
        raise EvalsuiteError(f"--expires {expires}: that is in the past (the waiver would have lapsed at {until}); give a later date, days (30d) or 'rubric'")


@review_app.command("adjudicate")
@guarded()
def adjudicate_cmd(
    item_id: int = typer.Argument(..., help="a disputed item's id (`review stats` lists them)"),
    verdict: str = typer.Option(..., "--verdict", help="acceptable or regression"),
    note: str = typer.Option("", "--note", help="why"),
    reviewer: str | None = ReviewerOpt,
    queue: Path | None = QueueOpt,
) -> None:
    """Settle a double review whose two verdicts disagree: the adjudicator's verdict counts."""
    row = _api().adjudicate(item_id, verdict, note=note, reviewer=reviewer, queue=queue)
    console.print(f"item #{row['item_id']}: adjudicated {row['verdict']} by {row['reviewer']} (verdict #{row['id']})", highlight=False)


@review_app.command("skip")
@guarded()
def skip_cmd(
    item_id: int = typer.Argument(..., help="item id"),
    lease: float = typer.Option(1800.0, help="seconds the item stays behind the others for you"),
    reviewer: str | None = ReviewerOpt,
    queue: Path | None = QueueOpt,
) -> None:
    """Give an item back and put it behind the others for you: `review next` hands you another one."""
    res = _api().skip(item_id, reviewer, queue, lease_s=lease)
    console.print(f"item #{res['item_id']} skipped: behind the others for you until {res['until'][:19].replace('T', ' ')} UTC", highlight=False)


@review_app.command("undo")
@guarded()
def undo_cmd(
    item_id: int = typer.Argument(..., help="item id"),
    note: str = typer.Option("", "--note", help="why"),
    reviewer: str | None = ReviewerOpt,
    queue: Path | None = QueueOpt,
) -> None:
    """Retract your latest verdict on an item (a retraction is appended; nothing is deleted)."""
    res = _api().undo(item_id, reviewer, queue, note=note)
    console.print(
        f"item #{res['item_id']}: your {res['undone']} (verdict #{res['retracts']}) retracted by verdict #{res['id']}; the item is now {res['state'] or 'open'}",
        highlight=False,
    )


@review_app.command("back")
@guarded()
def back_cmd(
    steps: int = typer.Option(1, help="how many of your verdicts to go back"), reviewer: str | None = ReviewerOpt, queue: Path | None = QueueOpt
) -> None:
    """Show (and claim) the item you answered last, to change your verdict with `annotate` or `undo`."""
    it = _api().back(reviewer, queue, steps=steps)
    if it is None:  # nothing to go back to: the request cannot be met (exit 4, not a silent 0)
        raise EvalsuiteError(f"review back --steps {steps}: you have not answered that many items")
    show_cmd(it["id"], queue)


@review_app.command("next")
@guarded()
def next_cmd(
    reviewer: str | None = ReviewerOpt,
    lease: float = typer.Option(1800.0, help="seconds the claim lasts before someone else may take the item"),
    adjudicate: bool = typer.Option(False, "--adjudicate", help="the next disputed double review instead"),
    queue: Path | None = QueueOpt,
) -> None:
    """Claim the open item of highest expected impact for you (nobody else gets it while the lease lasts) and show it."""
    it = _api().next_item(reviewer, lease_s=lease, queue=queue, adjudicate=adjudicate)
    if it is None:
        console.print("nothing left to review")
        return
    show_cmd(it["id"], queue)


@review_app.command("export")
@guarded()
def export_cmd(
    out: Path = typer.Option(..., "--out", help="file to write"),
    fmt: str | None = typer.Option(None, "--format", help="csv or parquet (default: from --out's suffix)"),
    status: str = typer.Option("all", help="open, reviewed, all, acceptable, regression, unsure"),
    queue: Path | None = QueueOpt,
) -> None:
    """Export the items and their current verdicts as csv or parquet."""
    path = _api().export(out, fmt=fmt, queue=queue, status=status)
    console.print(f"wrote {path}")


@review_app.command("stats")
@guarded()
def stats_cmd(
    queue: Path | None = QueueOpt,
    run: str | None = typer.Option(None, help="the audit estimate of this run only"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Counts, reviewer agreement (Cohen's kappa per pair, disagreements to adjudicate) and the audit's miss-rate estimate."""
    s = _api().stats(queue, run=run)
    if as_json:
        print(json.dumps(s, indent=2))
        return
    console.print(
        f"{s['items']} item(s) in {s['runs']} run(s); {s['open']} open, {s['claimed']} claimed; {s['verdict_rows']} verdict(s) recorded, {s['retractions']} undone",
        highlight=False,
    )
    console.print("current: " + ", ".join(f"{k} {v}" for k, v in s["current"].items() if v or k in ("open", "acceptable", "regression")), highlight=False)
    console.print("reasons: " + (", ".join(f"{k} {v}" for k, v in s["by_reason"].items()) or "-"), highlight=False)
    for v, c in s["by_variant"].items():
        console.print(f"  {v}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())), highlight=False)
    _print_agreement(s["agreement"])
    from ..review.agreement import miss_rate_line

    console.print(miss_rate_line(s["audit"]), highlight=False)


def _print_agreement(ag: dict) -> None:
    if not ag["pairs"]:
        console.print("agreement: no item answered by two reviewers yet (a rubric's review.reviews_per_item: 2 asks for two)", highlight=False)
        return
    t = new_table(f"agreement: {ag['items']} item(s) answered by two or more reviewers", title_justify="left")
    for col in ("reviewers", "items", "agree", "disagree", "Cohen's kappa"):
        t.add_column(col)
    for p in ag["pairs"]:
        t.add_row(
            " & ".join(p["reviewers"]),
            str(p["items"]),
            str(p["agree"]),
            str(p["disagree"]),
            "undefined (one category)" if p["kappa"] is None else f"{p['kappa']:.2f}",
        )
    console.print(t)
    for d in ag["disagreements"]:
        votes = ", ".join(f"{r} {v}" for r, v in d["verdicts"].items())
        settled = (
            f"adjudicated {d['adjudicated']} by {d['adjudicator']}" if d["adjudicated"] else "awaits adjudication: evalsuite review adjudicate " + str(d["id"])
        )
        console.print(f"  disagreement on item #{d['id']} {d['variant']}/{d['case_id']}: {votes}; {settled}", highlight=False)


@review_app.command("keep")
@guarded()
def keep_cmd(
    item_id: int = typer.Argument(..., help="a reviewed item's id"),
    into: Path = typer.Option(Path("casesets/kept"), "--into", help="the kept set's directory (an ordinary case set: kept.yaml)"),
    queue: Path | None = QueueOpt,
    runs_dir: Path | None = typer.Option(None, help="where runs live (default: the runs folder beside the queue)"),
) -> None:
    """Keep a reviewed output as a fixed case: the request as asked, the baseline's answer as reference,
    the reviewer's verdict and note, the run and variant. The next run of a suite that includes the kept set runs it."""
    kept = _api().keep(item_id, queue=queue, runs_dir=runs_dir, into=into)
    how = "replaced" if kept.replaced else "added"
    console.print(f"item #{item_id}: {how} case {kept.case_id} in {kept.path} (kept set version {kept.version})", highlight=False, soft_wrap=True)
