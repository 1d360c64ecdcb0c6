"""Reports of a run: one self-contained HTML page, a markdown summary, pandas frames and exports.

from evalsuite.report import load_run_frames, write_report
frames = load_run_frames("last")          # .generations, .scores, .comparisons, .perf
out = write_report(judge_run(store))     # reports/<run-id>/report.html and report.md (evalsuite.judge)
"""

from __future__ import annotations

from .api import ReportResult, write_report
from .frames import RunFrames, export_run, load_run_frames

__all__ = ["ReportResult", "RunFrames", "export_run", "load_run_frames", "write_report"]
