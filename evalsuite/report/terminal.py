"""The terminal view of a verdict: a headline, the verdict per variant and scenario, one line per
failing or warning rule with its top three cases (or, verbose, every violation with its evidence).

These functions build rich renderables and print nothing: the entry points (evalsuite.cli, the demo)
print them. The full evidence (numbers, offending cases, diffs) stays in `--verbose`, the `--json`
verdict and the HTML report; a run over full case sets would otherwise print thousands of lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..states import CANNOT_JUDGE, CANNOT_JUDGE_WORD
from ..verdict.outcome import violation_text
from .faults import fault_rows, faults_table
from .model import rule_lines, verdict_grid

if TYPE_CHECKING:
    from ..verdict.compare import Comparison
    from ..verdict.load import LoadSummary
    from ..verdict.outcome import Judgment, Verdict

CELL = {"fail": "[red]FAIL[/red]", "warn": "[yellow]warn[/yellow]", "ok": "[green]ok[/green]", "n/a": "[dim]n/a[/dim]", CANNOT_JUDGE_WORD: "[yellow]?[/yellow]"}
VERDICT = {
    "fail": "[bold red]REGRESSION[/bold red]",
    "warn": "[yellow]pass, warnings[/yellow]",
    "pass": "[green]pass[/green]",
    CANNOT_JUDGE_WORD: "[yellow]cannot judge[/yellow]",
}
RULE_STATUS = {
    "pass": "[green]ok[/green]",
    "fail": "[red]FAIL[/red]",
    "warn": "[yellow]warn[/yellow]",
    "skip": "[dim]n/a[/dim]",
    "missing": "[yellow]missing[/yellow]",
    CANNOT_JUDGE: "[yellow]cannot judge[/yellow]",
}
DEFAULT_HINT = "full evidence: --verbose, --json FILE, or `evalsuite report RUN`"


def _markup(s: str) -> Text:
    return Text.from_markup(s)


def headline(verdict: Verdict, stage_line: str | None = None) -> str:
    """The first line of every verdict (rich markup): status, run, and the stage it was judged for."""
    stage = escape(stage_line or f"stage {verdict.stage}")
    if not verdict.judgeable:
        return f"[bold yellow]CANNOT JUDGE[/bold yellow] run {verdict.run_id}, {stage}"
    if verdict.passed and verdict.needs_review:
        return (
            f"[bold yellow]NEEDS REVIEW[/bold yellow] run {verdict.run_id}: no rule failed, but {verdict.review.get('open')} flagged output(s) await review "
            f"(max_open {verdict.review.get('max_open')}), {stage}"
        )
    warn = f", {len(verdict.warnings)} warning(s)" if verdict.warnings else ""
    skipped = getattr(verdict, "skipped", ())
    warn += f", {len(skipped)} rule(s) skipped" if skipped else ""
    if verdict.passed:
        return f"[bold green]PASS[/bold green] run {verdict.run_id}: {len(verdict.variants)} variant(s) vs {verdict.baseline}{warn}, {stage}, rubric {verdict.rubric}"
    return f"[bold red]REGRESSION[/bold red] run {verdict.run_id}: {len(verdict.violations)} violation(s){warn}, {stage}, rubric {verdict.rubric}"


def rule_line(r: dict) -> str:
    """`FAIL rule · variants · reason · top cases: a, b, c (+n)` as plain text."""
    cases = ", ".join(r["top_cases"]) + (f" (+{r['n_cases'] - len(r['top_cases'])})" if r["n_cases"] > len(r["top_cases"]) else "")
    head = "FAIL" if r["status"] == "fail" else "warn"
    more = f" (+{r['violations'] - 1} more)" if r["violations"] > 1 else ""
    return f"{head} {r['rule']} · {', '.join(r['variants'])} · {r['reason']}{more}" + (f" · top cases: {cases}" if cases else "")


def grid_table(verdict: Verdict, scenarios: Sequence[str] | None = None) -> Table | None:
    """Variant x scenario (plus run-level rules): fail / warn / ok, with how many rules."""
    grid = verdict_grid(verdict, scenarios)
    if not grid:
        return None
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
    return t


def rules_table(verdict: Verdict) -> Table | None:
    """Rule x variant: every rule's status for every variant (the verbose view)."""
    if not (verdict.variants and verdict.results):
        return None
    t = Table(title="rules", title_justify="left", pad_edge=False)
    t.add_column("rule", no_wrap=True)
    for variant in verdict.variants:
        t.add_column(variant, no_wrap=True)
    for rule in dict.fromkeys(r.rule for r in verdict.results):
        res = [verdict.result(variant, rule) for variant in verdict.variants]
        t.add_row(rule, *[RULE_STATUS.get(r.status, r.status) if r else "" for r in res])
    return t


