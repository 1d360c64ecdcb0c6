"""`evalsuite demo`: the demo suite on the embedded model, a per-variant table, and the gate's verdict.

The quick profile runs a few cases per scenario (under 15 minutes on 2 CPU cores from a warm model
cache); the full profile runs every case. Both write a normal run under reports/runs/, so the
`compare`, `gate` and `report` commands work on it afterwards.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import EvalsuiteError
from .models.describe import matrix_text, variant_matrix
from .verdict.decisions import REVIEW_RULE

if TYPE_CHECKING:
    from rich.console import Console

    from .cases.suite import Suite
    from .run.runner import RunResult
    from .run.store import RunStore
    from .verdict.outcome import Judgment

log = logging.getLogger("evalsuite")

#: cases per scenario of each profile (None: all)
PROFILES = {"quick": 3, "full": None}


def identical_share(generations, baseline: str) -> dict[str, dict]:
    """Per variant: how many outputs are identical to the baseline's for the same case and sample."""
    base = {(g.case_id, g.sample): g for g in generations if g.variant == baseline and g.ok}
    out: dict[str, dict] = {}
    for g in generations:
        if not g.ok or (g.case_id, g.sample) not in base:
            continue
        b = base[(g.case_id, g.sample)]
        ids_b, ids_v = b.extra.get("token_ids"), g.extra.get("token_ids")
        same = (ids_b == ids_v) if ids_b is not None and ids_v is not None else (b.text == g.text)
        d = out.setdefault(g.variant, {"pairs": 0, "identical": 0})
        d["pairs"] += 1
        d["identical"] += int(same)
    for d in out.values():
        d["share"] = d["identical"] / d["pairs"] if d["pairs"] else None
    return out


def _logit_means(records) -> dict[str, dict]:
    acc: dict[str, dict[str, list]] = {}
    for r in records:
        if r.value is None:
            continue
        acc.setdefault(r.variant, {}).setdefault(r.metric, []).append(r.value)
    return {v: {m: statistics.fmean(xs) for m, xs in ms.items()} for v, ms in acc.items()}


def weights_mb(generations) -> dict[str, float]:
    """Per variant: the loaded weights' size (reported by the transformers backend)."""
    out: dict[str, float] = {}
    for g in generations:
        mb = g.extra.get("model_mb") if g.extra else None
        if mb:
            out[g.variant] = max(out.get(g.variant, 0.0), float(mb))
    return out


