"""Reports of a run: one self-contained HTML page, a markdown summary, pandas frames and exports.

from evalsuite.report import load_run_frames, write_report
frames = load_run_frames("last")          # .generations, .scores, .comparisons, .perf
out = write_report("last")                # reports/<run-id>/report.html and report.md
"""

from __future__ import annotations

from .api import ReportResult, write_report
from .frames import RunFrames, export_run, load_run_frames

__all__ = ["ReportResult", "RunFrames", "export_run", "load_run_frames", "write_report"]
