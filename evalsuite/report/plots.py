"""The report's figures (matplotlib, no pyplot state), as base64 PNG data URIs embedded in the page.

1. The trade-off: each variant's quality delta (mean pass-rate change over its pass/fail metrics,
   the worst metric as a whisker) against its speed-up (tokens/s vs the baseline) and, when the
   backend reports it, its peak-memory ratio.
2. Per-scenario deltas with their 95% intervals: one panel per scenario, one row per pass/fail
   metric, one marker per variant.
3. Served variants under load: TTFT p95, end-to-end p95 and aggregate tokens/s against the
   number of requests in flight, one line per variant (the suite's `load:` block).
4. Cost against context length: prefill time, time to first token, peak memory and KV-cache size
   against prompt tokens, one colour per variant, each with its fitted line and growth per 1k
   tokens (evalsuite.perf.context).
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..states import CANNOT_JUDGE_WORD

if TYPE_CHECKING:
    from ..perf.context import CostPoint
    from ..verdict.load import LoadSummary
    from .model import ReportData

STATUS_COLOR = {"fail": "#c62828", "warn": "#ef8f00", "pass": "#2e7d32", CANNOT_JUDGE_WORD: "#757575"}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


DPI = 96  #: figures are laid out and saved at this resolution, so label boxes are PNG pixels


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _ok(x: object) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _box(fig, artist, renderer, kind: str, text: str) -> dict:
    """An artist's bounding box in the saved PNG's pixels (origin top left), for the report page."""
    bb = artist.get_window_extent(renderer)
    height = fig.bbox.height
    return {"kind": kind, "text": text, "box": [round(float(v), 1) for v in (bb.x0, height - bb.y1, bb.x1, height - bb.y0)]}


def _overlap(a: list[float], b: list[float], gap: float = 0.0) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def _spread(boxes: list[list[float]], gap: float = 2.0, rounds: int = 400) -> bool:
    """Move boxes [x0, y0, x1, y1] (display pixels, y up) vertically until none overlaps another:
    each overlapping pair is pushed apart, half each way. True when no overlap is left."""
    for _ in range(rounds):
        moved = False
        order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], i))
        for a_pos, i in enumerate(order):
            for j in order[a_pos + 1 :]:
                a, b = boxes[i], boxes[j]
                if not _overlap(a, b, gap):
                    continue
                push = (a[3] + gap - b[1]) / 2 + 0.01 if b[1] >= a[1] else (b[3] + gap - a[1]) / 2 + 0.01
                up, down = (j, i) if b[1] >= a[1] else (i, j)
                boxes[up][1] += push
                boxes[up][3] += push
                boxes[down][1] -= push
                boxes[down][3] -= push
                moved = True
        if not moved:
            return True
    return not any(_overlap(boxes[i], boxes[j]) for i in range(len(boxes)) for j in range(i + 1, len(boxes)))


def _place_labels(fig, ax, items: list[tuple[float, float, str]], renderer) -> list[Any]:
    """Label each point (x, y in data units) beside it: to its right, or to its left where the
    panel ends; labels that would overlap (variants at the same spot: served and speculative ones
    often are) are moved apart vertically, with a thin line back to their point, and kept inside the
    panel. Returns the label artists."""
    from matplotlib.lines import Line2D

    size, dx, dy = 8, 8.0, 3.0
    frame = ax.bbox
    boxes, sides, anchors = [], [], []
    for x, y, name in items:
        px, py = ax.transData.transform((x, y))
        t = fig.text(0, 0, name, fontsize=size, transform=None)
        w, h = t.get_window_extent(renderer).size
        t.remove()
        right = px + dx + w <= frame.x1 - 2
        x0 = px + dx if right else px - dx - w
        boxes.append([x0, py + dy, x0 + w, py + dy + h])
        sides.append(right)
        anchors.append((px, py))
    start = [b[1] for b in boxes]
    _spread(boxes)
    if boxes:  # a stack pushed past the panel's edge comes back whole (the labels keep their spacing)
        over, under = max(b[3] for b in boxes) - (frame.y1 - 2), (frame.y0 + 2) - min(b[1] for b in boxes)
        shift = -over if over > 0 else (under if under > 0 else 0.0)
        for b in boxes:
            b[1] += shift
            b[3] += shift
    out = []
    for b, y0, right, (px, py), (_, _, name) in zip(boxes, start, sides, anchors, items):
        t = fig.text(b[0], b[1], name, fontsize=size, transform=None, va="bottom", ha="left")
        t.set_in_layout(False)
        out.append(t)
        if abs(b[1] - y0) > 1.0:  # moved: a line from the point to the label's near edge
            fig.add_artist(Line2D([px, b[0] - 1 if right else b[2] + 1], [py, (b[1] + b[3]) / 2], transform=None, color="#999", lw=0.6))
    return out


def tradeoff_png(points: Sequence[Mapping], boxes: list | None = None) -> str | None:
    """`points`: variant, status, quality (mean delta), worst (min delta), speedup, memory_ratio.
    `boxes`, when given, receives each variant label's box in the PNG's pixels (the report's browser
    test checks that no two overlap)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pts = [p for p in points if _ok(p.get("quality"))]
    if not pts:
        return None
    with_mem = [p for p in pts if _ok(p.get("memory_ratio"))]
    panels = [("speedup", "speed-up: tokens/s vs the baseline (x)")] + ([("memory_ratio", "peak memory vs the baseline (x)")] if with_mem else [])
    fig = Figure(figsize=(5.2 * len(panels), 3.8), layout="constrained", dpi=DPI)
    canvas = FigureCanvasAgg(fig)  # a renderer to measure the labels with (no pyplot state)
    axes = []
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        axes.append((ax, key))
        ax.axhline(0, color="#999", lw=0.8)
        ax.axvline(1, color="#999", lw=0.8, ls=":")
        for p in pts:
            x = p.get(key)
            if x is None or not _ok(x):
                continue
            y = 100 * p["quality"]
            color = STATUS_COLOR.get(str(p.get("status")), "#555")
            if p.get("worst") is not None and _ok(p["worst"]):
                ax.plot([x, x], [100 * p["worst"], y], color=color, lw=1, alpha=0.5)
            ax.scatter([x], [y], s=46, color=color, zorder=3, edgecolor="white", linewidth=0.6)
        ax.set_xlabel(label)
        ax.set_ylabel("quality delta (pass-rate points)")
        ax.grid(alpha=0.25)
        ax.margins(x=0.25, y=0.25)  # room for the labels beside the points
        if not any(_ok(p.get(key)) for p in pts):
            ax.text(0.5, 0.5, "not reported", transform=ax.transAxes, ha="center", color="#777")
    fig.suptitle("dot: mean pass-rate delta; line: down to the worst metric", fontsize=9)
    canvas.draw()  # the layout is settled: labels are placed in its pixels, and it is frozen
    fig.set_layout_engine("none")
    renderer = canvas.get_renderer()
    labels = []
    for ax, key in axes:
        items = [(p[key], 100 * p["quality"], p["variant"]) for p in pts if _ok(p.get(key))]
        labels += [(t, ax) for t in _place_labels(fig, ax, items, renderer)]
    if boxes is not None:
        canvas.draw()
        boxes += [_box(fig, t, renderer, "label", t.get_text()) for t, _ in labels]
    return _png(fig)


