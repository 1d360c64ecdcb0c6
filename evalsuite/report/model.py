"""What a report shows, computed once from a run: the verdict grid, metric rows, performance rows,
flagged cases with their evidence, and the run signature. The HTML, markdown and terminal views
only format this.

Flagged cases: the offending cases of the gate's violations and warnings (every pass->fail flip of
a violated pass/fail metric, the worst cases of a violated continuous metric), plus every
pass->fail flip of any pass/fail metric of a (non-noise) variant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models.describe import matrix_text, variant_matrix
from ..models.engines import variant_engines
from ..perf.context import context_cost
from ..scoring.evidence import citations_evidence, code_evidence, json_drift_rows, tool_evidence, trim_drops
from ..states import CANNOT_JUDGE, CANNOT_JUDGE_WORD
from .faults import fault_rows
from .frames import LoadedRun, engine_metrics_rows, load_run, perf_rows
from .releases import release_history

if TYPE_CHECKING:
    from ..run.store import RunStore, ScoreRecord
    from ..verdict.compare import Comparison, MetricDelta
    from ..verdict.outcome import Judgment, Verdict

SEVERITY_ORDER = {"block": 0, "warn": 1, "flip": 2}
MAX_FLAGGED = 3000  #: flagged cases rendered with full evidence (the rest are counted)
MAX_TEXT = 20_000  #: characters of an output shown in a diff


@dataclass
class Reason:
    """Why a case is flagged: a rule's violation or warning, or a pass->fail flip."""

    severity: str  #: block | warn | flip
    rule: str | None
    metric: str | None
    text: str


@dataclass
class FlaggedCase:
    """One (variant, case) to look at, with the evidence beside it."""

    variant: str
    case_id: str
    scenario: str
    kind: str
    reasons: list[Reason] = field(default_factory=list)
    baseline_text: str | None = None
    variant_text: str | None = None
    baseline_error: str | None = None
    variant_error: str | None = None
    scores: list[dict] = field(default_factory=list)  #: metric, baseline value/passed, variant value/passed, changed
    json_drift: dict | None = None  #: rows by key path, or the parse errors
    citations: dict | None = None  #: context documents with gold and cited marks
    code: dict | None = None  #: tests, per-side test results, pass@k
    tool_calls: dict | None = None  #: tool_use: both sides' calls by position, key by key, with the tool's schema
    draft: bool = False  #: the case is a draft (`status: draft`, inferred from traffic, not confirmed): it cannot fail a production gate

    @property
    def severity(self) -> str:
        return min((r.severity for r in self.reasons), key=lambda s: SEVERITY_ORDER.get(s, 9), default="flip")

    @property
    def anchor(self) -> str:
        return case_anchor(self.variant, self.case_id)


def case_anchor(variant: str, case_id: str) -> str:
    """The HTML id of a flagged case's card."""
    return "case-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"{variant}--{case_id}")


@dataclass
class ReportData:
    """Everything a report shows."""

    run_id: str
    run_dir: str
    baseline: str
    variants: list[str]
    noise_runs: list[str]
    scenarios: list[str]
    stage: str
    rubric: str
    verdict: Any  #: gate.Verdict, or None when the rubric could not be applied
    verdict_problem: str | None
    grid: list[dict]
    metric_rows: list[dict]
    perf: list[dict]
    flagged: list[FlaggedCase]
    flagged_total: int
    rule_lines: list[dict]
    signature: dict
    models: list[dict]
    notes: list[str]
    comparison: Any = None
    loaded: Any = None
    judgment: Any = None  #: the Judgment the report renders
    releases: Any = None  #: releases.ReleaseHistory: stages cleared per variant and each stage's rollback target (None: no ledger)
    faults: list[dict] = field(default_factory=list)  #: per served variant, each fault probe's outcome (evalsuite.report.faults.fault_rows)
    engine_metrics: list[dict] = field(default_factory=list)  #: per vLLM variant: what its engine's own counters showed (frames.engine_metrics_rows)
    context_cost: dict = field(default_factory=dict)  #: variant -> how its cost grows with context (evalsuite.perf.context)

    @property
    def status(self) -> str:
        """pass | regression | cannot judge | needs review (the verdict's own word)"""
        return CANNOT_JUDGE_WORD if self.verdict is None else self.verdict.status

    @property
    def stage_reason(self) -> str:
        """Why the verdict is for this stage (evalsuite.verdict.outcome.Judgment.stage_reason)."""
        return self.judgment.stage_reason if self.judgment is not None else ""

    @property
    def audit(self) -> dict:
        """The review queue's audit of its flags for this run: the random share of unflagged outputs
        queued and the estimate of the regressions the flags miss (evalsuite.review.api.audit_estimate), or {}."""
        return dict((self.verdict.review or {}).get("audit") or {}) if self.verdict is not None else {}


