"""Generating: the runner, the run store and cache, prompt rendering, the embedded model and quantized variants, planted degraders."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import RunStore


def open_run(run: str | Path, runs_dir: str | Path = "reports/runs") -> RunStore:
    """A stored run by directory, by id under `runs_dir`, or `"last"` (the newest complete one)."""
    from .store import RunStore

    return RunStore.find(runs_dir, str(run))
