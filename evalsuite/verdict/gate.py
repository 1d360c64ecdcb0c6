"""The gate: rubric rules applied to a comparison, giving a verdict with evidence.

Exit codes of `evalsuite gate`: 0 pass, 1 regression (a block rule failed), 2 cannot judge (bad
rubric, missing data, run incomplete), 3 needs review (nothing failed, but more flagged outputs
await human review than the rubric's `review.max_open`). Warn rules are reported and never fail the gate.
Human verdicts from the review queue (evalsuite.review) waive accepted outputs and fail the
`human-review` rule on outputs judged a regression (see evalsuite/review/decisions.py).

Multiple testing: a variant is judged by several significance-gated block checks at once (one per
rule and matching scenario/metric). Their one-sided p-values are corrected together, so the chance
that an unchanged variant fails the gate on noise alone stays at or below the rubric's `alpha`.
The default is Tarone's modified Bonferroni, made for discrete tests: an exact McNemar test with
few discordant cases cannot reach a small p-value, so it is left out of the count, and a planted
regression in one metric is not diluted by the metrics that did not move. `holm` and `bonferroni`
(statsmodels' `multipletests`) are available too. Warn checks use the raw p-values.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError
from .compare import Comparison, MetricDelta, compare_run
from .rubric import MetricRule, Rubric, StageRubric, VariantRule, default_rubric_path, load_rubric

MAX_CASES_SHOWN = 10
MAX_DIFFS = 3
DIFF_WIDTH = 240


@dataclass(frozen=True)
class Violation:
    """One broken rule for one variant (and scenario/metric), with the evidence to act on it."""

    rule: str
    severity: str  #: block | warn
    variant: str
    scenario: str | None
    metric: str | None
    reason: str
    numbers: dict = field(default_factory=dict)  #: baseline, variant, delta, CI, p, flips, noise floor...
    cases: tuple[str, ...] = ()  #: offending case ids (pass->fail, or worst first)
    diffs: tuple[str, ...] = ()  #: short baseline -> variant output diffs of the first offending cases

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule for one variant: pass, fail (block), warn, skip (not applicable), missing,
    or cannot_judge (a performance interval straddles its limit; exit 2 unless another block rule fails)."""

    variant: str
    rule: str
    severity: str
    status: str
    violations: tuple[Violation, ...] = ()
    note: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "violations": [v.to_dict() for v in self.violations]}


@dataclass(frozen=True)
class Verdict:
    """Did quality regress? `passed` is False when a block rule failed or the run cannot be judged."""

    passed: bool
    judgeable: bool
    stage: str
    rubric: str
    run_id: str
    baseline: str
    variants: tuple[str, ...]
    results: tuple[RuleResult, ...]
    problems: tuple[str, ...] = ()  #: why the run cannot be judged
    notes: tuple[str, ...] = ()
    needs_review: bool = False  #: more open review items than the rubric's review.max_open (exit 3 when nothing failed)
    review: dict = field(default_factory=dict)  #: what the review queue decided (evalsuite.review.decisions)

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(v for r in self.results if r.status == "fail" for v in r.violations)

    @property
    def warnings(self) -> tuple[Violation, ...]:
        return tuple(v for r in self.results if r.status == "warn" for v in r.violations)

    @property
    def exit_code(self) -> int:
        if not self.judgeable:
            return 2
        return (3 if self.needs_review else 0) if self.passed else 1

    def result(self, variant: str, rule: str) -> RuleResult | None:
        return next((r for r in self.results if r.variant == variant and r.rule == rule), None)

    def failed_rules(self, variant: str | None = None) -> list[str]:
        return [r.rule for r in self.results if r.status == "fail" and (variant is None or r.variant == variant)]

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "judgeable": self.judgeable,
            "exit_code": self.exit_code,
            "stage": self.stage,
            "rubric": self.rubric,
            "run_id": self.run_id,
            "baseline": self.baseline,
            "variants": list(self.variants),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "needs_review": self.needs_review,
            "review": self.review,
            "violations": [v.to_dict() for v in self.violations],
            "warnings": [v.to_dict() for v in self.warnings],
            "results": [r.to_dict() for r in self.results],
        }


# ---------------------------------------------------------------------------------------------
# evidence


