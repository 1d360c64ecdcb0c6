"""A run's scores as one Parquet file (evalsuite/run/scorefile.py): values survive the round trip, older
runs' scores.jsonl still load, a newer file is refused by name, nothing half-written is left behind,
and `evalsuite export --format jsonl` gives the stored records back as JSON lines."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.errors import EvalsuiteError
from evalsuite.run import scorefile
from evalsuite.run.scorefile import ScoreRecord, read_jsonl_scores, read_score_file, write_score_file
from evalsuite.run.store import RunStore

#: a run stored by evalsuite before scores.parquet (scores.jsonl, one record a line), 3 cases x 2 variants
OLD_RUN = Path(__file__).parent / "fixtures" / "run-scores-jsonl"


def rec(**kw) -> ScoreRecord:
    base = dict(variant="base", case_id="c1", sample=0, scenario="kb_qa", kind="grounded", metric="m", value=1.0, passed=True, higher_is_better=True, details={})
    return ScoreRecord(**{**base, **kw})


RECORDS = [
    rec(),
    rec(variant="v1", value=0.25, passed=False, details={"cited": ["d1", "d2"], "note": "é ✓", "n": 3, "nested": {"a": [1, None]}}),
    rec(case_id="c2", sample=None, metric="code.pass@1", value=None, passed=None, higher_is_better=False),  # a case-level metric
    rec(case_id="c3", sample=7, value=0, passed=True, details=None),
    rec(case_id="c4", value=-2.5e-12, details={"cited": ["d1", "d2"], "note": "é ✓", "n": 3, "nested": {"a": [1, None]}}),
]


def test_records_round_trip_with_their_values_nones_and_details(tmp_path):
    path = write_score_file(tmp_path / "scores.parquet", RECORDS)
    got = read_score_file(path)
    assert got == RECORDS
    assert [type(r.value) for r in got] == [float, float, type(None), float, float]
    assert got[2].sample is None and got[2].passed is None and got[3].details is None
    assert got[1].details is got[4].details  # identical details are parsed once
    nan = read_score_file(write_score_file(tmp_path / "nan.parquet", [rec(value=float("nan"))]))[0]
    assert math.isnan(nan.value)
    assert read_score_file(write_score_file(tmp_path / "none.parquet", [])) == []


def test_the_file_is_columnar_and_read_by_pandas_as_it_is(tmp_path):
    import pandas as pd

    path = write_score_file(tmp_path / "scores.parquet", RECORDS * 100)
    df = pd.read_parquet(path)
    assert list(df.columns) == list(scorefile.FIELDS) and len(df) == 500
    assert json.loads(df["details"][1]) == RECORDS[1].details
    meta = pq.ParquetFile(path).schema_arrow.metadata
    assert meta[b"evalsuite.schema_version"] == str(scorefile.SCORES_SCHEMA_VERSION).encode()


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({b"evalsuite.kind": b"scores", b"evalsuite.schema_version": b"2"}, "schema version 2 is newer than this evalsuite reads"),
        ({b"evalsuite.kind": b"scores", b"evalsuite.schema_version": b"x"}, "evalsuite.schema_version is 'x'"),
        ({}, "not an evalsuite score file"),
    ],
)
def test_a_file_this_evalsuite_cannot_read_is_refused_with_its_name(tmp_path, metadata, message):
    table = scorefile._table(RECORDS).replace_schema_metadata(metadata)
    path = tmp_path / "scores.parquet"
    pq.write_table(table, path)
    with pytest.raises(EvalsuiteError, match=message) as err:
        read_score_file(path)
    assert str(path) in str(err.value)


def test_a_broken_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "scores.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(EvalsuiteError, match="cannot read the score file") as err:
        RunStore(tmp_path).scores()
    assert str(path) in str(err.value)


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    store.write_scores(RECORDS[:2])
    before = (tmp_path / store.SCORES).read_bytes()

    def broken(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        store.write_scores(RECORDS)
    assert (tmp_path / store.SCORES).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.SCORES]
    assert RunStore(tmp_path).scores() == RECORDS[:2]


@pytest.fixture
def old_run(tmp_path) -> Path:
    run = tmp_path / "runs" / OLD_RUN.name
    shutil.copytree(OLD_RUN, run)
    return run


def test_an_old_run_with_scores_jsonl_still_loads_and_is_judged(old_run):
    from evalsuite.judge import judge_run

    store = RunStore(old_run)
    assert not (old_run / store.SCORES).exists()
    records = store.scores()
    assert records == read_jsonl_scores(old_run / "scores.jsonl")
    assert len(records) == len((old_run / "scores.jsonl").read_text().splitlines()) > 0
    assert {r.variant for r in records} == {"base", "v1"} and {r.case_id for r in records} == {"q0000", "q0001", "q0002"}
    judgment = judge_run(store, stage="pilot")
    assert judgment.comparison.baseline == "base" and judgment.comparison.variants == ("v1",)
    assert not judgment.comparison.problems


def test_rescoring_an_old_run_writes_parquet_with_the_same_records(old_run):
    before = RunStore(old_run).scores()
    res = CliRunner().invoke(app, ["score", str(old_run)])
    assert res.exit_code == 0, res.output
    assert (old_run / RunStore.SCORES).is_file() and not (old_run / "scores.jsonl").exists()
    assert sorted(map(repr, RunStore(old_run).scores())) == sorted(map(repr, before))


def test_export_jsonl_gives_the_stored_records_back(old_run, tmp_path):
    store = RunStore(old_run)
    store.write_scores(RECORDS)
    out = tmp_path / "export"
    res = CliRunner().invoke(app, ["export", str(old_run), "--format", "jsonl", "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = (out / "scores.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [r.to_dict() for r in RECORDS]
    assert read_jsonl_scores(out / "scores.jsonl") == RECORDS
    bad = CliRunner().invoke(app, ["export", str(old_run), "--format", "jsonl", "--tables", "perf", "--out", str(out)])
    assert bad.exit_code != 0 and "score records only" in bad.output


def test_export_writes_the_tables_asked_for(old_run, tmp_path):
    out = tmp_path / "export"
    res = CliRunner().invoke(app, ["export", str(old_run), "--format", "csv", "--tables", "scores,perf", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["perf.csv", "scores.csv"]


def test_a_table_gives_the_records_as_rows_and_builds_them_once(tmp_path):
    table = scorefile.read_score_table(write_score_file(tmp_path / "s.parquet", RECORDS))
    assert len(table) == len(RECORDS)
    assert [dict(zip(scorefile.FIELDS, row)) for row in table.rows()] == [r.to_dict() for r in RECORDS]
    assert list(scorefile.score_rows(table)) == list(scorefile.score_rows(RECORDS))
    assert table.records() is table.records() and list(table) == RECORDS and table[1] == RECORDS[1]
    assert table.column("case_id") == ["c1", "c1", "c2", "c3", "c4"]
    picked = table.where("case_id", lambda c: c != "c1")
    assert list(picked) == RECORDS[2:] and table.where("metric", bool) is table
    assert scorefile.ScoreTable.from_records(RECORDS).records() == RECORDS


def test_judging_a_stored_run_builds_no_record_objects(old_run, monkeypatch):
    """Judging reads the run's score columns (600,000 records at 10,000 cases), not one object a score."""
    from evalsuite.judge import judge_run

    store = RunStore(old_run)
    CliRunner().invoke(app, ["score", str(old_run)])  # the Parquet file
    expected = judge_run(RunStore(old_run), stage="pilot").comparison

    built: list[int] = []
    records = scorefile.ScoreTable.records

    def counted(self):
        built.append(len(self))
        return records(self)

    monkeypatch.setattr(scorefile.ScoreTable, "records", counted)
    got = judge_run(store, stage="pilot").comparison
    assert got.deltas == expected.deltas and got.perf == expected.perf
    total = len(store.score_table())
    assert total > 0 and sum(built) < total  # only the few records the performance figures read (code runs, exactness)


