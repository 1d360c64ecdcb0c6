"""The report's figures (matplotlib, no pyplot state), as base64 PNG data URIs embedded in the page.

1. The trade-off: each variant's quality delta (mean pass-rate change over its pass/fail metrics,
   the worst metric as a whisker) against its speed-up (tokens/s vs the baseline) and, when the
   backend reports it, its peak-memory ratio.
2. Per-scenario deltas with their 95% intervals: one panel per scenario, one row per pass/fail
   metric, one marker per variant.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

STATUS_COLOR = {"fail": "#c62828", "warn": "#ef8f00", "pass": "#2e7d32", "cannot judge": "#757575"}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _ok(x: Any) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def tradeoff_png(points: Sequence[Mapping]) -> str | None:
    """`points`: variant, status, quality (mean delta), worst (min delta), speedup, memory_ratio."""
    from matplotlib.figure import Figure

    pts = [p for p in points if _ok(p.get("quality"))]
    if not pts:
        return None
    with_mem = [p for p in pts if _ok(p.get("memory_ratio"))]
    panels = [("speedup", "speed-up: tokens/s vs the baseline (x)")] + ([("memory_ratio", "peak memory vs the baseline (x)")] if with_mem else [])
    fig = Figure(figsize=(5.2 * len(panels), 3.8), layout="constrained")
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        ax.axhline(0, color="#999", lw=0.8)
        ax.axvline(1, color="#999", lw=0.8, ls=":")
        for p in pts:
            x = p.get(key)
            if not _ok(x):
                continue
            y = 100 * p["quality"]
            color = STATUS_COLOR.get(p.get("status"), "#555")
            if _ok(p.get("worst")):
                ax.plot([x, x], [100 * p["worst"], y], color=color, lw=1, alpha=0.5)
            ax.scatter([x], [y], s=46, color=color, zorder=3, edgecolor="white", linewidth=0.6)
            ax.annotate(p["variant"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        ax.set_xlabel(label)
        ax.set_ylabel("quality delta (pass-rate points)")
        ax.grid(alpha=0.25)
        if not any(_ok(p.get(key)) for p in pts):
            ax.text(0.5, 0.5, "not reported", transform=ax.transAxes, ha="center", color="#777")
    fig.suptitle("dot: mean pass-rate delta; line: down to the worst metric", fontsize=9)
    return _png(fig)


def deltas_png(rows: Sequence[Mapping], variants: Sequence[str], scenarios: Sequence[str]) -> str | None:
    """Forest plot of pass-rate deltas with 95% CIs, per scenario and metric, one marker per variant."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    rows = [r for r in rows if r["pass_fail"] and r["n"] and not r["noise_run"] and _ok(r["delta"])]
    scen = [s for s in scenarios if any(r["scenario"] == s for r in rows)]
    if not scen:
        return None
    metrics = {s: sorted({r["metric"] for r in rows if r["scenario"] == s}) for s in scen}
    index = {(r["variant"], r["scenario"], r["metric"]): r for r in rows}
    nvar = max(1, len(variants))
    heights = [len(metrics[s]) * max(2, nvar) * 0.16 + 0.6 for s in scen]
    fig = Figure(figsize=(8.2, sum(heights) + 0.6))
    gs = fig.add_gridspec(
        len(scen), 1, height_ratios=heights, hspace=0.5, left=0.28, right=0.97, top=1 - 0.45 / (sum(heights) + 0.6), bottom=0.5 / (sum(heights) + 0.6)
    )
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(variants)}
    step = 0.8 / nvar
    for i, s in enumerate(scen):
        ax = fig.add_subplot(gs[i, 0])
        ms = metrics[s]
        for j, v in enumerate(variants):
            ys, xs, lo, hi, marks = [], [], [], [], []
            for k, m in enumerate(ms):
                r = index.get((v, s, m))
                if r is None:
                    continue
                ys.append(k - 0.4 + step * (j + 0.5))
                xs.append(100 * r["delta"])
                lo.append(100 * (r["delta"] - r["ci_low"]) if _ok(r["ci_low"]) else 0.0)
                hi.append(100 * (r["ci_high"] - r["delta"]) if _ok(r["ci_high"]) else 0.0)
                marks.append(r["status"])
            if not ys:
                continue
            ax.errorbar(xs, ys, xerr=[[max(0.0, x) for x in lo], [max(0.0, x) for x in hi]], fmt="o", color=colors[v], ms=4, lw=1.3, capsize=0)
            bad = [(x, y, st) for x, y, st in zip(xs, ys, marks) if st in ("fail", "warn")]
            if bad:
                ax.scatter(
                    [b[0] for b in bad],
                    [b[1] for b in bad],
                    marker="s",
                    s=60,
                    facecolors="none",
                    edgecolors=[STATUS_COLOR["fail" if b[2] == "fail" else "warn"] for b in bad],
                    linewidths=1.4,
                    zorder=4,
                )
        ax.axvline(0, color="#999", lw=0.8)
        ax.set_yticks(range(len(ms)))
        ax.set_yticklabels(ms, fontsize=8)
        ax.set_ylim(len(ms) - 0.5, -0.5)
        ax.set_title(s, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.25)
        if i == len(scen) - 1:
            ax.set_xlabel("pass-rate delta, variant - baseline (points), with 95% CI; boxed: a failed (red) or warning (orange) rule", fontsize=8)
    handles = [Line2D([0], [0], color=colors[v], marker="o", lw=1.3, markersize=4) for v in variants]
    fig.legend(handles, list(variants), loc="upper right", fontsize=8, ncol=min(4, len(handles)), frameon=False)
    return _png(fig)


def report_plots(data: Any) -> dict[str, str]:
    """The figures of a ReportData: name -> data URI (a figure without data is left out)."""
    from .model import quality_delta, worst_delta

    status = {g["variant"]: g["status"] for g in data.grid}
    points = []
    for p in data.perf:
        if p["baseline"] or p["noise_run"]:
            continue
        w = worst_delta(data.metric_rows, p["variant"])
        points.append(
            {
                "variant": p["variant"],
                "status": status.get(p["variant"], "pass"),
                "quality": quality_delta(data.metric_rows, p["variant"]),
                "worst": w["delta"] if w else None,
                "speedup": p["speedup"],
                "memory_ratio": p["memory_ratio"],
            }
        )
    out = {}
    t = tradeoff_png(points)
    if t:
        out["tradeoff"] = t
    d = deltas_png(data.metric_rows, data.variants, data.scenarios)
    if d:
        out["deltas"] = d
    return out