def short_diff(before: str | None, after: str | None, width: int = DIFF_WIDTH) -> str:
    """A one-paragraph word diff, `[-removed-]{+added+}`, trimmed around the changes."""
    if before is None or after is None:
        return "(output not stored)"
    a, b = before.split(), after.split()
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    parts: list[str] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            seg = a[i1:i2]
            if len(seg) > 8:
                seg = seg[:3] + ["..."] + seg[-3:] if parts else ["..."] + seg[-4:]
            parts.append(" ".join(seg))
        else:
            if i2 > i1:
                parts.append("[-" + " ".join(a[i1:i2]) + "-]")
            if j2 > j1:
                parts.append("{+" + " ".join(b[j1:j2]) + "+}")
    text = " ".join(p for p in parts if p)
    if not any(op != "equal" for op, *_ in sm.get_opcodes()):
        text = "(identical text)" if before == after else "(whitespace differs only)"
    return text if len(text) <= width else text[: width - 3] + "..."


def _nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _numbers(d: MetricDelta, noise, p_adj: float | None) -> dict:
    return {
        "stat": "pass rate" if d.pass_fail else "mean",
        "n": d.n,
        "baseline": _nan(d.baseline_mean),
        "variant": _nan(d.variant_mean),
        "delta": _nan(d.delta),
        "ci95": [_nan(d.ci_low), _nan(d.ci_high)],
        "p_value": _nan(d.p_value),
        "p_worse": _nan(d.p_worse),
        "p_adjusted": _nan(p_adj),
        "pass_to_fail": len(d.pass_to_fail),
        "fail_to_pass": len(d.fail_to_pass),
        "noise_flips": noise.flips if noise is not None else None,
        "noise_delta": noise.harm if noise is not None else None,
        "noise_runs": list(noise.runs) if noise is not None else [],
        "missing_in_variant": len(d.missing_in_variant),
    }


def _evidence(cmp: Comparison, d: MetricDelta) -> tuple[tuple[str, ...], tuple[str, ...]]:
    cases = tuple(d.offending[:MAX_CASES_SHOWN])
    diffs = []
    for c in cases[:MAX_DIFFS]:
        detail = d.details.get(c) or {}
        hint = ", ".join(
            f"{k}={v}" for k, v in detail.items() if k in ("missing", "invalid", "hits", "canaries", "reason", "error", "status", "not_gold", "phrase") and v
        )
        diffs.append(f"{c}: {short_diff(cmp.output(cmp.baseline, c), cmp.output(d.variant, c))}" + (f"  [{hint[:160]}]" if hint else ""))
    return cases, tuple(diffs)


# ---------------------------------------------------------------------------------------------
# the gate


def tarone_k(p_min: Sequence[float], alpha: float) -> int:
    """Tarone's K: the smallest K such that at most K tests can reach p <= alpha/K at all.

    A discrete test that cannot reach a small p (an exact McNemar test with 2 discordant cases can
    never go below 0.25) cannot cause a false alarm, so it need not use up the error budget
    (Tarone 1990, Biometrics 46:515). With every test able to reach 0, K is the family size.
    """
    m = len(p_min)
    for k in range(1, m + 1):
        if sum(1 for p in p_min if p <= alpha / k) <= k:
            return k
    return max(m, 1)


def adjust_pvalues(pvals: Sequence[float], p_min: Sequence[float], method: str, alpha: float) -> list[float]:
    """Family-wise adjusted p-values: tarone (modified Bonferroni), holm, bonferroni (statsmodels) or none."""
    if not pvals or method == "none":
        return list(pvals)
    if method == "tarone":
        k = tarone_k(p_min, alpha)
        return [min(1.0, p * k) if pm <= alpha / k else 1.0 for p, pm in zip(pvals, p_min)]
    from statsmodels.stats.multitest import multipletests

    return [float(x) for x in multipletests(list(pvals), method=method)[1]]


