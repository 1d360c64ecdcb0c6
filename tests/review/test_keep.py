"""Failures kept: an output flagged and marked `regression` becomes a fixed case (`evalsuite review keep`, or
the rubric's `review: {keep: regression}`); the next run includes it, its case digest changes, and the gate
evaluates the kept case."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.judge import judge_run
from evalsuite.review import api

from .conftest import RUBRIC, make_suite, run_suite_at


def _item(queue, case_id, variant="opt"):
    return next(it for it in api.list_items(queue, status="all", variant=variant) if it["case_id"] == case_id)


def _rerun_with_kept_outputs(root, suite, kept_id, source_id):
    """The suite again, its fake variants answering the kept case as they answered the case it came from."""
    data = yaml.safe_load(suite.read_text("utf-8"))
    for v in data["variants"]:
        outputs = v["options"]["outputs"]
        outputs[kept_id] = outputs[source_id]
    suite.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")
    return run_suite_at(suite)


def test_regression_kept_then_run_and_gated(tmp_path):
    suite = make_suite(tmp_path)
    first = run_suite_at(suite)
    queue = first.dir.parent.parent / "review.sqlite"
    api.flag_run(first, queue=queue)
    item = _item(queue, "kb-003")  # the variant dropped the citation
    api.annotate(item["id"], "regression", note="the citation is gone", reviewer="ana", queue=queue)
    res = CliRunner().invoke(app, ["review", "keep", str(item["id"]), "--into", str(tmp_path / "sets" / "kept"), "--queue", str(queue)])
    assert res.exit_code == 0, res.output
    kept_file = tmp_path / "sets" / "kept" / "kept.yaml"
    case = yaml.safe_load(kept_file.read_text("utf-8"))["cases"][0]
    assert case["id"] == f"kept-{item['id']}-kb-003"
    assert case["origin"] == {"kind": "review", "run": first.run_id, "variant": "opt", "item": item["id"], "case": "kb-003", "verdict": "regression", "reviewer": "ana", "note": "the citation is gone"}
    assert case["expect"]["reference_answer"] == item["baseline_output"] and case["context"] and "kept" in case["tags"]
    out = CliRunner().invoke(app, ["validate", str(tmp_path / "sets")])
    assert out.exit_code == 0 and f"1 kept from review of run {first.run_id}" in out.output, out.output

    second = _rerun_with_kept_outputs(tmp_path, suite, case["id"], "kb-003")
    assert case["id"] in {g.case_id for g in second.generations()}
    assert second.signature["case_digest"] != first.signature["case_digest"]  # the signature shows the case sets changed
    verdict = judge_run(second, tmp_path / "rubric.yaml", "production").verdict
    recall = [v for v in verdict.violations if v.rule == "kb-citation-recall" and v.variant == "opt"]
    assert recall and case["id"] in recall[0].cases  # the gate evaluates the kept case


def test_the_rubric_keeps_every_regression_when_the_run_is_judged(tmp_path, monkeypatch):
    suite = make_suite(tmp_path)
    (tmp_path / "rubric.yaml").write_text(RUBRIC.replace("review:\n", "review:\n  keep: regression\n"), "utf-8")
    store = run_suite_at(suite)
    queue = store.dir.parent.parent / "review.sqlite"
    api.flag_run(store, queue=queue)
    monkeypatch.chdir(tmp_path)  # the kept set's default place: casesets/kept/
    api.annotate(_item(queue, "kb-004")["id"], "regression", reviewer="bo", queue=queue)
    api.annotate(_item(queue, "kb-003")["id"], "acceptable", reviewer="bo", queue=queue)
    assert not (tmp_path / "casesets").exists()  # a verdict alone writes nothing (`review annotate` stays light)
    res = CliRunner().invoke(app, ["gate", str(store.dir), "--runs-dir", str(store.dir.parent)])
    assert res.exit_code == 1, res.output
    cases = yaml.safe_load((tmp_path / "casesets" / "kept" / "kept.yaml").read_text("utf-8"))["cases"]
    assert [(c["origin"]["case"], c["origin"]["verdict"]) for c in cases] == [("kb-004", "regression")]


def test_without_the_setting_nothing_is_kept(review_run, tmp_path, monkeypatch):
    queue = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=queue)
    monkeypatch.chdir(tmp_path)
    api.annotate(_item(queue, "kb-004")["id"], "regression", reviewer="bo", queue=queue)
    judge_run(review_run["store"], review_run["rubric"], "production", queue=queue)
    assert not (tmp_path / "casesets").exists()
    assert api.keep_regressions(review_run["store"], queue=queue, into=tmp_path / "kept") == []


def test_keep_regressions_with_the_setting(review_run, tmp_path):
    queue = tmp_path / "q.sqlite"
    api.flag_run(review_run["store"], queue=queue)
    for case_id in ("kb-003", "kb-004"):
        api.annotate(_item(queue, case_id)["id"], "regression", reviewer="cy", queue=queue)
    rubric = tmp_path / "keep.yaml"
    rubric.write_text(RUBRIC.replace("review:\n", "review:\n  keep: regression\n"), "utf-8")
    kept = api.keep_regressions(review_run["store"], queue=queue, into=tmp_path / "kept", rubric=rubric)
    assert sorted(k.case_id.split("-", 2)[2] for k in kept) == ["kb-003", "kb-004"]
    again = api.keep_regressions(review_run["store"], queue=queue, into=tmp_path / "kept", rubric=rubric)
    assert all(k.replaced for k in again) and len(yaml.safe_load((tmp_path / "kept" / "kept.yaml").read_text("utf-8"))["cases"]) == 2


def test_the_keep_setting_is_checked():
    from evalsuite.verdict.review_policy import parse_review_policy

    problems = []
    policy = parse_review_policy({"keep": "regresion"}, lambda path, rule, field, msg: problems.append((field, msg)))
    assert policy.keep == "none" and problems == [("review.keep", "expected one of none, regression, got 'regresion'")]
    assert parse_review_policy({"keep": "regression"}, lambda *a: None).keep == "regression"
