"""`evalsuite review ...`: thin typer commands over evalsuite.review.api (the notebook's API too)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ..review import api
from ..verdict.outcome import short_diff
from ._app import app, console, guarded

review_app = typer.Typer(no_args_is_help=True, help="Human review queue: flag differences, annotate them, export verdicts.")
app.add_typer(review_app, name="review", help="Human review queue: flag, list, show, annotate, next, export, stats.")

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
    res = api.flag_run(run, runs_dir=runs_dir, queue=queue, rubric=rubric)
    why = ", ".join(f"{k} {v}" for k, v in res.reasons.items()) or "nothing"
    console.print(
        f"run {res.run_id}: {res.flagged} output(s) flagged ({why}); {len(res.added)} new item(s), {len(res.existing)} already queued", highlight=False
    )
    console.print(f"{res.open} await review in {res.queue}: `evalsuite review list` or `make notebook`", highlight=False)


@review_app.command("list")
@guarded()
def list_cmd(
    status: str = typer.Option("open", help="open, reviewed, all, acceptable, regression, unsure"),
    run: str | None = typer.Option(None, help="only items seen in this run id"),
    variant: str | None = typer.Option(None, help="only this variant"),
    limit: int | None = typer.Option(None, help="at most N items"),
    as_json: bool = typer.Option(False, "--json", help="print JSON lines instead of a table"),
    queue: Path | None = QueueOpt,
) -> None:
    """List queued items with their current verdict."""
    rows = api.list_items(queue, status=status, run=run, variant=variant, limit=limit)
    if as_json:
        for r in rows:
            print(
                json.dumps(
                    {k: r[k] for k in ("id", "run_id", "variant", "case_id", "scenario", "reason_codes", "verdict", "reviewer", "note")}, ensure_ascii=False
                )
            )
        return
    t = Table(title=f"{len(rows)} item(s), status {status}", title_justify="left")
    for col in ("id", "variant", "case", "scenario", "reasons", "verdict", "runs", "claimed by"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["id"]),
            r["variant"],
            r["case_id"],
            r["scenario"],
            ", ".join(r["reason_codes"]),
            r["verdict"] or "open",
            str(r["n_runs"]),
            r["claimed_by"] or "",
        )
    console.print(t)


@review_app.command("show")
@guarded()
def show_cmd(item_id: int = typer.Argument(..., help="item id"), queue: Path | None = QueueOpt) -> None:
    """One item: reasons, both outputs with a word diff, scores, and the verdict history."""
    it = api.show(item_id, queue)
    console.print(
        f"[bold]item #{it['id']}[/bold] {escape(it['case_id'])} on {escape(it['variant'])} ({it['scenario']}), current verdict: {it['verdict'] or 'open'}",
        highlight=False,
    )
    console.print(f"first flagged in run {it['run_id']}; runs: {', '.join(s['run_id'] for s in it['sightings'])}", highlight=False)
    for r in it["reasons"]:
        console.print(f"  - {r['code']}: {escape(r['message'])}", highlight=False)
    console.print(f"[dim]baseline:[/dim] {escape(it['baseline_output'] or '')}", highlight=False)
    console.print(f"[dim]variant:[/dim]  {escape(it['variant_output'] or '')}", highlight=False)
    console.print(f"[dim]diff:[/dim]     {escape(short_diff(it['baseline_output'], it['variant_output'], width=2000))}", highlight=False)
    for h in it["history"]:
        console.print(
            f"  verdict #{h['id']} {h['created']} {h['reviewer']}: {h['verdict']}" + (f" ({escape(h['note'])})" if h["note"] else ""), highlight=False
        )
    if it["claim"]:
        console.print(f"  claimed by {it['claim']['reviewer']}", highlight=False)


@review_app.command("annotate")
@guarded()
def annotate_cmd(
    item_id: int = typer.Argument(..., help="item id"),
    verdict: str = typer.Option(..., "--verdict", help="acceptable, regression or unsure"),
    note: str = typer.Option("", "--note", help="why"),
    reviewer: str | None = ReviewerOpt,
    queue: Path | None = QueueOpt,
) -> None:
    """Record a verdict on an item (appended to its history; the latest one counts)."""
    row = api.annotate(item_id, verdict, note=note, reviewer=reviewer, queue=queue)
    console.print(f"item #{row['item_id']}: {row['verdict']} by {row['reviewer']} (verdict #{row['id']})", highlight=False)


@review_app.command("next")
@guarded()
def next_cmd(
    reviewer: str | None = ReviewerOpt,
    lease: float = typer.Option(1800.0, help="seconds the claim lasts before someone else may take the item"),
    queue: Path | None = QueueOpt,
) -> None:
    """Claim the next open item for you (nobody else gets it while the lease lasts) and show it."""
    it = api.next_item(reviewer, lease_s=lease, queue=queue)
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
    path = api.export(out, fmt=fmt, queue=queue, status=status)
    console.print(f"wrote {path}")


@review_app.command("stats")
@guarded()
def stats_cmd(queue: Path | None = QueueOpt, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Counts: items, verdicts, open items, live claims, per variant and reason."""
    s = api.stats(queue)
    if as_json:
        print(json.dumps(s, indent=2))
        return
    console.print(
        f"{s['items']} item(s) in {s['runs']} run(s); {s['open']} open, {s['claimed']} claimed; {s['verdict_rows']} verdict(s) recorded", highlight=False
    )
    console.print("current: " + ", ".join(f"{k} {v}" for k, v in s["current"].items()), highlight=False)
    console.print("reasons: " + (", ".join(f"{k} {v}" for k, v in s["by_reason"].items()) or "-"), highlight=False)
    for v, c in s["by_variant"].items():
        console.print(f"  {v}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())), highlight=False)