def _notes_and_problems(verdict: Verdict) -> list[RenderableType]:
    out: list[RenderableType] = [_markup(f"[dim]note: {escape(n)}[/dim]") for n in verdict.notes]
    return out + [_markup(f"[yellow]cannot judge:[/yellow] {escape(p)}") for p in verdict.problems]


def verdict_view(
    verdict: Verdict,
    *,
    scenarios: Sequence[str] | None = None,
    report_path: object = None,
    verbose: bool = False,
    top: int = 3,
    hint: str | None = DEFAULT_HINT,
    stage_line: str | None = None,
) -> Group:
    """The verdict for a terminal: short (one line per failing or warning rule), or with `verbose`
    the rules table and every violation with its numbers, cases and diffs."""
    parts: list[RenderableType] = [_markup(headline(verdict, stage_line))]
    if verbose and (table := rules_table(verdict)) is not None:
        parts.append(table)
    if (grid := grid_table(verdict, scenarios)) is not None:
        parts.append(grid)
    if verbose:
        for v in verdict.violations + verdict.warnings:
            color = "red" if v.severity == "block" else "yellow"
            parts.append(_markup(f"[{color}]{escape(violation_text(v))}[/{color}]"))
    else:
        for line in rule_lines(verdict, top):
            parts.append(_markup(f"[{'red' if line['status'] == 'fail' else 'yellow'}]{escape(rule_line(line))}[/]"))
    unchecked = {r.rule: r for r in verdict.results if r.optional}  # `required: false` rules that matched nothing
    for r in unchecked.values():
        parts.append(_markup(f"[yellow]cannot judge (required: false): {escape(r.rule)}: {escape(r.note.removeprefix('not checked: '))}[/]"))
    if not verbose and (skipped := [s for s in getattr(verdict, "skipped", ()) if s not in unchecked]):
        parts.append(_markup(f"[dim]skipped (not checked): {escape(', '.join(skipped))}; why: --verbose[/dim]"))
    parts += _notes_and_problems(verdict)
    if report_path is not None:
        parts.append(Text(f"report: {report_path}"))
    elif hint and not verbose and (verdict.violations or verdict.warnings):
        parts.append(_markup(f"[dim]{escape(hint)}[/dim]"))
    return Group(*parts)


def judgment_view(
    judgment: Judgment, *, scenarios: Sequence[str] | None = None, report_path: object = None, verbose: bool = False, hint: str | None = DEFAULT_HINT
) -> Group:
    """`verdict_view` of a Judgment, naming its stage and why that one; with served variants under
    load, their stability table after it, and the run's fault outcomes when its served variants were
    probed (evalsuite.report.faults)."""
    view = verdict_view(judgment.verdict, scenarios=scenarios, report_path=report_path, verbose=verbose, hint=hint, stage_line=judgment.stage_line())
    store = getattr(judgment, "store", None)
    parts = [stability_table(getattr(judgment.comparison, "load", None)), faults_table(fault_rows(store)) if store is not None else None]
    shown = [p for p in parts if p is not None]
    return Group(view, *shown) if shown else view


