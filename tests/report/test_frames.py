"""Runs as pandas DataFrames, and `evalsuite export` of runs (CSV, Parquet) and case sets."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.errors import EvalsuiteError
from evalsuite.report import export_run, load_run_frames

runner = CliRunner()


@pytest.fixture(scope="module")
def frames(report_run):
    return load_run_frames(report_run[0])


def test_frames_hold_every_record(frames, report_run):
    store = report_run[0]
    gens, recs = store.generations(), store.scores()
    assert len(frames.generations) == len(gens) and len(frames.scores) == len(recs)
    assert set(frames.generations["variant"]) == {"baseline", "rerun", "clean", "nocite", "badjson", "badcode"}
    assert frames.generations["scenario"].notna().all()
    assert {"latency_s", "ttft_s", "tokens_per_s", "error", "timeout", "text"} <= set(frames.generations.columns)
    assert frames.scores["passed"].dtype == "boolean" and isinstance(frames.scores["details"].iloc[0], dict)
    assert frames.baseline == "baseline" and frames.signature["case_digest"]


def test_comparisons_one_row_per_metric_delta(frames, report):
    cmp = report.data.comparison
    df = frames.comparisons
    assert len(df) == len(cmp.deltas)
    row = df[(df.variant == "nocite") & (df.metric == "citations.recall")].iloc[0]
    d = next(x for x in cmp.deltas if x.variant == "nocite" and x.metric == "citations.recall")
    assert row.n == d.n and row.pass_to_fail == len(d.pass_to_fail) and row.pass_to_fail_cases == list(d.pass_to_fail)
    assert row.delta == pytest.approx(d.delta) and row.ci_low == pytest.approx(d.ci_low) and row.p_value == pytest.approx(d.p_value)
    assert row.noise_flips == 0  # the rerun is the noise floor
    assert set(df[df.noise_run].variant) == {"rerun"}


def test_perf_one_row_per_variant(frames):
    p = frames.perf.set_index("variant")
    assert list(frames.perf.variant)[0] == "baseline" and len(p) == 6
    assert p.loc["baseline", "generations"] == 26 and p.loc["badcode", "errors"] == 0
    assert p.loc["clean", "speedup"] == pytest.approx(p.loc["clean", "tokens_per_s"] / p.loc["baseline", "tokens_per_s"])
    assert p.loc["badcode", "memory_ratio"] == pytest.approx(200 / 600) and p.loc["baseline", "peak_memory_mb"] == 600


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_run_round_trips(frames, report_run, tmp_path, fmt):
    paths = export_run(report_run[0], tmp_path / fmt, fmt)
    assert sorted(p.name for p in paths) == sorted(f"{t}.{fmt}" for t in ("generations", "scores", "comparisons", "perf"))
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    back = read(tmp_path / fmt / f"comparisons.{fmt}")
    assert len(back) == len(frames.comparisons) and list(back.columns) == list(frames.comparisons.columns)
    first = back.iloc[0]
    assert json.loads(first.pass_to_fail_cases) == frames.comparisons.iloc[0].pass_to_fail_cases
    scores = read(tmp_path / fmt / f"scores.{fmt}")
    assert len(scores) == len(frames.scores) and isinstance(json.loads(scores.details.iloc[0]), dict)


def test_export_command_takes_a_run_or_case_sets(report_run, tmp_path, repo):
    store = report_run[0]
    res = runner.invoke(app, ["export", str(store.dir), "--format", "parquet", "--out", str(tmp_path / "x")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "x" / "generations.parquet").is_file() and "exported run" in res.output
    res = runner.invoke(app, ["export", store.run_id, "--runs-dir", str(store.dir.parent), "--out", str(tmp_path / "y")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "y" / "perf.csv").is_file()
    # case sets: CSV and Parquet by suffix, JSONL as before
    sets = repo / "casesets" / "kb_qa" / "examples.yaml"
    for name in ("c.csv", "c.parquet", "c.jsonl"):
        res = runner.invoke(app, ["export", str(sets), "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
    df = pd.read_parquet(tmp_path / "c.parquet")
    n = len((tmp_path / "c.jsonl").read_text().splitlines())
    assert len(df) == n == len(pd.read_csv(tmp_path / "c.csv")) and "expect" in df.columns
    res = runner.invoke(app, ["export", str(sets), "--out", str(tmp_path / "c.xlsx"), "--format", "xlsx"])
    assert res.exit_code == 4 and "unknown export format 'xlsx'" in res.output  # issue 38: your input is wrong exits 4


def test_unknown_table_and_format():
    from evalsuite.report.frames import check_format

    with pytest.raises(EvalsuiteError, match="did you mean 'parquet'"):
        check_format("parquett")