def gate(comparison: Comparison, rubric: Rubric | StageRubric, stage: str = "production", *, judge_noise: bool = False, reviews=None) -> Verdict:
    """Apply a rubric's rules for `stage` to a comparison; every (variant, rule) gets a result.

    `judge_noise`: also judge the noise runs as if they were variants (a noise run that fails
    shows the gate is more sensitive than the run-to-run noise).
    `reviews`: human verdicts on this run's outputs (`evalsuite.review.api.reviews_for_run`).
    """
    sr = rubric if isinstance(rubric, StageRubric) else rubric.for_stage(stage)
    if reviews is not None:  # human verdicts (evalsuite.review.decisions.ReviewDecisions): waive, fail, needs review
        from ..review.decisions import apply_reviews

        return apply_reviews(comparison, reviews, lambda c: gate(c, sr, stage, judge_noise=judge_noise), sr)
    problems = list(comparison.problems)
    notes: list[str] = []
    judged = list(comparison.variants) + (list(comparison.noise_runs) if judge_noise else [])
    if not judged:
        notes.append("no variant to judge besides the baseline" + (" (noise runs are only a noise floor)" if comparison.noise_runs else ""))
    uses_noise = any(isinstance(r, MetricRule) and r.above_noise for r in sr.rules)
    if uses_noise and not comparison.noise_runs:
        notes.append("no noise run in this run: `above_noise` checks use a noise floor of 0 (add a `noise: true` rerun of the baseline)")
    results: list[RuleResult] = []
    for variant in judged:
        deltas = comparison.deltas_for(variant)
        # the significance family: every significance-gated block check of this variant
        family: list[tuple[int, int]] = []  # (rule index, delta index)
        matches: dict[int, list[int]] = {}
        for ri, rule in enumerate(sr.rules):
            if isinstance(rule, MetricRule):
                matches[ri] = [di for di, d in enumerate(deltas) if rule.matches(d.scenario, d.metric) and d.n > 0]
                if rule.severity == "block" and rule.significance_gated:
                    family += [(ri, di) for di in matches[ri]]
        pv = [deltas[di].p_worse for _, di in family]
        adjusted = dict(zip(family, adjust_pvalues(pv, [deltas[di].p_min for _, di in family], sr.multiple_testing, sr.alpha)))
        for ri, rule in enumerate(sr.rules):
            if isinstance(rule, MetricRule):
                results.append(_judge_metric_rule(comparison, rule, variant, deltas, matches[ri], adjusted, ri, problems))
            else:
                results.append(_judge_variant_rule(comparison, rule, variant, problems))
    if not any(r.status == "fail" for r in results):  # a sure regression outranks a performance check that cannot be judged
        problems += [f"rule {r.rule}: {r.variant}: cannot judge: {r.note}" for r in results if r.status == "cannot_judge" and r.severity == "block"]
    judgeable = not problems
    passed = judgeable and not any(r.status == "fail" for r in results)
    return Verdict(
        passed,
        judgeable,
        sr.stage,
        sr.path,
        comparison.run_id,
        comparison.baseline,
        tuple(judged),
        tuple(results),
        tuple(dict.fromkeys(problems)),
        tuple(notes),
    )


def _judge_metric_rule(
    cmp: Comparison, rule: MetricRule, variant: str, deltas: list[MetricDelta], idx: list[int], adjusted: dict, ri: int, problems: list[str]
) -> RuleResult:
    if not idx:
        where = "any scenario" if "*" in rule.scenarios else "/".join(rule.scenarios)
        present = "*" in rule.scenarios or any(s in cmp.scenarios for s in rule.scenarios)
        note = f"no paired scores of {rule.metric} in {where}" + ("" if present else " (scenario not in this run)")
        if rule.required and present:
            problems.append(f"rule {rule.name}: {note} for {variant}")
            return RuleResult(variant, rule.name, rule.severity, "missing", note=note)
        return RuleResult(variant, rule.name, rule.severity, "skip", note=note)
    violations = []
    for di in idx:
        d = deltas[di]
        noise = cmp.noise_floor(d.scenario, d.metric)
        p_adj = adjusted.get((ri, di)) if rule.severity == "block" else None
        reason = rule.fails(d, noise, p_adj)
        if reason:
            cases, diffs = _evidence(cmp, d)
            violations.append(
                Violation(
                    rule.name, rule.severity, variant, d.scenario, d.metric, f"{d.scenario}/{d.metric}: {reason}", _numbers(d, noise, p_adj), cases, diffs
                )
            )
    status = ("fail" if rule.severity == "block" else "warn") if violations else "pass"
    checked = ", ".join(f"{deltas[i].scenario}/{deltas[i].metric}" for i in idx)
    return RuleResult(variant, rule.name, rule.severity, status, tuple(violations), note=f"checked {checked}")


