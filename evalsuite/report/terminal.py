"""The terminal verdict a person can read: a headline, the verdict per variant and scenario, one
line per failing or warning rule with its top three cases, and the report's path.

The full evidence (numbers, offending cases, diffs) stays in `--verbose`, the `--json` verdict and
the HTML report; a run over full case sets would otherwise print thousands of lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .model import rule_lines, verdict_grid

CELL = {"fail": "[red]FAIL[/red]", "warn": "[yellow]warn[/yellow]", "ok": "[green]ok[/green]", "n/a": "[dim]n/a[/dim]", "cannot judge": "[yellow]?[/yellow]"}
VERDICT = {
    "fail": "[bold red]REGRESSION[/bold red]",
    "warn": "[yellow]pass, warnings[/yellow]",
    "pass": "[green]pass[/green]",
    "cannot judge": "[yellow]cannot judge[/yellow]",
}


def headline(verdict: Any) -> str:
    if not verdict.judgeable:
        return f"[bold yellow]CANNOT JUDGE[/bold yellow] run {verdict.run_id} (stage {verdict.stage})"
    if verdict.passed and verdict.needs_review:
        return f"[bold yellow]NEEDS REVIEW[/bold yellow] run {verdict.run_id}: no rule failed, but {verdict.review.get('open')} flagged output(s) await review (max_open {verdict.review.get('max_open')}), stage {verdict.stage}"
    warn = f", {len(verdict.warnings)} warning(s)" if verdict.warnings else ""
    if verdict.passed:
        return f"[bold green]PASS[/bold green] run {verdict.run_id}: {len(verdict.variants)} variant(s) vs {verdict.baseline}{warn}, stage {verdict.stage}, rubric {verdict.rubric}"
    return f"[bold red]REGRESSION[/bold red] run {verdict.run_id}: {len(verdict.violations)} violation(s){warn}, stage {verdict.stage}, rubric {verdict.rubric}"


def rule_line(r: dict) -> str:
    """`FAIL rule · variants · reason · top cases: a, b, c (+n)` as plain text."""
    cases = ", ".join(r["top_cases"]) + (f" (+{r['n_cases'] - len(r['top_cases'])})" if r["n_cases"] > len(r["top_cases"]) else "")
    head = "FAIL" if r["status"] == "fail" else "warn"
    more = f" (+{r['violations'] - 1} more)" if r["violations"] > 1 else ""
    return f"{head} {r['rule']} · {', '.join(r['variants'])} · {r['reason']}{more}" + (f" · top cases: {cases}" if cases else "")


def print_verdict(
    verdict: Any,
    console: Any,
    *,
    scenarios: Sequence[str] | None = None,
    report_path: Any = None,
    verbose: bool = False,
    top: int = 3,
    hint: str | None = "full evidence: --verbose, --json FILE, or `evalsuite report RUN`",
) -> None:
    """The short verdict (or, with `verbose`, the gate's full evidence too)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    if verbose:
        from ..verdict.gate import format_verdict

        format_verdict(verdict, console)
    else:
        console.print(headline(verdict), highlight=False)
    grid = verdict_grid(verdict, scenarios)
    if grid:
        keys = list(grid[0]["cells"])
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), show_edge=False)
        t.add_column("variant", no_wrap=True)
        t.add_column("verdict", no_wrap=True)
        for k in keys:
            t.add_column("run-level" if k == "run" else k, no_wrap=True)
        for row in grid:
            cells = []
            for k in keys:
                c = row["cells"][k]
                n = len(c["fail"]) or len(c["warn"])
                cells.append(CELL.get(c["status"], c["status"]) + (f" ({n})" if n else ""))
            t.add_row(escape(row["variant"]), VERDICT.get(row["status"], row["status"]), *cells)
        console.print(t)
    if not verbose:
        for r in rule_lines(verdict, top):
            color = "red" if r["status"] == "fail" else "yellow"
            console.print(f"[{color}]{escape(rule_line(r))}[/{color}]", highlight=False)
        for n in verdict.notes:
            console.print(f"[dim]note: {escape(n)}[/dim]", highlight=False)
        for p in verdict.problems:
            console.print(f"[yellow]cannot judge:[/yellow] {escape(p)}", highlight=False)
    if report_path is not None:
        console.print(f"report: {report_path}", highlight=False, soft_wrap=True)
    elif hint and not verbose and (verdict.violations or verdict.warnings):
        console.print(f"[dim]{escape(hint)}[/dim]", highlight=False)