# ---------------------------------------------------------------------------------------------
# the verdict at a glance


def scenarios_of(verdict: Verdict) -> list[str]:
    """Scenarios a verdict checked, from its rule notes (`checked kb_qa/citations.recall, ...`) and violations."""
    found: dict[str, None] = {}
    for r in verdict.results:
        if r.note.startswith("checked "):
            for m in re.finditer(r"(?:^checked |, )([^/,\s]+)/", r.note):
                found[m.group(1)] = None
        for v in r.violations:
            if v.scenario:
                found[v.scenario] = None
    return list(found)


def variant_status(verdict: Verdict, variant: str) -> str:
    res = [r for r in verdict.results if r.variant == variant]
    if any(r.status == "fail" for r in res):
        return "fail"
    if not verdict.judgeable:
        return CANNOT_JUDGE_WORD
    if any(r.status == "warn" for r in res):
        return "warn"
    return "pass"


def verdict_grid(verdict: Verdict, scenarios: Sequence[str] | None = None) -> list[dict]:
    """Per variant: the overall status and, per scenario (plus `run` for variant-level rules such as
    reliability and performance), fail / warn / ok with the rules behind it."""
    scenarios = list(scenarios) if scenarios is not None else scenarios_of(verdict)
    rows = []
    for variant in verdict.variants:
        cells: dict[str, dict] = {}
        for key in list(scenarios) + ["run"]:
            cells[key] = {"status": "ok" if key != "run" else "n/a", "fail": [], "warn": []}
        checked_run = False
        for r in verdict.results:
            if r.variant != variant:
                continue
            if r.status == "pass" and not r.note.startswith("checked"):
                checked_run = True  # a variant-level rule (reliability, performance) that passed
            if r.status == CANNOT_JUDGE:  # e.g. a timing interval straddling its limit
                cells["run"].setdefault("undecided", []).append(r.rule)
            for v in r.violations:
                key = v.scenario or "run"
                cell = cells.setdefault(key, {"status": "ok", "fail": [], "warn": []})
                bucket = "fail" if r.status == "fail" else "warn"
                if r.rule not in cell[bucket]:
                    cell[bucket].append(r.rule)
        if checked_run and cells["run"]["status"] == "n/a":
            cells["run"]["status"] = "ok"
        for cell in cells.values():
            if cell["fail"]:
                cell["status"] = "fail"
            elif cell.get("undecided"):
                cell["status"] = CANNOT_JUDGE_WORD
                cell["warn"] = cell["warn"] + cell["undecided"]
            elif cell["warn"]:
                cell["status"] = "warn"
        rows.append({"variant": variant, "status": variant_status(verdict, variant), "cells": cells})
    return rows


