"""Progress bars (rich) for long work: one per variant, the timing rounds, the adaptive loop."""

from __future__ import annotations


class _NoProgress:
    def __enter__(self):
        return lambda n: None

    def __exit__(self, *exc):
        return False


class _RichProgress:
    def __init__(self, label: str, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(), transient=False
        )
        self.label, self.total = label, total

    def __enter__(self):
        self.progress.__enter__()
        task = self.progress.add_task(self.label, total=self.total)
        return lambda n: self.progress.advance(task, n)

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)


def progress_bar(enabled: bool, label: str, total: int):
    if not enabled or total == 0:
        return _NoProgress()
    return _RichProgress(label, total)