def _judge_variant_rule(cmp: Comparison, rule: VariantRule, variant: str, problems: list[str]) -> RuleResult:
    perf = cmp.perf_for(variant)
    if perf is None:
        note = "no performance summary (variants.json) for this variant"
        if rule.required:
            problems.append(f"rule {rule.name}: {note}: {variant}")
            return RuleResult(variant, rule.name, rule.severity, "missing", note=note)
        return RuleResult(variant, rule.name, rule.severity, "skip", note=note)
    if not rule.applies(perf):
        return RuleResult(variant, rule.name, rule.severity, "skip", note="the variant does not change speculative decoding")
    missing = rule.missing(perf)
    if missing and rule.required:
        problems.append(f"rule {rule.name}: {variant} lacks {', '.join(missing)}")
        return RuleResult(variant, rule.name, rule.severity, "missing", note=f"lacks {', '.join(missing)}")
    noise = [p for p in cmp.perf if p.noise and p.variant != variant]  # the noise floor of interleaved timings
    reason = rule.fails(perf, noise=noise)
    note = f"not checked (no data): {', '.join(missing)}" if missing else ""
    if not reason:
        undecided = rule.undecided(perf, noise=noise)  # an interval straddling a limit: neither pass nor fail
        return RuleResult(variant, rule.name, rule.severity, "cannot_judge" if undecided else "pass", note="; ".join(x for x in (undecided, note) if x))
    cases: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()
    if rule.min_exactness is not None and perf.exactness is not None and perf.exactness < rule.min_exactness:
        d = next((x for x in cmp.deltas_for(variant) if x.metric == "exactness.identical"), None)
        if d is not None:
            cases, diffs = _evidence(cmp, d)
    v = Violation(rule.name, rule.severity, variant, None, None, reason, perf.to_dict(), cases, diffs)
    return RuleResult(variant, rule.name, rule.severity, "fail" if rule.severity == "block" else "warn", (v,), note=note)


# ---------------------------------------------------------------------------------------------
# front doors: the CLI, the demo and the pytest plugin


def resolve_rubric_path(store, rubric_path: str | Path | None) -> Path:
    """The rubric to use: the one given, else the run's suite's, else rubrics/default.yaml."""
    if rubric_path:
        return Path(rubric_path)
    suite_rubric = (store.suite or {}).get("rubric") if store is not None else None
    if suite_rubric:
        return Path(suite_rubric)
    return default_rubric_path()


def gate_run(
    store, rubric_path: str | Path | None = None, stage: str = "production", *, judge_noise: bool = False, queue: str | Path | None = None, flag: bool = False
) -> Verdict:
    """Compare a stored run and judge it, with the review queue's verdicts when a queue exists
    (the demo's and the plugin's entry point); `flag`: first flag the run's differences into it."""
    from ..review.api import reviews_for_run

    rubric = load_rubric(resolve_rubric_path(store, rubric_path))
    if (store.dir / "adaptive.json").is_file():  # an adaptive run: its sequential decisions, not a fixed-n test on a peeked sample
        return _adaptive_gate_run(store, rubric, stage, judge_noise, queue, flag)
    cmp = compare_run(store)
    return gate(cmp, rubric, stage, judge_noise=judge_noise, reviews=reviews_for_run(store, cmp, rubric, queue, flag=flag))


def _adaptive_gate_run(store, rubric: Rubric, stage: str, judge_noise: bool, queue, flag: bool) -> Verdict:
    """An adaptive run's verdict with the review queue's regressions and open items; accepted
    outputs are not waived: the sequential decision was taken on every generated case, in order."""
    from dataclasses import replace

    from ..adaptive.gating import adaptive_gate
    from ..review.api import reviews_for_run
    from ..review.decisions import apply_reviews

    verdict = adaptive_gate(store, rubric, stage, judge_noise=judge_noise)
    cmp = compare_run(store, n_resamples=99)
    reviews = reviews_for_run(store, cmp, rubric, queue, flag=flag)
    if reviews is None:
        return verdict
    merged = apply_reviews(cmp, replace(reviews, accepted={}), lambda _c: verdict, rubric.for_stage(stage))
    if reviews.accepted:
        n = sum(len(c) for c in reviews.accepted.values())
        merged = replace(
            merged, notes=merged.notes + (f"review: {n} accepted output(s) not waived: an adaptive run's sequential decision uses every generated case",)
        )
    return merged


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(i) for i in x) + "]"
    return str(x)


def violation_text(v: Violation) -> str:
    """A violation as plain text (pytest failures, logs)."""
    head = f"[{v.severity}] {v.rule} - {v.variant}: {v.reason}"
    lines = [head]
    keys = ("stat", "n", "baseline", "variant", "delta", "ci95", "p_worse", "p_adjusted", "pass_to_fail", "fail_to_pass", "noise_flips")
    nums = ", ".join(f"{k}={_fmt(v.numbers[k])}" for k in keys if k in v.numbers)
    if nums:
        lines.append(f"    numbers: {nums}")
    if v.cases:
        lines.append(f"    offending cases ({len(v.cases)} shown): {', '.join(v.cases)}")
    for d in v.diffs:
        lines.append(f"    diff {d}")
    return "\n".join(lines)


