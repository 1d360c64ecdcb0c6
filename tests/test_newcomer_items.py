"""Issue 38, point 6: the smaller things a newcomer hit, each with a test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _cli(*args):
    res = runner.invoke(app, [str(a) for a in args])
    return res.exit_code, " ".join(res.output.split())


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("newcomer")
    text = (REPO / "suites" / "fake.yaml").read_text().replace("../casesets", str(REPO / "casesets")).replace("output_dir: ../reports", f"output_dir: {root}\ncache: {root}/c.sqlite")
    # a variant that changes two things at once: the one-variable warning
    text += "  - name: two-things\n    quantization: {method: bnb, bits: 4}\n    generation: {max_new_tokens: 32, temperature: 0, samples: 1, seed: 1234, batch_size: 2}\n"
    suite = root / "fake.yaml"
    suite.write_text(text)
    code, out = _cli("run", suite, "-q", "--variants", "fake-int8,two-things")
    assert code == 0, out
    return {"root": root, "suite": suite, "runs": root / "runs", "run_output": out}


def test_run_prints_the_one_variable_warning_once(fake_run):
    assert fake_run["run_output"].count("change one variable at a time") == 1, fake_run["run_output"]


def test_compare_does_not_call_a_sequential_run_interleaved(fake_run):
    code, out = _cli("compare", "last", "--runs-dir", fake_run["runs"])
    assert code == 0 and "interleaved" not in out and "one sequential pass" in out, out


def test_a_scenario_typo_gets_a_close_match(fake_run):
    code, out = _cli("run", fake_run["suite"], "-q", "--scenarios", "kbqa")
    assert code == 4 and "unknown scenario(s) ['kbqa'] (did you mean 'kb_qa'?)" in out, out


def test_export_of_a_missing_run_says_so(fake_run, tmp_path):
    code, out = _cli("export", "nope", "--runs-dir", fake_run["runs"])
    assert code == 4 and "nope: no run of that id under" in out and "--out is required" not in out, out


def test_review_export_names_the_out_suffix_not_a_format_never_given(fake_run, tmp_path):
    q = tmp_path / "q.sqlite"
    assert _cli("review", "flag", "last", "--runs-dir", fake_run["runs"], "--queue", q)[0] == 0
    code, out = _cli("review", "export", "--out", tmp_path / "q.json", "--queue", q)
    assert code == 4 and "name a .csv or .parquet file, or give --format" in out and "--format: must be" not in out, out


def test_a_malformed_yaml_line_is_one_plain_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: a, metric: x\n  min: 1\n")
    code, out = _cli("validate", bad)
    assert code == 4 and f"{bad}:3: yaml: did not find expected ',' or '}}' at column 6 (while parsing a flow mapping, from line 2)" in out, out
    assert "<unicode string>" not in out


def test_long_suite_counts_its_7k_cases_right():
    from evalsuite.cases.caseset import all_cases, load_cases

    cases = [c for c in all_cases(load_cases([REPO / "casesets"])) if "long" in c.tags]
    at_7k = sum(1 for c in cases if "ctx-7k" in c.tags)
    said = re.search(r"\((\d+) cases, (\d+) of them at 7k\)", (REPO / "suites" / "long.yaml").read_text())
    assert said and (int(said[1]), int(said[2])) == (len(cases), at_7k)