def test_a_runs_own_cases_are_read_without_the_schema_check_unless_changed(old_run, monkeypatch):
    """The run's cases.jsonl holds the cases it validated when it was made (their digest is in its
    signature): reading them back skips the case-schema check; an edited file gets the full check."""
    from evalsuite.cases import interop
    from evalsuite.errors import ValidationError
    from evalsuite.scoring.run import run_cases

    checked: list[str] = []
    schema_problems = interop.schema_problems
    monkeypatch.setattr(interop, "schema_problems", lambda *a, **k: checked.append(a[2]) or schema_problems(*a, **k))
    cases = run_cases(RunStore(old_run))
    assert [c.id for c in cases] == ["q0000", "q0001", "q0002"] and checked == []

    path = old_run / RunStore.CASES
    lines = path.read_text("utf-8").splitlines()
    edited = json.loads(lines[1])
    edited["prompt"] = "an edited question"
    path.write_text("\n".join([lines[0], json.dumps(edited), *lines[2:]]) + "\n", "utf-8")
    assert [c.prompt for c in run_cases(RunStore(old_run))][1] == "an edited question" and checked == [str(path)]

    broken = dict(edited, kind=17)
    path.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n", "utf-8")
    with pytest.raises(ValidationError) as err:
        run_cases(RunStore(old_run))
    assert f"{path}:2" in str(err.value) and "kind" in str(err.value)


def test_writing_scores_does_not_import_pandas(tmp_path):
    """pyarrow's `pa.array` imports pandas (a third of a second of a warm re-run); the score file is
    built from buffers instead."""
    code = textwrap.dedent(
        f"""
        import sys
        from evalsuite.run.scorefile import ScoreRecord, read_score_file, write_score_file
        recs = [ScoreRecord(variant="v", case_id=f"c{{i}}", sample=i if i else None, scenario="s", kind="k", metric="m",
                            value=None if i == 2 else i / 3, passed=None if i == 1 else i % 2 == 0, higher_is_better=True,
                            details={{"é": i}} if i else None) for i in range(4)]
        path = write_score_file({str(tmp_path / "s.parquet")!r}, recs)
        assert "pandas" not in sys.modules, "writing the score file imported pandas"
        got = read_score_file(path)
        assert [r.to_dict() for r in got] == [dict(r.to_dict(), details=r.details or None) for r in recs], got
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_value_of_the_wrong_type_is_still_refused_by_name(tmp_path):
    import pyarrow as pa

    from evalsuite.run import scorefile

    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        scorefile._arrow(pa, ["a", 3], pa.string())
    assert scorefile._arrow(pa, [True, None, False], pa.bool_()).to_pylist() == [True, None, False]
    assert scorefile._arrow(pa, [1, None], pa.int64()).to_pylist() == [1, None]
    assert scorefile._arrow(pa, [None, None], pa.string()).to_pylist() == [None, None]
