"""Stored logs of each supported format version, made with the real tools and trimmed (tests/importers/data/):
lm-eval 0.4.13 `--log_samples` output, Inspect log version 2 as `.eval` and `.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsuite.importers.inspectlogs import read_inspect
from evalsuite.importers.lmeval import find_results, read_lm_eval
from evalsuite.importers.records import file_sha256

DATA = Path(__file__).parent / "data"
LM = DATA / "lmeval-0.4.13"
INSPECT = DATA / "inspect-v2"


def test_lm_eval_0_4_13_log_is_read_document_by_document():
    log = read_lm_eval(LM / "base")
    assert (log.tool, log.tool_version) == ("lm-eval", "0.4.13")
    assert log.model_args["pretrained"].endswith("smollm2-135m-instruct")
    assert {t: (i.output_type, i.primary, i.version) for t, i in log.tasks.items()} == {
        "tiny_mc": ("multiple_choice", "acc", "1.0"),
        "tiny_gen": ("generate_until", "exact_match", "1.0"),
    }
    assert "metadata" not in log.tasks["tiny_mc"].config and log.tasks["tiny_mc"].config["num_fewshot"] == 0
    by = log.by_key()
    assert len(by) == 12 and set(by) == {(t, str(i), 1) for t in ("tiny_mc", "tiny_gen") for i in range(6)}
    rows = [json.loads(line) for line in next((LM / "base").glob("samples_tiny_mc_*.jsonl")).read_text().splitlines()]
    for row in rows:
        s = by[("tiny_mc", str(row["doc_id"]), 1)]
        assert s.metrics == {"acc": row["acc"]}
        lls = [float(r[0][0]) for r in row["resps"]]
        chosen = row["doc"]["choices"][lls.index(max(lls))]
        assert s.text == chosen and s.prompt == row["arguments"]["gen_args_0"]["arg_0"]
        assert (s.metrics["acc"] == 1.0) == (row["doc"]["choices"].index(chosen) == row["doc"]["answer"])
    gen = by[("tiny_gen", "0", 1)]
    raw = json.loads(next((LM / "base").glob("samples_tiny_gen_*.jsonl")).read_text().splitlines()[0])
    assert gen.text == raw["resps"][0][0] and gen.metrics == {"exact_match": raw["exact_match"]} and gen.target == raw["target"]
    assert all(log.files[str(p)] == file_sha256(p) for p in (LM / "base").iterdir())


def test_lm_eval_output_path_or_model_folder_or_results_file():
    results = find_results(LM / "base")
    assert find_results(results) == results and find_results(LM / "base").name.startswith("results_")
    with pytest.raises(Exception, match="results of 2 models"):
        find_results(LM)


@pytest.mark.parametrize("name", ["base.eval", "base.json"])
def test_inspect_v2_logs_are_read_with_inspects_reader(name):
    log = read_inspect(INSPECT / name)
    assert (log.tool, log.tool_version) == ("inspect", "0.3.285") and log.format_version == f"2.{name.split('.')[1]}"
    assert list(log.tasks) == ["tiny_add"] and log.tasks["tiny_add"].primary == "includes"
    assert log.model == "hf/local" and log.model_args["model_path"].endswith("smollm2-135m-instruct")
    keys = {s.key for s in log.samples}
    assert ("tiny_add", "0", 1) in keys
    for s in log.samples:
        assert set(s.metrics) == {"includes"} and s.metrics["includes"] in (0.0, 1.0)
        assert (s.metrics["includes"] == 1.0) == (s.target in s.text)  # includes(): the target appears in the output
        assert s.prompt.startswith("What is ")


def test_inspect_eval_and_json_of_one_run_agree():
    ev, js = read_inspect(INSPECT / "base.eval"), read_inspect(INSPECT / "base.json")
    assert len(ev.samples) == 10 and {s.epoch for s in ev.samples} == {1, 2}
    e = ev.by_key()
    for s in js.samples:
        assert (s.text, dict(s.metrics), s.digest) == (e[s.key].text, dict(e[s.key].metrics), e[s.key].digest)