def rule_lines(verdict: Verdict, top: int = 3) -> list[dict]:
    """One entry per failing or warning rule: its variants, the worst reason and its top cases."""
    out: dict[str, dict] = {}
    for r in verdict.results:
        if r.status not in ("fail", "warn"):
            continue
        e = out.setdefault(r.rule, {"rule": r.rule, "status": "fail", "severity": r.severity, "variants": [], "violations": [], "cases": {}})
        if r.status == "fail":
            e["status"] = "fail"
        elif not any(x.status == "fail" for x in verdict.results if x.rule == r.rule):
            e["status"] = "warn"
        if r.variant not in e["variants"]:
            e["variants"].append(r.variant)
        for v in r.violations:
            e["violations"].append(v)
            for i, c in enumerate(v.cases):
                e["cases"][c] = min(e["cases"].get(c, i), i)  # best rank within any violation
                e.setdefault("case_variant", {}).setdefault(c, v.variant)
    lines = []
    for e in out.values():
        counts: dict[str, int] = {}
        for v in e["violations"]:
            for c in v.cases:
                counts[c] = counts.get(c, 0) + 1
        # top cases: those most variants share, then by rank within a violation
        ranked = sorted(counts, key=lambda c: (-counts[c], e["cases"][c], c))
        worst = max(e["violations"], key=lambda v: (v.numbers.get("pass_to_fail") or 0, abs(v.numbers.get("delta") or 0)), default=None)
        # a violation lists at most gate.MAX_CASES_SHOWN cases; its numbers count every flip
        n_cases = max(
            [len(ranked)] + [int(v.numbers.get("pass_to_fail") or 0) for v in e["violations"] if isinstance(v.numbers.get("pass_to_fail"), (int, float))]
        )
        lines.append(
            {
                "rule": e["rule"],
                "status": e["status"],
                "variants": e["variants"],
                "top_cases": ranked[:top],
                "n_cases": n_cases,
                "top_links": [{"case": c, "anchor": case_anchor(e["case_variant"][c], c)} for c in ranked[:top]],
                "reason": worst.reason if worst is not None else "",
                "worst_variant": worst.variant if worst is not None else "",
                "violations": len(e["violations"]),
            }
        )
    lines.sort(key=lambda x: (x["status"] != "fail", x["rule"]))
    return lines


# ---------------------------------------------------------------------------------------------
# evidence of one flagged case


def _fmt_val(x: object) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def _score_rows(base: Mapping[str, ScoreRecord], var: Mapping[str, ScoreRecord]) -> list[dict]:
    rows = []
    for m in sorted(set(base) | set(var)):
        b, v = base.get(m), var.get(m)
        bv, vv = (None if b is None else b.value), (None if v is None else v.value)
        bp, vp = (None if b is None else b.passed), (None if v is None else v.passed)
        if bv is None and vv is None and bp is None and vp is None:
            continue
        changed = (bp is not None and vp is not None and bp != vp) or (bv is not None and vv is not None and abs(bv - vv) > 1e-9)
        worse = bool(bp) and vp is False
        rows.append(
            {"metric": m, "baseline": _fmt_val(bv), "baseline_passed": bp, "variant": _fmt_val(vv), "variant_passed": vp, "changed": changed, "worse": worse}
        )
    return rows


# ---------------------------------------------------------------------------------------------
# building the report


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters)"


def _models(suite: Mapping, signature: Mapping) -> list[dict]:
    """The variant matrix: per variant its backend, model, what its weights are (method, bits,
    scheme, library, checkpoint and revision: evalsuite.models.describe), what it changes, its fingerprint."""
    fps = signature.get("variants") or {}
    variants = list(suite.get("variants") or [])
    matrix = variant_matrix(variants, dict(signature))
    engines = variant_engines(variants, dict(signature))
    out = []
    for v in variants:
        name = v.get("name")
        row = matrix[name]
        out.append(
            {
                "name": name,
                "baseline": bool(v.get("baseline")),
                "noise": bool(v.get("noise")),
                "backend": v.get("backend"),
                "engine": engines[name],
                "model": v.get("model") or "-",
                "matrix": row,
                "matrix_text": matrix_text(row),
                "speculative": v.get("speculative") or None,
                "changes": ", ".join(v.get("changes") or []),
                "fingerprint": (fps.get(name) or "")[:16],
            }
        )
    return out


