"""report.md: a short markdown summary for a CI job summary or a pull-request comment.

Headline, the verdict per variant and scenario, the failing and warning rules with their top cases,
performance per variant, and where the full HTML report is. GitHub-flavoured tables, no HTML.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..quantiles import definition_words
from ..states import CANNOT_JUDGE_WORD, NEEDS_REVIEW, PASS, REGRESSION

if TYPE_CHECKING:
    from ..verdict.load import LoadSummary
    from .model import ReportData
    from .releases import ReleaseHistory

STATUS_MD = {"fail": "❌ FAIL", "warn": "⚠️ warn", "ok": "✅ ok", "n/a": "n/a", "pass": "✅ pass", CANNOT_JUDGE_WORD: "❔ cannot judge"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def render_markdown(data: ReportData, html_path: str | None = None, max_rules: int = 20) -> str:
    """The summary of a ReportData."""
    head = {REGRESSION: "❌ **REGRESSION**", PASS: "✅ **PASS**", NEEDS_REVIEW: "⚠️ **NEEDS REVIEW**"}.get(data.status, "❔ **CANNOT JUDGE**")
    lines = [f"## evalsuite: {head}", ""]
    why = f" ({data.stage_reason})" if data.stage_reason else ""
    lines.append(f"Run `{data.run_id}`: {len(data.variants)} variant(s) against `{data.baseline}`, stage `{data.stage}`{why}, rubric `{data.rubric}`.")
    v = data.verdict
    if v is not None and not v.judgeable:
        for p in v.problems:
            lines.append(f"- cannot judge: {_cell(p)}")
    lines.append("")
    lines.append("| variant | verdict | " + " | ".join(data.scenarios) + " | run-level |")
    lines.append("|---|---|" + "---|" * (len(data.scenarios) + 1))
    for row in data.grid:
        cells = []
        for key in data.scenarios + ["run"]:
            c = row["cells"].get(key, {"status": "n/a", "fail": [], "warn": []})
            cells.append(
                STATUS_MD.get(c["status"], c["status"])
                + (f" ({', '.join(c['fail'] or c['warn'])})" if c["status"] in ("fail", "warn", CANNOT_JUDGE_WORD) else "")
            )
        verdict = {"fail": "❌ regression", "warn": "⚠️ pass, warnings", "pass": "✅ pass"}.get(row["status"], row["status"])
        lines.append(f"| `{_cell(row['variant'])}` | {verdict} | " + " | ".join(_cell(c) for c in cells) + " |")
    if data.rule_lines:
        lines += ["", "### Failing and warning rules", ""]
        for r in data.rule_lines[:max_rules]:
            mark = "❌" if r["status"] == "fail" else "⚠️"
            cases = ", ".join(f"`{c}`" for c in r["top_cases"]) + (f" (+{r['n_cases'] - len(r['top_cases'])})" if r["n_cases"] > len(r["top_cases"]) else "")
            lines.append(f"- {mark} **{r['rule']}** ({', '.join(r['variants'])}): {_cell(r['reason'])}" + (f"; top cases {cases}" if cases else ""))
        if len(data.rule_lines) > max_rules:
            lines.append(f"- ... and {len(data.rule_lines) - max_rules} more rule(s) in the HTML report")
    if data.audit:
        lines += ["", f"**Audit of the review flags:** {_cell(data.audit['line'])}"]
    lines += perf_lines(data)
    from .faults import fault_markdown_lines

    lines += fault_markdown_lines(getattr(data, "faults", []))
    lines += engine_metrics_lines(data.engine_metrics)
    lines += stability_lines(getattr(data.comparison, "load", None))
    lines += context_cost_lines(data.context_cost)
    lines += release_lines(data.releases)
    lines += [
        "",
        f"{data.flagged_total} flagged output(s) (one variant's output for one case each)."
        + (f" Full report with side-by-side diffs: `{html_path}`" if html_path else ""),
    ]
    sig = data.signature
    lines.append(f"_case digest `{str(sig.get('case_digest', '-'))[:16]}`, {sig.get('cases', '-')} cases, evalsuite {sig.get('evalsuite', '-')}_")
    return "\n".join(lines) + "\n"


def perf_lines(data: ReportData) -> list[str]:
    """The performance table: engine, weights, errors, latency, TTFT, tokens/s, memory, speed-up, quality per variant."""
    lines = [
        "",
        "### Performance",
        "",
        "| variant | engine | weights / decoding | errors | timeouts | latency p50 s | p95 s | TTFT s | tokens/s | peak MB | compile s | speed-up | quality Δ (pts) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    from .model import quality_delta

    matrix = {m["name"]: m["matrix_text"] for m in data.models}  # the variant matrix in words: method, bits, scheme, library, revision
    engines = {m["name"]: m["engine"] for m in data.models}  # engine, version, settings (evalsuite.models.engines)

    for p in data.perf:
        q = None if p["baseline"] else quality_delta(data.metric_rows, p["variant"])
        lines.append(
            f"| `{_cell(p['variant'])}` | {_cell(engines.get(p['variant']) or '-')} | {_cell(matrix.get(p['variant']) or p['changes'])} | {p['errors'] or 0} | {p['timeouts'] or 0} | {_f(p['latency_p50_s'], '.3f')} | {_f(p['latency_p95_s'], '.3f')} "
            f"| {_f(p['ttft_p50_s'], '.3f')} | {_f(p['tokens_per_s'], '.1f')} | {_f(p['peak_memory_mb'], '.0f')} | {_f(p.get('compile_s'), '.1f')} | {_f(p['speedup'], '.2f')} | {_f(None if q is None else 100 * q, '+.1f')} |"
        )
    return [
        *lines,
        "",
        f"p95 latency: {definition_words('latency_p95_s')}. Compile s: compiling and warming up before the timed generation (not in the speed figures).",
    ]


def context_cost_lines(cost: dict) -> list[str]:
    """How each variant's cost grows with context (evalsuite.perf.context): slopes per 1k tokens and
    the figures at the summary's length (nothing when no backend measured them)."""
    if not cost:
        return []
    at = next(iter(cost.values()))["at_tokens"]
    lines = [
        "",
        "### Cost against context length",
        "",
        f"| variant | points | prompt tokens | prefill s / 1k | TTFT s / 1k | peak MB / 1k | KV cache MB / 1k | prefill s at {at:,} | peak MB at {at:,} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def per_1k(m: dict, k: str) -> str:
        return _f((m.get(k) or {}).get("per_1k"), ".3g")

    def at_len(m: dict, k: str) -> str:
        x = m.get(k) or {}
        return _f(x.get("measured_at") if x.get("measured_at") is not None else x.get("fitted_at"), ".4g")

    for name, c in cost.items():
        m, lo_hi = c["measures"], c.get("tokens") or ["-", "-"]
        lines.append(
            f"| `{_cell(name)}` | {c['points']} | {lo_hi[0]}-{lo_hi[1]} | {per_1k(m, 'prefill_s')} | {per_1k(m, 'ttft_s')} | {per_1k(m, 'peak_memory_mb')} "
            f"| {per_1k(m, 'kv_cache_mb')} | {at_len(m, 'prefill_s')} | {at_len(m, 'peak_memory_mb')} |"
        )
    return lines


def engine_metrics_lines(rows: list[dict]) -> list[str]:
    """vLLM's own metrics per variant (frames.engine_metrics_rows), or nothing without a vLLM variant."""
    if not rows:
        return []
    from ..backends.vllm_metrics import FIGURES

    lines = ["", "### vLLM's own metrics per variant", "", "| variant | " + " | ".join(FIGURES.values()) + " |", "|---|" + "---|" * len(FIGURES)]
    for r in rows:
        lines.append(f"| `{_cell(r['variant'])}` | " + " | ".join(_cell(r["cells"][k]) for k in FIGURES) + " |")
    return lines


def stability_lines(load: LoadSummary | None) -> list[str]:
    """The "Stability under load" table (served variants under the suite's `load:` block), or nothing."""
    from .stability import load_rows

    rows = load_rows(load)
    failed = dict(load.failed) if load is not None else {}
    if not rows and not failed:
        return []
    lines = [
        "",
        "### Stability under load",
        "",
        f"Percentiles: {definition_words('load p50/p95/p99')}.",
        "",
        "| variant | in flight | requests | errors | timeouts | TTFT p50/p95/p99 | end-to-end p50/p95/p99 | tokens/s | queue wait | TTFT p95 x baseline | changed | flips (floor) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{_cell(r['variant'])}` | {r['level']} | {r['requests']} | {r['errors']} | {r['timeouts']} | {r['ttft']} | {r['e2e']} | {r['tokens_per_s']} "
            f"| {_cell(r['queue_wait'])} | {r['ttft_ratio']} | {r['changed']}/{r['replayed']} | {r['flips']} ({r['flip_floor']}) |"
        )
    lines += [f"\n`{_cell(name)}`: not put under load (cannot judge): {_cell(why[:300])}" for name, why in failed.items()]
    return lines


def _environment_mark(env: dict | None) -> str:
    """A cleared cell's note on its environment: stale (what changed) or unknown; nothing when fresh."""
    if not env or env["state"] == "fresh":
        return ""
    return f" ⚠️ {_cell(env['summary'])}" if env["state"] == "stale" else f" ({_cell(env['summary'])})"


def release_lines(releases: ReleaseHistory | None) -> list[str]:
    """The release history of the run's variants and each stage's rollback target (nothing without a ledger)."""
    if releases is None:
        return []
    stages = ("dev", "pilot", "production")
    lines = ["", "### Releases", "", "| variant | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for v in releases.variants:
        cells = []
        for s in stages:
            c = v["stages"][s]
            cells.append(
                f"✅ since {c['since'][:16].replace('T', ' ')} (run `{c['run_id']}`){_environment_mark(c.get('environment'))}"
                if c["cleared"]
                else "-"
                if c["status"] is None
                else f"❌ {_cell(c['reason'])}"
            )
        lines.append(f"| `{_cell(v['variant'])}` `{v['fingerprint'][:12]}` | " + " | ".join(cells) + " |")
    lines += [""] if releases.stages else []
    for st in releases.stages:
        cur, tgt = st["current"], st["target"]
        target = f"`{tgt['variant']}` (`{tgt['fingerprint'][:12]}`)" if tgt else f"none ({_cell(st['why_no_target'])})"
        lines.append(f"- **{st['stage']}** runs `{cur['variant']}` (`{cur['fingerprint'][:12]}`); rollback target: {target}")
    return lines
