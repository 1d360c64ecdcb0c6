"""`write_report`: a judged run as report.html and report.md (the CLI, the demo and the tests call it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..states import ExitCode
from .model import ReportData, build_report_data, default_report_dir

if TYPE_CHECKING:
    from ..verdict.outcome import Judgment
    from .frames import LoadedRun


@dataclass(frozen=True)
class ReportResult:
    """Where the report went, and what it says."""

    html: Path
    markdown: Path
    data: ReportData
    seconds: dict = field(default_factory=dict)  #: evidence, plots and render times

    @property
    def exit_code(self) -> int:
        v = self.data.verdict
        return int(ExitCode.CANNOT_JUDGE) if v is None else v.exit_code


def write_report(
    judgment: Judgment, *, out_dir: str | Path | None = None, plots: bool = True, loaded: LoadedRun | None = None, ledger: str | Path | None = None
) -> ReportResult:
    """Write `report.html` and `report.md` of a judged run (evalsuite.judge.judge_run's Judgment)
    into `out_dir` (default `reports/<run-id>/`); `ledger`: the release ledger whose history it shows
    (default: the one beside the run's folder)."""
    from ..yamlio import atomic_write_text
    from .html import render_html
    from .markdown import render_markdown
    from .plots import report_plots

    t0 = time.perf_counter()
    data = build_report_data(judgment, loaded=loaded, ledger=ledger)
    t1 = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else default_report_dir(judgment.store)
    figs = report_plots(data) if plots else {}
    t2 = time.perf_counter()
    html_path, md_path = out / "report.html", out / "report.md"
    atomic_write_text(html_path, render_html(data, figs))
    atomic_write_text(md_path, render_markdown(data, str(html_path)))
    t3 = time.perf_counter()
    return ReportResult(html_path, md_path, data, {"evidence": t1 - t0, "plots": t2 - t1, "render": t3 - t2, "total": t3 - t0})