def build_report_data(judgment: Judgment, *, loaded: LoadedRun | None = None, ledger: str | Path | None = None) -> ReportData:
    """Everything a report shows of a judged run (evalsuite.judge.judge_run's Judgment): the verdict
    as judged, never judged again here, and the evidence of every flagged case."""
    lr = loaded or load_run(judgment.store, comparison=judgment.comparison)
    cmp, verdict = judgment.comparison, judgment.verdict
    notes = list(cmp.warnings) + ([lr.case_problem] if lr.case_problem else []) + list(verdict.notes)
    ordered = flagged_cases(verdict, cmp, lr)
    total = len(ordered)
    ordered = ordered[:MAX_FLAGGED]
    if total > len(ordered):
        notes.append(f"{total} flagged cases; the first {len(ordered)} (most severe first) are shown with their evidence")
    add_evidence(ordered, cmp, lr)
    scenarios = list(cmp.scenarios)
    return ReportData(
        run_id=lr.store.run_id,
        run_dir=str(lr.store.dir),
        baseline=cmp.baseline,
        variants=list(cmp.variants),
        noise_runs=list(cmp.noise_runs),
        scenarios=scenarios,
        stage=judgment.stage,
        rubric=str(judgment.rubric.path),
        verdict=verdict,
        verdict_problem=None,
        grid=verdict_grid(verdict, scenarios),
        metric_rows=metric_rows(verdict, cmp),
        perf=perf_rows(lr.summaries, cmp, cmp.baseline, lr.suite),
        flagged=ordered,
        flagged_total=total,
        rule_lines=rule_lines(verdict),
        signature=lr.signature,
        models=_models(lr.suite, lr.signature),
        notes=list(dict.fromkeys(notes)),
        comparison=cmp,
        loaded=lr,
        judgment=judgment,
        releases=release_history(judgment, ledger),
        faults=fault_rows(lr.store),
        engine_metrics=engine_metrics_rows(lr.summaries, lr.suite),
        context_cost=context_cost(lr.generations),
    )


def _row_status(verdict: Verdict) -> dict[tuple, dict]:
    """(variant, scenario, metric) -> its status under the rubric (fail / warn) and the rules behind it."""
    row_status: dict[tuple, dict] = {}
    for r in verdict.results:
        for v in r.violations:
            st = row_status.setdefault((v.variant, v.scenario, v.metric), {"status": "ok", "rules": []})
            st["rules"].append(r.rule)
            if r.status == "fail":
                st["status"] = "fail"
            elif st["status"] != "fail":
                st["status"] = "warn"
    return row_status


def metric_rows(verdict: Verdict, cmp: Comparison) -> list[dict]:
    """One row per (variant, scenario, metric) delta, with its noise floor and status under the rubric."""
    row_status = _row_status(verdict)
    rows = []
    for d in cmp.deltas:
        nf = cmp.noise_floor(d.scenario, d.metric)
        st = row_status.get((d.variant, d.scenario, d.metric), {"status": "ok", "rules": []})
        rows.append(
            {
                "variant": d.variant,
                "noise_run": d.noise,
                "scenario": d.scenario,
                "metric": d.metric,
                "stat": "pass rate" if d.pass_fail else "mean",
                "n": d.n,
                "baseline": d.baseline_mean,
                "value": d.variant_mean,
                "delta": d.delta,
                "ci_low": d.ci_low,
                "ci_high": d.ci_high,
                "p_value": d.p_value,
                "p_worse": d.p_worse,
                "pass_to_fail": len(d.pass_to_fail),
                "fail_to_pass": len(d.fail_to_pass),
                "pass_fail": d.pass_fail,
                "higher_is_better": d.higher_is_better,
                "harm": d.harm if d.n else 0.0,
                "noise": None if d.noise or not nf.runs else {"flips": nf.flips, "delta": nf.harm, "runs": list(nf.runs)},
                "status": st["status"],
                "rules": st["rules"],
                "flagged": st["status"] != "ok" or (bool(d.pass_to_fail) and not d.noise),
            }
        )
    return rows


def flagged_cases(verdict: Verdict, cmp: Comparison, lr: LoadedRun) -> list[FlaggedCase]:
    """Every (variant, case) a failing or warning rule names, and every pass->fail flip, most severe first."""
    flagged: dict[tuple[str, str], FlaggedCase] = {}
    scen_of: dict[str, tuple[str, str]] = {r.case_id: (r.scenario, r.kind) for r in lr.records}
    for cid, c in lr.cases.items():
        scen_of.setdefault(cid, (c.scenario, c.kind))

    def add(variant: str, case_id: str, reason: Reason) -> None:
        scen, kind = scen_of.get(case_id, ("", ""))
        case = lr.cases.get(case_id)
        fc = flagged.setdefault((variant, case_id), FlaggedCase(variant, case_id, scen, kind, draft=bool(case is not None and case.draft)))
        if not any(r.rule == reason.rule and r.metric == reason.metric and r.severity == reason.severity for r in fc.reasons):
            fc.reasons.append(reason)

    deltas: dict[tuple[str, str | None, str | None], MetricDelta] = {(d.variant, d.scenario, d.metric): d for d in cmp.deltas}
    for r in verdict.results:
        if r.status not in ("fail", "warn"):
            continue
        sev = "block" if r.status == "fail" else "warn"
        for v in r.violations:
            d = deltas.get((v.variant, v.scenario, v.metric))
            for c in (d.pass_to_fail if d is not None and d.pass_fail else v.cases) or v.cases:
                add(v.variant, c, Reason(sev, r.rule, v.metric, v.reason))
    for d in cmp.deltas:
        if d.noise or d.variant not in cmp.variants:
            continue
        for c in d.pass_to_fail:
            fc = flagged.get((d.variant, c))
            if fc is not None and any(r.metric == d.metric for r in fc.reasons):
                continue  # a rule already names this flip
            add(d.variant, c, Reason("flip", None, d.metric, f"{d.scenario}/{d.metric}: passed on the baseline, fails on {d.variant}"))
    order = {v: i for i, v in enumerate(cmp.variants)}
    return sorted(flagged.values(), key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), order.get(f.variant, 99), f.scenario, f.case_id))