def format_verdict(verdict: Verdict, console) -> None:
    """Print the verdict: a headline, each violated rule with its evidence, warnings, problems."""
    from rich.markup import escape
    from rich.table import Table

    if not verdict.judgeable:
        console.print(f"[bold yellow]CANNOT JUDGE[/bold yellow] run {verdict.run_id} (stage {verdict.stage})")
    elif verdict.passed and verdict.needs_review:
        console.print(
            f"[bold yellow]NEEDS REVIEW[/bold yellow] run {verdict.run_id}: no rule failed, but {verdict.review.get('open')} flagged output(s) await review (max_open {verdict.review.get('max_open')}), stage {verdict.stage}"
        )
    elif verdict.passed:
        console.print(
            f"[bold green]PASS[/bold green] run {verdict.run_id}: {len(verdict.variants)} variant(s) vs {verdict.baseline}, stage {verdict.stage}, rubric {verdict.rubric}"
        )
    else:
        console.print(
            f"[bold red]REGRESSION[/bold red] run {verdict.run_id}: {len(verdict.violations)} violation(s), stage {verdict.stage}, rubric {verdict.rubric}"
        )
    t = Table(title="rules", title_justify="left", pad_edge=False)
    t.add_column("rule", no_wrap=True)
    for variant in verdict.variants:
        t.add_column(variant, no_wrap=True)
    style = {
        "pass": "[green]ok[/green]",
        "fail": "[red]FAIL[/red]",
        "warn": "[yellow]warn[/yellow]",
        "skip": "[dim]n/a[/dim]",
        "missing": "[yellow]missing[/yellow]",
        "cannot_judge": "[yellow]cannot judge[/yellow]",
    }
    for rule in dict.fromkeys(r.rule for r in verdict.results):
        row = [rule]
        for variant in verdict.variants:
            res = verdict.result(variant, rule)
            row.append(style.get(res.status, res.status) if res else "")
        t.add_row(*row)
    if verdict.variants and verdict.results:
        console.print(t)
    for v in verdict.violations + verdict.warnings:
        color = "red" if v.severity == "block" else "yellow"
        console.print(f"[{color}]{escape(violation_text(v))}[/{color}]", highlight=False)
    for n in verdict.notes:
        console.print(f"[dim]note: {escape(n)}[/dim]", highlight=False)
    for p in verdict.problems:
        console.print(f"[yellow]cannot judge:[/yellow] {escape(p)}", highlight=False)


def write_verdict_json(verdict: Verdict, path: str | Path) -> None:
    from ..yamlio import atomic_write_text

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(path), json.dumps(verdict.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")


def cli_gate(
    run: str,
    runs_dir: str | Path,
    rubric_path: str | Path | None,
    stage: str,
    json_out: str | Path | None,
    console,
    *,
    flag: bool = False,
    queue: str | Path | None = None,
    verbose: bool = True,
) -> int:
    """`evalsuite gate RUN`: print the verdict (the full evidence with `verbose`, else one line per
    rule: evalsuite.report.terminal); 0 pass, 1 regression, 2 cannot judge, 3 needs review."""
    from ..run.store import RunStore

    def cannot(msg: str) -> int:
        console.print(f"[bold yellow]CANNOT JUDGE[/bold yellow]: {msg}", highlight=False)
        if json_out:
            from ..yamlio import atomic_write_text

            Path(json_out).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(
                Path(json_out), json.dumps({"passed": False, "judgeable": False, "exit_code": 2, "stage": stage, "problems": [msg]}, indent=2) + "\n"
            )
        return 2

    try:
        store = RunStore.find(runs_dir, run)
        rubric = load_rubric(resolve_rubric_path(store, rubric_path))
        rubric.for_stage(stage)
        verdict = gate_run(store, rubric_path, stage, queue=queue, flag=flag)
    except EvalsuiteError as exc:
        return cannot(str(exc))
    if verbose:
        format_verdict(verdict, console)
    else:
        from ..report.terminal import print_verdict

        print_verdict(verdict, console)
    if json_out:
        write_verdict_json(verdict, json_out)
    return verdict.exit_code
