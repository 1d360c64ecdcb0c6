"""What notebooks/explore.ipynb shows, as library functions (the notebook holds no logic).

Every function takes a `RunFrames` (`load_run_frames`) and returns a DataFrame or a matplotlib
Figure, so the same views work in a notebook, a script or a test.
"""

from __future__ import annotations

from typing import Any


def delta_table(frames: Any, pass_rate_only: bool = True):
    """Variant x (scenario, metric) table of deltas against the baseline (noise runs left out)."""
    df = frames.comparisons
    df = df[~df.noise_run & (df.n > 0)]
    if pass_rate_only:
        df = df[df.stat == "pass rate"]
    return df.pivot_table(index=["scenario", "metric"], columns="variant", values="delta", aggfunc="first")


def flips_table(frames: Any):
    """Per variant and scenario: pass->fail and fail->pass flips summed over pass/fail metrics."""
    df = frames.comparisons
    df = df[~df.noise_run & (df.stat == "pass rate")]
    return df.groupby(["variant", "scenario"])[["pass_to_fail", "fail_to_pass"]].sum().unstack("scenario", fill_value=0)


def quality_figure(frames: Any):
    """Horizontal bars: each variant's pass-rate delta per scenario and metric, with the 95% CI."""
    from matplotlib.figure import Figure

    df = frames.comparisons
    df = df[~df.noise_run & (df.n > 0) & (df.stat == "pass rate")].copy()
    variants = list(dict.fromkeys(df.variant))
    keys = list(dict.fromkeys(zip(df.scenario, df.metric)))
    fig = Figure(figsize=(8, 0.35 * max(4, len(keys)) * max(1, len(variants)) ** 0.5 + 1), layout="constrained")
    ax = fig.add_subplot()
    h = 0.8 / max(1, len(variants))
    for j, v in enumerate(variants):
        sub = df[df.variant == v].set_index(["scenario", "metric"])
        ys, xs, lo, hi = [], [], [], []
        for i, k in enumerate(keys):
            if k in sub.index:
                r = sub.loc[k]
                ys.append(i - 0.4 + h * (j + 0.5))
                xs.append(100 * r.delta)
                lo.append(100 * (r.delta - r.ci_low) if r.ci_low == r.ci_low else 0)
                hi.append(100 * (r.ci_high - r.delta) if r.ci_high == r.ci_high else 0)
        ax.barh(ys, xs, height=h, xerr=[lo, hi], label=v, error_kw={"lw": 0.8})
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"{s}/{m}" for s, m in keys], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="#555", lw=0.8)
    ax.set_xlabel("pass-rate delta vs the baseline (points), 95% CI")
    ax.legend(fontsize=8)
    ax.set_title(f"quality deltas, run {frames.run_id}", fontsize=10)
    return fig


def performance_figure(frames: Any):
    """Per variant: latency p50/p95, tokens/s and peak memory (what the variant buys)."""
    from matplotlib.figure import Figure

    p = frames.perf.set_index("variant")
    panels = [("latency_p50_s", "latency p50 (s)"), ("latency_p95_s", "latency p95 (s)"), ("tokens_per_s", "tokens/s"), ("peak_memory_mb", "peak memory (MB)")]
    fig = Figure(figsize=(11, 3.2), layout="constrained")
    for i, (col, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        s = p[col].dropna()
        if len(s):
            ax.bar(range(len(s)), s.values, color=["#777" if v == frames.baseline else "#1f77b4" for v in s.index])
            ax.set_xticks(range(len(s)))
            ax.set_xticklabels(s.index, rotation=45, ha="right", fontsize=8)
        else:
            ax.text(0.5, 0.5, "not reported", transform=ax.transAxes, ha="center", color="#777")
            ax.set_xticks([])
        ax.set_title(label, fontsize=9)
    fig.suptitle(f"performance per variant (grey: the baseline {frames.baseline})", fontsize=10)
    return fig


class Chart:
    """A Figure that displays itself as PNG in Jupyter (no pyplot, no backend set-up needed)."""

    def __init__(self, figure: Any):
        self.figure = figure

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=96)
        return buf.getvalue()


def quality_chart(frames: Any) -> Chart:
    return Chart(quality_figure(frames))


def performance_chart(frames: Any) -> Chart:
    return Chart(performance_figure(frames))