def add_evidence(flagged: Sequence[FlaggedCase], cmp: Comparison, lr: LoadedRun) -> None:
    """Fill each flagged case's outputs, scores, JSON drift, citations and test results."""
    if not flagged:
        return
    gens = {(g.variant, g.case_id): g for g in lr.generations if g.sample == 0}
    wanted = {(f.variant, f.case_id) for f in flagged} | {(cmp.baseline, f.case_id) for f in flagged}
    recs: dict[tuple[str, str], dict[str, ScoreRecord]] = {}
    for r in lr.records:
        if (r.variant, r.case_id) in wanted and r.sample in (0, None) and not r.metric.endswith(".scorer_error"):
            recs.setdefault((r.variant, r.case_id), {})[r.metric] = r
    for f in flagged:
        gb, gv = gens.get((cmp.baseline, f.case_id)), gens.get((f.variant, f.case_id))
        f.baseline_text = _clip(gb.text) if gb is not None else None
        f.variant_text = _clip(gv.text) if gv is not None else None
        f.baseline_error = gb.error if gb is not None else "no stored generation"
        f.variant_error = gv.error if gv is not None else "no stored generation"
        base_recs, var_recs = recs.get((cmp.baseline, f.case_id), {}), recs.get((f.variant, f.case_id), {})
        f.scores = _score_rows(base_recs, var_recs)
        case = lr.cases.get(f.case_id)
        if f.scenario == "brand" or "json.parsed" in base_recs or "json.valid" in base_recs or (case is not None and case.json_schema):
            f.json_drift = json_drift_rows(f.baseline_text, f.variant_text)
        f.citations = citations_evidence(case, f.baseline_text, f.variant_text, dropped=trim_drops([gv]).get((f.variant, f.case_id), ()) if gv else ())
        if f.scenario == "code" or (case is not None and case.expect.tests):
            f.code = code_evidence(case, {"baseline": base_recs, "variant": var_recs})
        f.tool_calls = tool_evidence(case, f.baseline_text, f.variant_text)


def quality_delta(rows: Sequence[Mapping], variant: str) -> float | None:
    """One number per variant for the trade-off plot: the mean pass-rate delta over its pass/fail metrics."""
    xs = [r["delta"] for r in rows if r["variant"] == variant and r["pass_fail"] and r["n"] and r["delta"] is not None and not math.isnan(r["delta"])]
    return sum(xs) / len(xs) if xs else None


def worst_delta(rows: Sequence[Mapping], variant: str) -> Mapping | None:
    xs = [r for r in rows if r["variant"] == variant and r["pass_fail"] and r["n"] and r["delta"] is not None and not math.isnan(r["delta"])]
    return min(xs, key=lambda r: r["delta"]) if xs else None


def default_report_dir(store: RunStore) -> Path:
    """`reports/<run-id>/`: beside the `runs/` folder a run lives in, else under ./reports."""
    d = Path(store.dir)
    if d.parent.name == "runs":
        return d.parent.parent / d.name
    return Path("reports") / d.name


__all__ = ["ReportData", "FlaggedCase", "Reason", "build_report_data", "verdict_grid", "rule_lines", "scenarios_of", "default_report_dir"]
