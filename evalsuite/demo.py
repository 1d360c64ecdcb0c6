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
from pathlib import Path

from .errors import EvalsuiteError

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


def print_demo_table(console, summaries: dict, same: dict, logits: dict, cases_per_variant: dict, weights: dict | None = None) -> None:
    from rich.table import Table

    t = Table(
        title="variants vs the baseline (latency, TTFT (time to first token), tok/s: medians per request; KL, top-1: logit agreement)",
        title_justify="left",
        padding=(0, 1),
    )
    cols = ("variant", "changes", "cases", "err", "latency s", "TTFT s", "tok/s", "weights MB", "peak MB", "same as base", "KL", "top-1")
    for col in cols:
        t.add_column(col, justify="left" if col in ("variant", "changes") else "right", no_wrap=col in ("variant", "same as base"))

    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    for name, s in summaries.items():
        sm = same.get(name, {})
        share = sm.get("share")
        ident = "-" if share is None else f"{sm['identical']}/{sm['pairs']}"
        lg = logits.get(name, {})
        t.add_row(
            name,
            ",".join(c[:5] for c in s.get("changes", [])) or "-",
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


def _print_gate(console, store, *, verbose: bool = False, json_out: str | Path | None = None):
    """The pilot-stage verdict, short (one line per failing or warning rule with its top cases; the
    full evidence with `verbose`), and the HTML report written beside the run.
    Returns (the gate's exit code, the report's path or None)."""
    from .report.api import write_report
    from .report.terminal import print_verdict

    try:
        rep = write_report(store, None, "pilot")
    except EvalsuiteError as exc:
        console.print(f"[bold yellow]CANNOT JUDGE[/bold yellow]: {exc}", highlight=False)
        return 2, None
    print_verdict(
        rep.data.verdict, console, scenarios=rep.data.scenarios, verbose=verbose, hint="full evidence: `evalsuite demo --verbose` or the report (path below)"
    )
    if json_out:
        from .verdict.gate import write_verdict_json

        write_verdict_json(rep.data.verdict, json_out)
    return rep.data.verdict.exit_code, rep.html


def missing_requirement(variant) -> str | None:
    """Why a variant cannot run in this installation (a missing optional package), or None."""
    import importlib.util

    needs = []
    if variant.backend == "transformers":
        needs += [("torch", "models"), ("transformers", "models")]
    if variant.backend == "http":  # a server the demo starts itself (`serve`): its packages
        from .backends.http_serve import missing_requirement as serve_missing

        if why := serve_missing(variant.options):
            return why
    for q in (variant.quantization, ((variant.speculative or {}).get("draft") or {}).get("quantization")):
        method = str((q or {}).get("method", "")).lower()
        if method in ("bnb", "bitsandbytes"):
            needs.append(("bitsandbytes", "bnb"))
        elif method == "gptq" and not (q or {}).get("checkpoint"):
            needs.append(("gptqmodel", "gptq"))
    for module, extra in needs:
        if importlib.util.find_spec(module) is None:
            return f"needs {module}: pip install 'evalsuite[{extra}]'"
    return None


def run_demo(
    suite_path: str | Path = "suites/demo.yaml",
    profile: str = "quick",
    variants: Sequence[str] | None = None,
    console=None,
    logits: bool = True,
    runs_dir: str | None = None,
    cache_path: str | None = None,
    verbose: bool = False,
    json_out: str | Path | None = None,
) -> int:
    """Run the demo suite, print a table per variant and the pilot verdict (one screen; `verbose`:
    the full evidence), write the HTML report; return the gate's exit code."""
    from rich.console import Console

    from .cases.suite import load_suite
    from .run.runner import RunOptions, run_suite

    console = console or Console()
    if profile not in PROFILES:
        raise EvalsuiteError(f"unknown demo profile {profile!r}; available: {', '.join(PROFILES)}")
    suite = load_suite(suite_path)
    t0 = time.perf_counter()
    limit = PROFILES[profile]
    console.print(
        f"[bold]evalsuite demo[/bold]: suite {suite.name} ({suite_path}), profile {profile}" + (f" ({limit} cases per scenario)" if limit else " (every case)")
    )
    if any(v.backend == "transformers" and v.model in (None, "", "embedded") for v in suite.variants):
        from .models import embedded_model_dir, ensure_embedded_model

        if not (embedded_model_dir() / "evalsuite-source.json").is_file():
            console.print("first run: converting the embedded model to safetensors (about 30 s, once)")
        ensure_embedded_model()
    wanted = [v for v in suite.variants if not v.baseline and (variants is None or v.name in variants)]
    skipped = {v.name: why for v in wanted if (why := missing_requirement(v))}
    if missing_requirement(suite.baseline):
        raise EvalsuiteError(f"the demo baseline {missing_requirement(suite.baseline)}")
    for name, why in skipped.items():
        from rich.markup import escape

        console.print(f"[yellow]skipping variant {escape(name)}: {escape(why)}[/yellow]")
    if skipped:
        variants = [v.name for v in wanted if v.name not in skipped] or [suite.baseline.name]
    res = run_suite(suite, RunOptions(variants=variants, limit=limit, progress=True, score=True, runs_dir=runs_dir, cache_path=cache_path))
    store = res.store
    gens = store.generations()
    cases_per_variant: dict[str, int] = {}
    for g in gens:
        cases_per_variant.setdefault(g.variant, set()).add(g.case_id)  # type: ignore[arg-type]
    cases_per_variant = {k: len(v) for k, v in cases_per_variant.items()}  # type: ignore[misc]

    logit_stats: dict = {}
    if logits and suite.baseline.backend == "transformers":
        from .scoring.logits import score_run_logits

        console.print("logit agreement (teacher-forced on the baseline's outputs) ...")
        try:
            recs = score_run_logits(store, suite, res.cases, variants, progress=lambda name: log.debug("logits: %s done", name))
            logit_stats = _logit_means(recs)
        except EvalsuiteError as exc:
            console.print(f"[yellow]logit agreement skipped: {exc}[/yellow]")
    print_demo_table(console, res.variants, identical_share(gens, suite.baseline.name), logit_stats, cases_per_variant, weights_mb(gens))
    console.print(f"generated {res.generated}, from cache {res.cached}, errors {res.errors}; run directory: {res.run_dir}")
    code, report = _print_gate(console, store, verbose=verbose, json_out=json_out)
    # ---- other components' one-line footers (review queue, adaptive verdicts) go here ----
    from .review.api import demo_footer

    demo_footer(store, console)  # flag the differences into the review queue; say how many await review
    from .adaptive.driver import demo_line

    demo_line(store, console)  # generations the adaptive verdicts needed vs the full run (replayed, nothing generated)
    console.print(f"demo wall time: {time.perf_counter() - t0:.0f}s")
    if report is not None:
        console.print(f"report: {report}  (open it in a browser; report.md beside it)", highlight=False, soft_wrap=True)
    return code
