"""Bring logs from other evaluation tools (lm-evaluation-harness `--log_samples`, Inspect eval logs)
into evalsuite as normal runs, paired case by case (docs/import.md)."""

from .api import ImportOptions, ImportResult, default_rubric, import_inspect, import_lm_eval, import_logs
from .records import ImportedLog, ImportedSample, ImportMismatchError, TaskInfo, check_match

__all__ = [
    "ImportMismatchError",
    "ImportOptions",
    "ImportResult",
    "ImportedLog",
    "ImportedSample",
    "TaskInfo",
    "check_match",
    "default_rubric",
    "import_inspect",
    "import_lm_eval",
    "import_logs",
]
