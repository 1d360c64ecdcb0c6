"""Judging a run reads each of its files once (issue 41 item 5): the comparison, the rubric's checks,
the flagging with its cases, the review decisions and the report all ask the run's store, which reads
a file once per state of the run's files."""

from __future__ import annotations

import builtins
import io
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.run import scorefile
from evalsuite.run.store import RunStore

OLD_RUN = Path(__file__).parent / "fixtures" / "run-scores-jsonl"


@pytest.fixture
def run(tmp_path) -> Path:
    run = tmp_path / "runs" / OLD_RUN.name
    shutil.copytree(OLD_RUN, run)
    res = CliRunner().invoke(app, ["score", str(run)])  # scores.parquet
    assert res.exit_code == 0, res.output
    return run


def count_reads(monkeypatch, run: Path) -> Counter:
    """The files of `run` opened from now on (Python's open, and the score file's Parquet reader), by name."""
    reads: Counter = Counter()
    real_open, real_table = io.open, scorefile.read_score_table

    def opened(file, *args, **kwargs):
        if Path(str(file)).parent == run:
            reads[Path(str(file)).name] += 1
        return real_open(file, *args, **kwargs)

    def table(path):
        reads[Path(path).name] += 1
        return real_table(path)

    monkeypatch.setattr(io, "open", opened)
    monkeypatch.setattr(builtins, "open", opened)
    monkeypatch.setattr(scorefile, "read_score_table", table)
    return reads


def test_judging_and_flagging_a_run_read_each_of_its_files_once(run, monkeypatch):
    from evalsuite.judge import judge_run

    reads = count_reads(monkeypatch, run)
    judgment = judge_run(RunStore(run), stage="pilot", flag=True, queue=run.parent / "review.sqlite")
    assert judgment.flagged is not None and judgment.comparison.variants == ("v1",)
    for name in (RunStore.SIGNATURE, RunStore.SUITE, RunStore.CASES, RunStore.GENERATIONS, RunStore.VARIANTS, RunStore.SCORES):
        assert reads[name] == 1, (name, dict(reads))
    assert max(reads.values()) == 1, dict(reads)


def test_a_file_written_since_is_read_again(run, monkeypatch):
    store = RunStore(run)
    reads = count_reads(monkeypatch, run)
    first = store.signature
    first["mutated"] = True  # a caller's copy: the store's own is untouched
    assert "mutated" not in store.signature and reads[RunStore.SIGNATURE] == 1
    store.write_json(RunStore.SIGNATURE, dict(store.signature, note="changed"))
    assert store.signature["note"] == "changed" and reads[RunStore.SIGNATURE] == 2
    suite = store.suite
    suite["name"] = "mutated"
    assert store.suite["name"] != "mutated" and reads[RunStore.SUITE] == 1
