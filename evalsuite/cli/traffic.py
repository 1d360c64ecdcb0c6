"""`evalsuite cases from-traffic` and `evalsuite cases review`: logged traffic as draft case sets, and a
person's walk through the drafts (docs/traffic.md)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from ..errors import EvalsuiteError
from ._app import app, console, guarded, new_table

cases_app = typer.Typer(no_args_is_help=True, help="Case sets from your traffic: from-traffic, review (the drafts).")
app.add_typer(cases_app, name="cases", help="Case sets from logged traffic (from-traffic) and the walk through their drafts (review).")

_CHOICES = {"c": "confirm", "e": "edit", "d": "drop", "s": "skip", "q": "quit"}


@cases_app.command("from-traffic")
@guarded()
def from_traffic_cmd(
    files: list[Path] = typer.Argument(
        ..., help="traffic: Batch API input/output JSONL, request/response JSONL, Parquet or JSONL with `messages`, a dataset dir"
    ),
    out: Path = typer.Option(Path("casesets/traffic"), "--out", help="directory of the draft case sets (one file per scenario)"),
    per_stratum: int = typer.Option(25, "--per-stratum", min=1, help="cases sampled per (scenario, language, prompt length)"),
    seed: int = typer.Option(0, "--seed", help="the sample's seed"),
    glossary: Path | None = typer.Option(None, "--glossary", help="a glossary file: terms the production answer uses become required terms"),
    no_scrub: bool = typer.Option(False, "--no-scrub", help="write personal data and secrets as logged (the case sets' header says so)"),
    force: bool = typer.Option(False, "--force", help="replace case sets already in --out (their reviewed drafts are lost)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Turn logged chat-completions traffic into draft case sets: scenario and expectations inferred,
    duplicates collapsed, a seeded stratified sample, personal data and secrets replaced before writing."""
    from ..cases.traffic import TrafficSettings, from_traffic

    settings = TrafficSettings(out=out, per_stratum=per_stratum, seed=seed, glossary=glossary, scrub=not no_scrub, overwrite=force)
    if as_json:
        print(json.dumps(from_traffic(files, settings).to_dict(), ensure_ascii=False, indent=2))
        return
    with console.status("reading traffic ..."):
        report = from_traffic(files, settings, progress=lambda msg: console.log(msg, highlight=False))
    _print_report(report)


def _print_report(report) -> None:
    t = new_table(f"{report.cases} draft cases from {report.read} logged requests", title_justify="left")
    for col in ("scenario / lang / length", "distinct", "taken"):
        t.add_column(col)
    for key, (avail, taken) in report.strata.items():
        t.add_row(key, str(avail), str(taken))
    console.print(t)
    console.print(f"duplicates: {report.exact_duplicates} exact, {report.near_duplicates} near (ratio {report.duplicate_ratio:.1%})", highlight=False)
    for why, n in report.left_out.items():
        console.print(f"left out: {n} {escape(why)}", highlight=False)
    for s in report.skipped[:20]:
        console.print(f"  {escape(str(s))}", highlight=False, soft_wrap=True)
    if len(report.skipped) > 20:
        console.print(f"  ... and {len(report.skipped) - 20} more malformed lines (--json lists them all)", highlight=False)
    if report.scrubbed:
        found = ", ".join(f"{n} {k}" for k, n in sorted(report.replacements.items())) or "none found"
        console.print(f"scrubbed: {found}", highlight=False)
    else:
        console.print("[yellow]not scrubbed (--no-scrub): the case sets may hold personal data and secrets; their header says so[/yellow]")
    for p in report.written:
        console.print(f"wrote {p}", highlight=False, soft_wrap=True)
    console.print(
        "every case is a draft: confirm, edit or drop them with `evalsuite cases review "
        + str(Path(report.written[0]).parent if report.written else "DIR")
        + "`"
    )


@cases_app.command("review")
@guarded()
def review_cmd(
    paths: list[Path] = typer.Argument(..., help="draft case-set files or directories (from-traffic's --out)"),
    confirm_all: bool = typer.Option(False, "--confirm-all", help="confirm every draft without asking (after reading them elsewhere)"),
) -> None:
    """Walk through the draft cases: confirm (c), edit in $EDITOR (e), drop (d), skip (s) or quit (q) each.
    Decisions are written back when a file is done (or on quit)."""
    from ..cases.caseset import discover
    from ..cases.drafts import apply_review, draft_entries

    for path in discover(paths):
        drafts = draft_entries(path)
        if not drafts:
            continue
        decisions, quit_ = _walk(path, drafts, confirm_all)
        counts = apply_review(path, decisions)
        console.print(f"{path}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), highlight=False, soft_wrap=True)
        if quit_:
            return


def _walk(path: Path, drafts: list[dict], confirm_all: bool) -> tuple[dict, bool]:
    """(case id -> decision) for the drafts of one file, and whether the person quit."""
    decisions: dict[str, tuple[str, dict | None]] = {}
    for i, case in enumerate(drafts, 1):
        if confirm_all:
            decisions[case["id"]] = ("confirm", None)
            continue
        console.rule(f"{path} draft {i}/{len(drafts)}: {case['id']}")
        console.print(escape(_yaml(case)), highlight=False)
        choice = _CHOICES.get(typer.prompt("[c]onfirm, [e]dit, [d]rop, [s]kip, [q]uit", default="s").strip().lower()[:1], "skip")
        if choice == "quit":
            return decisions, True
        decisions[case["id"]] = (choice, _edit(case) if choice == "edit" else None)
    return decisions, False


def _yaml(case: dict) -> str:
    from ..yamlio import dump_yaml

    return dump_yaml(case)


def _edit(case: dict) -> dict:
    """The case edited in $EDITOR (YAML); unchanged when the editor is closed without saving."""
    import click
    import yaml

    text = click.edit(_yaml(case), extension=".yaml")
    if text is None:
        return case
    edited = yaml.safe_load(text)
    if not isinstance(edited, dict) or "id" not in edited:
        raise EvalsuiteError(f"case {case['id']}: the edited text is not a case (a mapping with an `id`)")
    return edited
