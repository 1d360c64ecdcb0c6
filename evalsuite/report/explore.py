"""What notebooks/explore.ipynb shows, as library functions (the notebook holds no logic).

`pick_run` finds the run (the latest of the suite the notebook is pointed at, or asks which suite);
`frames_of` reads a judged run (evalsuite.judge.judge_run's Judgment) as DataFrames. Every other
function takes a `RunFrames` and returns a DataFrame or a matplotlib Figure, so the same views work
in a notebook, a script or a test. One unit for every delta, in tables and charts: percentage
points. A value that is missing (a variant without that metric, an interval that could not be
computed) stays missing (NaN, shown as "missing" by `styled`), never zero.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
    from pandas.io.formats.style import Styler

    from ..run.store import RunStore
    from ..verdict.outcome import Judgment
    from .frames import RunFrames

POINTS = 100.0  #: deltas of pass rates and means in [0, 1] are shown in percentage points
MISSING = "missing"


def pick_run(runs_dir: str | Path, suite: str | None = None, run: str | None = None) -> RunStore:
    """The run to explore: `run` (an id, a directory or `last`) when given, else the latest run of
    `suite` (its name or its file), else the latest run when every run is of one suite; with runs
    of several suites and none named, it asks: the error lists them."""
    from ..errors import EvalsuiteError
    from ..run.store import RunStore

    if run:
        return RunStore.find(runs_dir, run)
    if suite:
        return RunStore.latest(runs_dir, suite)
    runs = RunStore.all(runs_dir)
    if not runs:
        raise EvalsuiteError(f"no runs under {runs_dir} (make demo, or evalsuite run SUITE)")
    names = sorted({r.suite_name for r in runs})
    if len(names) > 1:
        raise EvalsuiteError(f"runs of {len(names)} suites under {runs_dir}: {', '.join(names)}; say which: SUITE = {names[0]!r} (or EVALSUITE_SUITE)")
    return runs[-1]


def frames_of(judgment: Judgment) -> RunFrames:
    """The judged run as RunFrames, on the comparison the verdict was judged on (computed once)."""
    from .frames import frames_from_loaded, load_run

    return frames_from_loaded(load_run(judgment.store, comparison=judgment.comparison))


def styled(df: pd.DataFrame, digits: int = 1) -> Styler:
    """A table for a person: numbers rounded to `digits`, missing values written as "missing"."""
    return df.style.format(precision=digits, na_rep=MISSING)


def delta_table(frames: RunFrames, pass_rate_only: bool = True):
    """Variant x (scenario, metric) table of deltas against the baseline, in percentage points (noise runs left out)."""
    df = frames.comparisons
    df = df[~df.noise_run & (df.n > 0)]
    if pass_rate_only:
        df = df[df.stat == "pass rate"]
    out = df.pivot_table(index=["scenario", "metric"], columns="variant", values="delta", aggfunc="first", dropna=False) * POINTS
    out.columns.name = "delta (points) by variant"
    return out


def flips_table(frames: RunFrames):
    """Per variant and scenario: pass->fail and fail->pass flips summed over pass/fail metrics
    (missing where the variant has no pass/fail metric in that scenario)."""
    df = frames.comparisons
    df = df[~df.noise_run & (df.stat == "pass rate")]
    return df.groupby(["variant", "scenario"])[["pass_to_fail", "fail_to_pass"]].sum().unstack("scenario")


def biggest_drops(frames: RunFrames, n: int = 10):
    """The n largest drops (variant, scenario, metric), deltas and their interval in points."""
    df = frames.comparisons
    df = df[~df.noise_run].sort_values("delta").head(n).copy()
    for col in ("baseline_value", "variant_value", "delta", "ci_low", "ci_high"):
        df[col] = df[col] * POINTS
    cols = ["variant", "scenario", "metric", "baseline_value", "variant_value", "delta", "ci_low", "ci_high", "p_worse", "pass_to_fail", "pass_to_fail_cases"]
    return df[cols].rename(columns={c: f"{c} (points)" for c in ("baseline_value", "variant_value", "delta", "ci_low", "ci_high")})


def _finite(x: object) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def quality_figure(frames: RunFrames):
    """Horizontal bars: each variant's pass-rate delta per scenario and metric, with the 95% CI."""
    from matplotlib.figure import Figure

    df = frames.comparisons
    df = df[~df.noise_run & (df.n > 0) & (df.stat == "pass rate")].copy()
    variants = list(dict.fromkeys(df.variant))
    keys = list(dict.fromkeys(zip(df.scenario, df.metric)))
    fig = Figure(figsize=(8, 0.35 * max(4, len(keys)) * max(1, len(variants)) ** 0.5 + 1), layout="constrained")
    ax = fig.add_subplot()
    h = 0.8 / max(1, len(variants))
    labelled: set[str] = set()
    for j, v in enumerate(variants):
        sub = df[df.variant == v].set_index(["scenario", "metric"])
        for i, k in enumerate(keys):
            y = i - 0.4 + h * (j + 0.5)
            r = sub.loc[k] if k in sub.index else None
            if r is None or not _finite(r.delta):
                ax.text(0, y, f" {MISSING}", va="center", fontsize=7, color="#888")
                continue
            x = POINTS * r.delta
            ax.barh([y], [x], height=h, color=f"C{j}", label=None if v in labelled else v)
            labelled.add(v)
            if _finite(r.ci_low) and _finite(r.ci_high):  # an interval that is missing is not drawn as zero-width
                ax.errorbar([x], [y], xerr=[[x - POINTS * r.ci_low], [POINTS * r.ci_high - x]], fmt="none", ecolor="#333", lw=0.8)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"{s}/{m}" for s, m in keys], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="#555", lw=0.8)
    ax.set_xlabel("pass-rate delta vs the baseline (points), 95% CI")
    ax.legend(fontsize=8)
    ax.set_title(f"quality deltas, run {frames.run_id}", fontsize=10)
    return fig


def performance_figure(frames: RunFrames):
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

    def __init__(self, figure: Figure):
        self.figure = figure

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=96)
        return buf.getvalue()


def quality_chart(frames: RunFrames) -> Chart:
    return Chart(quality_figure(frames))


def performance_chart(frames: RunFrames) -> Chart:
    return Chart(performance_figure(frames))
