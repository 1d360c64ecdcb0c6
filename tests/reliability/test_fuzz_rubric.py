"""Fuzzed rubrics (evalsuite/verdict/rubric.py): any file yields a Rubric with every stage, or a
RubricError naming the file, line, rule and field, never another exception; loading writes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from evalsuite.verdict.rubric import STAGES, Rubric, load_rubric

from .fuzz import Counter, check_error, fuzz, mutate, snapshot, splice, yamlish

RUBRIC = {
    "schema_version": 1, "name": "fz", "alpha": 0.05, "multiple_testing": "tarone",
    "rules": [
        {"name": "recall", "scenario": "kb_qa", "metric": "citations.recall", "max_drop": 0.02, "require_significance": True, "above_noise": True},
        {"name": "floors", "scenario": ["kb_qa", "code"], "metric": "terms.*", "min": 0.5, "max_flips": 2, "severity": "warn"},
        {"name": "rel", "max_error_rate": 0.01, "max_timeout_rate": 0.01, "max_latency_p95_ratio": 1.5, "required": True},
        {"name": "spec", "min_exactness": 0.9, "enabled": False},
    ],
    "stages": {
        "dev": {"alpha": 0.1, "rules": {"recall": {"max_drop": 0.1, "severity": "warn"}, "rel": {"max_error_rate": None}}},
        "pilot": {"multiple_testing": "holm", "rules": {"spec": {"enabled": True}}},
        "production": {"add": [{"name": "extra", "metric": "json.valid", "scenario": "brand", "min": 0.95}]},
    },
}


def _check(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = root / "rubric.yaml"
        path.write_text(text, "utf-8")
        before = snapshot(root)
        try:
            rubric = load_rubric(path)
            assert isinstance(rubric, Rubric) and set(rubric.stages) == set(STAGES)
            for stage in STAGES:
                assert all(r.name for r in rubric.for_stage(stage).rules)
        except Exception as exc:  # noqa: BLE001 - the property: only clear EvalsuiteErrors
            check_error(exc, root)
            Counter.hit(name, "error")
        else:
            Counter.hit(name, "valid")
        assert snapshot(root) == before, "loading must write nothing"


def test_the_unmutated_rubric_is_valid(tmp_path):
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(RUBRIC), "utf-8")
    rubric = load_rubric(tmp_path / "r.yaml")
    assert [r.name for r in rubric.for_stage("production").rules] == ["recall", "floors", "rel", "extra"]
    assert [r.name for r in rubric.for_stage("pilot").rules] == ["recall", "floors", "rel", "spec"]


@fuzz(100)
@given(st.data())
def test_mutated_rubrics(data):
    _check(yaml.safe_dump(mutate(data, RUBRIC), allow_unicode=True), "rubric: mutated tree")


@fuzz(40)
@given(st.data())
def test_mutated_shipped_rubric(data):
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "rubrics" / "default.yaml").read_text("utf-8"))
    _check(yaml.safe_dump(mutate(data, shipped), allow_unicode=True), "rubric: mutated default.yaml")


@fuzz(60)
@given(st.data())
def test_damaged_rubric_text(data):
    _check(splice(data, yaml.safe_dump(RUBRIC, allow_unicode=True)), "rubric: damaged text")


@fuzz(60)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")), yamlish.map(yaml.safe_dump)))
@example("rules: [{name: r, max_error_rate: 0.1}]\ntrue: 1\nx: 2\n")  # mixed key types
@example("rules: [{name: [r], max_error_rate: 0.1}]\nstages: {dev: {rules: {r: {}}}}\n")  # an unhashable rule name
@example("rules: [{name: r, max_error_rate: 0.1, null: 1}]\n")  # a null field name
@example("rules: [{name: r, max_error_rate: 0.1}]\nstages: {dev: {1: 2, x: 3}}\n")
def test_arbitrary_rubric_text(text):
    _check(text, "rubric: arbitrary text")