def stability_table(load: LoadSummary | None) -> Table | None:
    """ "Stability under load": per served variant and level, latency (p95), tokens/s, errors and the
    answers that changed or flipped against the variant at rest (None without a `load:` block)."""
    from .stability import load_rows

    rows = load_rows(load)
    failed = dict(load.failed) if load is not None else {}
    if not rows and not failed:
        return None
    caption = "; ".join(f"{name}: not put under load (cannot judge): {why[:200]}" for name, why in failed.items()) or None
    t = Table(title="Stability under load (p50 / p95 / p99)", title_justify="left", pad_edge=False, caption=caption)
    for col in ("variant", "in flight", "reqs", "err", "t/o", "TTFT", "end-to-end", "tokens/s", "queue wait", "TTFT p95 x base", "changed", "flips (floor)"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        t.add_row(
            r["variant"], str(r["level"]), str(r["requests"]), str(r["errors"]), str(r["timeouts"]), r["ttft"], r["e2e"], r["tokens_per_s"],
            r["queue_wait"], r["ttft_ratio"], f"{r['changed']}/{r['replayed']}", f"{r['flips']} ({r['flip_floor']})",
        )  # fmt: skip
    return t


# ---------------------------------------------------------------------------------------------
# the comparison (`evalsuite compare`)


def _fmt(x: float | None, fmt: str = "{:.3f}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return fmt.format(x)


def _p(x: float) -> str:
    return "-" if x is None or math.isnan(x) else ("<0.001" if x < 0.001 else f"{x:.3f}")


def comparison_view(cmp: Comparison) -> Group:
    """Rich tables: one per variant (metrics with noise floors beside), then performance, warnings and problems."""
    from ..perf.verdict import ratio_cell

    parts: list[RenderableType] = [Text(f"run {cmp.run_id}: baseline {cmp.baseline}, {len(cmp.variants)} variant(s), {len(cmp.noise_runs)} noise run(s)")]
    for name in cmp.variants + cmp.noise_runs:
        parts.append(_variant_table(cmp, name, noise=name in cmp.noise_runs))
    timed = any(getattr(p, "timing", None) == "interleaved" for p in cmp.perf)
    how = "interleaved: ratio [95% CI]" if timed else "one sequential pass: ratio, not judged for speed"
    t = Table(title=f"performance vs baseline ({how})", title_justify="left")
    for col in ("variant", "gens", "error rate", "timeout rate", "latency p95 x", "tokens/s x", "peak mem x", "exactness"):
        t.add_column(col)
    for p in cmp.perf:
        t.add_row(
            p.variant + (" (noise)" if p.noise else ""), str(p.generations), _fmt(p.error_rate), _fmt(p.timeout_rate), ratio_cell(p, "latency_p95_ratio"),
            ratio_cell(p, "tokens_per_s_ratio"), _fmt(p.peak_memory_ratio, "{:.2f}"), _fmt(p.exactness) + (f" (n={p.exactness_n})" if p.exactness is not None else ""),
        )  # fmt: skip
    parts.append(t)
    parts += [_markup(f"[yellow]warning:[/yellow] {escape(w)}") for w in cmp.warnings]
    parts += [_markup(f"[red]cannot judge:[/red] {escape(p)}") for p in cmp.problems]
    return Group(*parts)


def _variant_table(cmp: Comparison, name: str, noise: bool) -> Table:
    t = Table(title=f"{name} vs {cmp.baseline}" + (" (noise run)" if noise else ""), title_justify="left", pad_edge=False)
    t.add_column("scenario/metric", no_wrap=True)
    for col in ("n", "base", "var", "delta [95% CI]", "p", "flips -/+", "noise"):
        t.add_column(col, justify="right", no_wrap=True)
    for d in cmp.deltas_for(name):
        nf = cmp.noise_floor(d.scenario, d.metric)
        bad = d.harm > 0 and d.p_worse < 0.05
        delta = f"{_fmt(d.delta, '{:+.3f}')} [{_fmt(d.ci_low, '{:+.2f}')}, {_fmt(d.ci_high, '{:+.2f}')}]"
        t.add_row(
            f"{d.scenario}/{d.metric}" + ("" if d.pass_fail else " (mean)"), str(d.n), _fmt(d.baseline_mean), _fmt(d.variant_mean),
            f"[red]{delta}[/red]" if bad else delta, _p(d.p_value), f"{len(d.pass_to_fail)}/{len(d.fail_to_pass)}" if d.pass_fail else "-",
            "-" if noise or not nf.runs else f"{nf.flips}/{nf.harm:.2f}",
        )  # fmt: skip
    return t