def print_demo_table(
    console, summaries: dict, same: dict, logits: dict, cases_per_variant: dict, weights: dict | None = None, matrix: dict | None = None
) -> None:
    """The demo's per-variant table; `matrix`: variant -> its weights and decoding in words (the variant
    matrix, evalsuite.models.describe.matrix_text), else the fields the variant changes. Compact
    (no vertical rules, one-line headers) so it fits a 120-column terminal; the weights column wraps."""
    from rich import box
    from rich.table import Table

    t = Table(
        title="variants vs the baseline (lat = latency, TTFT = time to first token, tok/s: medians per request; MB: weights "
        "loaded; same: outputs identical to the baseline's; KL, top-1: logit agreement)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    t.add_column("variant", no_wrap=True)
    t.add_column("weights / decoding", max_width=48)
    for col in ("cases", "err", "lat s", "TTFT s", "tok/s", "MB", "peak MB", "same", "KL", "top-1"):
        t.add_column(col, justify="right", no_wrap=True)

    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    for name, s in summaries.items():
        sm = same.get(name, {})
        share = sm.get("share")
        ident = "-" if share is None else f"{sm['identical']}/{sm['pairs']}"
        lg = logits.get(name, {})
        t.add_row(
            name,
            (matrix or {}).get(name) or ",".join(c[:5] for c in s.get("changes", [])) or "-",
            str(cases_per_variant.get(name, 0)),
            str((s.get("errors") or 0) + (s.get("timeouts") or 0)),
            f(s.get("latency_median_s")),
            f(s.get("ttft_median_s")),
            f(s.get("tokens_per_s_median"), "{:.1f}"),
            f((weights or {}).get(name), "{:.0f}"),
            f(s.get("peak_memory_mb"), "{:.0f}"),
            ident,
            f(lg.get("logits.kl_mean"), "{:.4f}"),
            f(lg.get("logits.top1_agreement"), "{:.3f}"),
        )
    console.print(t)


def missing_requirement(variant) -> str | None:
    """Why a variant cannot run in this installation (a missing optional package), or None."""
    import importlib.util

    needs = []
    if variant.backend == "transformers":
        needs += [("torch", "models"), ("transformers", "models")]
    if variant.backend == "vllm":  # vLLM's own environment (`make vllm`), or vllm beside evalsuite
        from .backends.vllm_env import locate

        try:
            locate()
        except EvalsuiteError as exc:
            return str(exc)
    if variant.backend == "http":  # a server the demo starts itself (`serve`): its packages
        from .backends.http_serve import missing_requirement as serve_missing

        if why := serve_missing(variant.options):
            return why
    for module, extra in needs:
        if importlib.util.find_spec(module) is None:
            return f"needs {module}: pip install 'evalsuite[{extra}]'"
    from .models.formats import missing_requirement as quantization_missing

    for q in (variant.quantization, ((variant.speculative or {}).get("draft") or {}).get("quantization")):
        try:
            if why := quantization_missing(q):  # every method's packages (bnb, gptq, awq, llm-compressor, torchao, hqq ...)
                return why
        except EvalsuiteError:  # a method only another backend knows: that backend says so
            continue
    return None


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs, and where."""

    profile: str = "quick"  #: quick (a few cases per scenario) or full
    variants: Sequence[str] | None = None  #: variant names (default: all the installation can run)
    verbose: bool = False  #: print the gate's full evidence
    logits: bool = True  #: teacher-forced logit agreement (transformers baselines)
    runs_dir: str | None = None
    cache_path: str | None = None


def demo_suite(given: str | Path | None) -> tuple[Path, str | None]:
    """The demo suite and where its runs go: the one given; else suites/demo.yaml in the working
    directory (a clone: runs under its output_dir); else the one shipped with evalsuite, whose runs go
    to reports/runs in the working directory (never into the installed package)."""
    from .shipped import shipped_path

    if given is not None:
        return Path(given), None
    if (own := Path("suites") / "demo.yaml").is_file():
        return own, None
    return shipped_path("suite", "demo"), str(Path("reports") / "runs")


def run_demo(suite_path: str | Path | None = None, options: DemoOptions | None = None, console: Console | None = None) -> Judgment | None:
    """Run the demo suite, print a table per variant and the verdict (one screen; `verbose`: the full
    evidence), write the HTML report; return the Judgment (None when the run cannot be judged).

    The run's differences are flagged into the review queue first, then the run is judged through
    evalsuite.judge.judge_run, so the demo's verdict line is the one `evalsuite gate` gives after it.
    """
    from rich.console import Console as RichConsole

    from .cases.suite import load_suite
    from .run.runner import RunOptions
    from .scoring.pipeline import run_suite

    opts = options or DemoOptions()
    console = console or RichConsole()
    if opts.profile not in PROFILES:
        raise EvalsuiteError(f"unknown demo profile {opts.profile!r}; available: {', '.join(PROFILES)}")
    suite_path, shipped_runs = demo_suite(suite_path)
    suite = load_suite(suite_path)
    runs_dir = opts.runs_dir or shipped_runs
    t0 = time.perf_counter()
    limit = PROFILES[opts.profile]
    console.print(
        f"[bold]evalsuite demo[/bold]: suite {suite.name} ({suite_path}), profile {opts.profile}"
        + (f" ({limit} cases per scenario)" if limit else " (every case)")
    )
    variants = _runnable_variants(suite, opts.variants, console)
    res = run_suite(suite, RunOptions(variants=variants, limit=limit, progress=True, score=True, runs_dir=runs_dir, cache_path=opts.cache_path))
    _print_variants(console, suite, res, variants, opts.logits)
    judgment, report = judge_and_report(console, res.store, verbose=opts.verbose)
    if judgment is not None:
        _print_footer(console, judgment)
    console.print(f"demo wall time: {time.perf_counter() - t0:.0f}s")
    if report is not None:
        console.print(f"report: {report}  (open it in a browser; report.md beside it)", highlight=False, soft_wrap=True)
    return judgment


def _runnable_variants(suite: Suite, variants: Sequence[str] | None, console: Console) -> list[str] | None:
    """The variants this installation can run (the others are skipped with their install command);
    converts the embedded model first when the suite uses it."""
    from rich.markup import escape

    if any(v.backend == "transformers" and v.model in (None, "", "embedded") for v in suite.variants):
        from .models import embedded_model_dir, ensure_embedded_model

        if not (embedded_model_dir() / "evalsuite-source.json").is_file():
            console.print("first run: converting the embedded model to safetensors (about 30 s, once)")
        ensure_embedded_model()
    if why := missing_requirement(suite.baseline):
        raise EvalsuiteError(f"the demo baseline {why}")
    wanted = [v for v in suite.variants if not v.baseline and (variants is None or v.name in variants)]
    skipped = {v.name: why for v in wanted if (why := missing_requirement(v))}
    for name, why in skipped.items():
        console.print(f"[yellow]skipping variant {escape(name)}: {escape(why)}[/yellow]")
    if skipped:
        return [v.name for v in wanted if v.name not in skipped] or [suite.baseline.name]
    return list(variants) if variants is not None else None


def _print_variants(console: Console, suite: Suite, res: RunResult, variants: Sequence[str] | None, logits: bool) -> None:
    """The per-variant table: speed, memory, outputs identical to the baseline's, logit agreement."""
    gens = res.store.generations()
    cases: dict[str, set] = {}
    for g in gens:
        cases.setdefault(g.variant, set()).add(g.case_id)
    logit_stats: dict = {}
    if logits and suite.baseline.backend == "transformers":
        from .scoring.logits import score_run_logits

        console.print("logit agreement (teacher-forced on the baseline's outputs) ...")
        try:
            recs = score_run_logits(res.store, suite, res.cases, variants, progress=lambda name: log.debug("logits: %s done", name))
            logit_stats = _logit_means(recs)
        except EvalsuiteError as exc:
            console.print(f"[yellow]logit agreement skipped: {exc}[/yellow]")
    per_variant = {k: len(v) for k, v in cases.items()}
    rows = variant_matrix([v.to_dict() for v in suite.variants], res.store.signature)
    matrix = {name: matrix_text(row) for name, row in rows.items()}
    print_demo_table(console, res.variants, identical_share(gens, suite.baseline.name), logit_stats, per_variant, weights_mb(gens), matrix)
    console.print(f"generated {res.generated}, from cache {res.cached}, errors {res.errors}; run directory: {res.run_dir}")


def judge_and_report(console: Console, store: RunStore, *, verbose: bool = False, flag: bool = True) -> tuple[Judgment | None, Path | None]:
    """The demo's verdict: flag the run's differences (`flag`), judge the run for the suite's stage,
    write the report, print the verdict. Returns (the Judgment, or None when the run cannot be
    judged; the report's path or None)."""
    from .judge import judge_run
    from .report.api import write_report
    from .report.terminal import judgment_view

    try:
        judgment = judge_run(store, flag=flag)
        rep = write_report(judgment)
    except EvalsuiteError as exc:
        console.print(f"[bold yellow]CANNOT JUDGE[/bold yellow]: {exc}", highlight=False)
        return None, None
    console.print(
        judgment_view(judgment, scenarios=rep.data.scenarios, verbose=verbose, hint="full evidence: `evalsuite demo --verbose` or the report (path below)")
    )
    return judgment, rep.html


def _print_footer(console: Console, judgment: Judgment) -> None:
    """The review queue (what awaits review, and how to open it) and the adaptive replay line."""
    from rich.markup import escape

    from .adaptive.driver import replay_summary

    res = judgment.flagged
    if res is not None:  # the demo judges with flag=True: the run was flagged first
        console.print(
            f"review queue: {res.open} output(s) await review ({len(res.added)} new) in {res.queue}; "
            f"open them with `make notebook` (notebooks/review.ipynb) or `evalsuite review list`",
            highlight=False,
        )
    fixed = {v: any(r.status == "fail" and r.rule != REVIEW_RULE for r in judgment.verdict.results if r.variant == v) for v in judgment.verdict.variants}
    try:
        s = replay_summary(judgment.store, fixed, judgment.stage)
    except EvalsuiteError as exc:
        console.print(f"[dim]adaptive replay skipped: {escape(str(exc))}[/dim]", highlight=False)
        return
    console.print(escape(adaptive_line(s)), highlight=False)


def adaptive_line(s: dict) -> str:
    """The demo's adaptive line, from `evalsuite.adaptive.driver.replay_summary`."""
    differ = f"; differs: {', '.join(s['differ'])} (see docs/thresholds.md)" if s["differ"] else ""
    share = 100 * s["needed"] / max(s["full"], 1)
    return (
        f"adaptive verdicts (stage {s['stage']}, seed {s['seed']}, replayed): {s['needed']} of {s['full']} variant generations ({share:.0f}%), "
        f"same verdict as the full run for {s['same']} of {s['variants']} variant(s){differ}"
    )