def deltas_png(rows: Sequence[Mapping], variants: Sequence[str], scenarios: Sequence[str], boxes: list | None = None) -> str | None:
    """Forest plot of pass-rate deltas with 95% CIs, per scenario and metric, one marker per variant.
    The legend sits in a band of its own above the first panel's title. `boxes`, when given, receives
    the boxes of the legend and the panel titles in the PNG's pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D as Handle

    rows = [r for r in rows if r["pass_fail"] and r["n"] and not r["noise_run"] and _ok(r["delta"])]
    scen = [s for s in scenarios if any(r["scenario"] == s for r in rows)]
    if not scen:
        return None
    metrics = {s: sorted({r["metric"] for r in rows if r["scenario"] == s}) for s in scen}
    index = {(r["variant"], r["scenario"], r["metric"]): r for r in rows}
    nvar = max(1, len(variants))
    ncol = min(4, nvar)
    legend_in = 0.22 * math.ceil(nvar / ncol) + 0.15  # the legend's own band at the top (inches)
    heights = [len(metrics[s]) * max(2, nvar) * 0.16 + 0.6 for s in scen]
    total = sum(heights) + 0.6 + legend_in
    fig = Figure(figsize=(8.2, total), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    gs = fig.add_gridspec(len(scen), 1, height_ratios=heights, hspace=0.5, left=0.28, right=0.97, top=1 - (0.45 + legend_in) / total, bottom=0.5 / total)
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(variants)}
    titles = []
    for i, s in enumerate(scen):
        ax = fig.add_subplot(gs[i, 0])
        titles.append(_forest_panel(ax, s, metrics[s], variants, index, colors))
        if i == len(scen) - 1:
            ax.set_xlabel("pass-rate delta, variant - baseline (points), with 95% CI; boxed: a failed (red) or warning (orange) rule", fontsize=8)
    handles = [Handle([0], [0], color=colors[v], marker="o", lw=1.3, markersize=4) for v in variants]
    legend = fig.legend(handles, list(variants), loc="upper right", bbox_to_anchor=(0.97, 1 - 0.05 / total), fontsize=8, ncol=ncol, frameon=False)
    if boxes is not None:
        canvas.draw()
        renderer = canvas.get_renderer()
        boxes += [_box(fig, legend, renderer, "legend", "legend")] + [_box(fig, t, renderer, "title", t.get_text()) for t in titles]
    return _png(fig)


def _forest_panel(ax, scenario: str, ms: list[str], variants: Sequence[str], index: Mapping, colors: Mapping[str, str]) -> Any:
    """One scenario's panel: a row per metric, a marker and interval per variant, boxed when a rule
    flagged it. Returns the panel's title."""
    step = 0.8 / max(1, len(variants))
    for j, v in enumerate(variants):
        ys, xs, lo, hi, marks = [], [], [], [], []
        for k, m in enumerate(ms):
            r = index.get((v, scenario, m))
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
    ax.grid(axis="x", alpha=0.25)
    return ax.set_title(scenario, fontsize=9, loc="left")


