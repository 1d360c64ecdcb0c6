"""`write_report`: the one entry point the CLI, the demo and the tests call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import ReportData, build_report_data, default_report_dir


@dataclass(frozen=True)
class ReportResult:
    """Where the report went, and what it says."""

    html: Path
    markdown: Path
    data: ReportData
    seconds: dict = field(default_factory=dict)  #: load (read + compare), judge and render times

    @property
    def exit_code(self) -> int:
        v = self.data.verdict
        return 2 if v is None else v.exit_code


def write_report(
    run: Any,
    rubric: str | Path | None = None,
    stage: str | None = None,
    *,
    out_dir: str | Path | None = None,
    runs_dir: str | Path = "reports/runs",
    plots: bool = True,
    loaded: Any = None,
) -> ReportResult:
    """Write `report.html` and `report.md` for a run into `out_dir` (default `reports/<run-id>/`)."""
    from ..yamlio import atomic_write_text
    from .frames import load_run
    from .html import render_html
    from .markdown import render_markdown
    from .plots import report_plots

    t0 = time.perf_counter()
    lr = loaded or load_run(run, runs_dir)
    t1 = time.perf_counter()
    data = build_report_data(lr.store, rubric, stage, loaded=lr)
    t2 = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else default_report_dir(lr.store)
    figs = report_plots(data) if plots else {}
    t3 = time.perf_counter()
    html_path, md_path = out / "report.html", out / "report.md"
    atomic_write_text(html_path, render_html(data, figs))
    atomic_write_text(md_path, render_markdown(data, str(html_path)))
    t4 = time.perf_counter()
    return ReportResult(html_path, md_path, data, {"load_compare": t1 - t0, "judge_evidence": t2 - t1, "plots": t3 - t2, "render": t4 - t3, "total": t4 - t0})