def context_cost_png(points: Sequence[CostPoint], variants: Sequence[str]) -> str | None:
    """One panel per measure that has points (evalsuite.perf.context.MEASURES): each variant's
    points against prompt tokens (thousands) and its least-squares line, the legend giving its
    growth per 1k tokens. None without any point."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..perf.context import MEASURES, fit_slope

    panels = [m for m in MEASURES if any(p.value(m) is not None for p in points)]
    if not panels:
        return None
    names = [v for v in dict.fromkeys(variants) if any(p.variant == v for p in points)] + sorted({p.variant for p in points} - set(variants))
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(names)}
    ncol = min(2, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig = Figure(figsize=(5.4 * ncol, 3.4 * nrow), layout="constrained", dpi=DPI)
    FigureCanvasAgg(fig)
    for i, m in enumerate(panels):
        ax = fig.add_subplot(nrow, ncol, i + 1)
        for v in names:
            mine = [(p.tokens, y) for p in points if p.variant == v and (y := p.value(m)) is not None]
            if not mine:
                continue
            xs, ys = [t / 1000.0 for t, _ in mine], [float(y) for _, y in mine]
            slope = fit_slope([float(t) for t, _ in mine], ys)
            label = v + (f" ({slope.per_1k:+.3g}/1k)" if slope else "")
            ax.scatter(xs, ys, s=14, color=colors[v], alpha=0.75, label=label)
            if slope:
                lo, hi = slope.tokens_low, slope.tokens_high
                ax.plot([lo / 1000.0, hi / 1000.0], [slope.at(lo), slope.at(hi)], color=colors[v], lw=1.2)
        ax.set_xlabel("prompt tokens (thousands)")
        ax.set_ylabel(MEASURES[m])
        ax.grid(alpha=0.25)
        ax.legend(fontsize=7, frameon=False, title="growth per 1k tokens", title_fontsize=7)
    return _png(fig)


def report_plots(data: ReportData) -> dict[str, str]:
    """The figures of a ReportData: name -> data URI (a figure without data is left out), and
    `<name>_boxes` -> its label boxes as JSON."""
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
    boxes: dict[str, list] = {"tradeoff": [], "deltas": []}
    t = tradeoff_png(points, boxes["tradeoff"])
    if t:
        out["tradeoff"] = t
    d = deltas_png(data.metric_rows, data.variants, data.scenarios, boxes["deltas"])
    if d:
        out["deltas"] = d
    load = getattr(getattr(data, "comparison", None), "load", None)
    boxes["load"] = []
    curve = load_curve_png(load, boxes["load"]) if load is not None else None
    if curve:
        out["load"] = curve
    if data.loaded is not None:
        from ..perf.context import cost_points

        c = context_cost_png(cost_points(data.loaded.generations), [data.baseline, *data.variants])
        if c:
            out["context_cost"] = c
    # where each figure's labels, titles and legend sit (PNG pixels): the page carries them, and its
    # browser test checks that none overlaps another
    out.update({f"{name}_boxes": json.dumps(b) for name, b in boxes.items() if name in out})
    return out


#: the load curve's panels: (LoadLevel field, key inside it or None, axis label)
LOAD_PANELS = (("ttft_s", "p95", "TTFT p95 (s)"), ("e2e_s", "p95", "end-to-end latency p95 (s)"), ("tokens_per_s", None, "aggregate tokens/s"))


def load_curve_png(summary: LoadSummary, boxes: list | None = None) -> str | None:
    """Latency and throughput against concurrency, one line per served variant (evalsuite.verdict.load's
    LoadSummary): TTFT p95, end-to-end p95 and aggregate tokens/s at each level. `boxes`, when given,
    receives the legend's and the panel titles' boxes in the PNG's pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    variants = [v for v in summary.variants if summary.for_variant(v)]
    if not variants:
        return None
    fig = Figure(figsize=(10.5, 3.4), dpi=DPI, layout="constrained")
    canvas = FigureCanvasAgg(fig)
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(variants)}
    titles = []
    levels = sorted({lv.level for v in variants for lv in summary.for_variant(v)})
    for i, (fld, key, label) in enumerate(LOAD_PANELS):
        ax = fig.add_subplot(1, len(LOAD_PANELS), i + 1)
        for v in variants:
            pts = [(lv.level, getattr(lv, fld)[key] if key else getattr(lv, fld)) for lv in summary.for_variant(v)]
            pts = [(x, y) for x, y in pts if _ok(y)]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", ms=4, lw=1.4, color=colors[v], label=v)
        if len(levels) > 1 and levels[0] > 0 and levels[-1] / levels[0] >= 4:
            ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(x) for x in levels])
        ax.set_xlabel("requests in flight", fontsize=8)
        ax.grid(alpha=0.25)
        ax.set_ylim(bottom=0)
        titles.append(ax.set_title(label, fontsize=9, loc="left"))
    legend = fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="outside upper right", fontsize=8, ncol=min(4, len(variants)), frameon=False)
    if boxes is not None:
        canvas.draw()
        renderer = canvas.get_renderer()
        boxes += [_box(fig, legend, renderer, "legend", "legend")] + [_box(fig, t, renderer, "title", t.get_text()) for t in titles]
    return _png(fig)
