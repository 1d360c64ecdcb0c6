"""Fuzzed suite files (evalsuite/cases/suite.py): any file yields a Suite whose cases load, or a clear
error naming the place, never another exception, and loading writes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from evalsuite.cases.suite import Suite, load_suite
from evalsuite.yamlio import dump_yaml

from .fuzz import Counter, check_error, fuzz, mutate, snapshot, splice, yamlish

SUITE = {
    "schema_version": 1, "name": "fz", "description": "fuzz base",
    "casesets": ["sets", {"path": "sets/cases.yaml", "tags": ["t"], "exclude_tags": ["x"], "kinds": ["grounded"], "scenarios": ["kb_qa"], "ids": ["q1", "q2"]}],
    "generation": {"max_new_tokens": 16, "temperature": 0, "top_p": 1.0, "samples": 1, "seed": 1, "batch_size": 2, "timeout_s": 10},
    "rubric": "rubric.yaml", "stage": "pilot", "output_dir": "out", "cache": "out/cache.sqlite", "limit": 3,
    "variants": [
        {"name": "base", "baseline": True, "backend": "fake", "model": "./m", "options": {"default": "x [d1]"}},
        {"name": "nf4", "quantization": {"method": "bnb", "bits": 4, "quant_type": "nf4"}, "changes": ["quantization"]},
        {"name": "spec", "speculative": {"method": "draft", "num_tokens": 5, "draft": {"model": "./d"}}, "generation": {"temperature": 0.5}},
        {"name": "rerun", "noise": True, "description": "the baseline again"},
        {"name": "deg", "degrade": {"kind": "drop_citations", "share": 0.5}},
    ],
}
CASES = {"schema_version": 1, "defaults": {"scenario": "kb_qa", "kind": "grounded", "tags": ["t"]},
         "documents": [{"id": "d1", "text": "The VPN lasts 12 hours."}],
         "cases": [{"id": "q1", "prompt": "How long?", "context": ["d1"]}, {"id": "q2", "prompt": "And now?", "context": ["d1"], "tags": ["x"]}]}


def _check(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "sets").mkdir()
        (root / "sets" / "cases.yaml").write_text(yaml.safe_dump(CASES), "utf-8")
        path = root / "suite.yaml"
        path.write_text(text, "utf-8")
        before = snapshot(root)
        try:
            suite = load_suite(path)
            assert isinstance(suite, Suite) and sum(v.baseline for v in suite.variants) == 1
            dump_yaml(suite.resolved())  # what a run saves beside itself
            cases = suite.load_cases()
            assert all(c.id in ("q1", "q2") for c in cases)
        except Exception as exc:  # noqa: BLE001 - the property: only clear EvalsuiteErrors
            check_error(exc, root)
            Counter.hit(name, "error")
        else:
            Counter.hit(name, "valid")
        assert snapshot(root) == before, "loading must write nothing"


def test_the_unmutated_suite_is_valid(tmp_path):
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "cases.yaml").write_text(yaml.safe_dump(CASES), "utf-8")
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE), "utf-8")
    suite = load_suite(tmp_path / "suite.yaml")
    assert [v.name for v in suite.variants] == ["base", "nf4", "spec", "rerun", "deg"]
    assert [c.id for c in suite.load_cases()] == ["q1", "q2"]


@fuzz(100)
@given(st.data())
def test_mutated_suite_files(data):
    _check(yaml.safe_dump(mutate(data, SUITE), allow_unicode=True), "suite: mutated tree")


@fuzz(60)
@given(st.data())
def test_damaged_suite_text(data):
    _check(splice(data, yaml.safe_dump(SUITE, allow_unicode=True)), "suite: damaged text")


# each once ended in a TypeError or NotImplementedError instead of a located problem
REGRESSIONS = [
    "casesets: [{path: sets, tags: [{}]}]\nvariants: [{name: b, baseline: true}]\n",
    "casesets: [{path: true}]\nvariants: [{name: b, baseline: true}]\n",
    "casesets: [sets]\nrubric: true\nvariants: [{name: b, baseline: true}]\n",
    "casesets: [sets]\nvariants: [{name: b, baseline: true, backend: {x: 1}}]\n",
    "casesets: [sets]\nvariants: [{name: b, baseline: true}, {name: v, changes: [{}], noise: true}]\n",
    "casesets: [sets]\nvariants: [{name: b, baseline: true, options: [1, 2]}]\n",
    "casesets: [sets]\ngeneration: {null: 1, x: 2}\nvariants: [{name: b, baseline: true}]\n",
    "casesets: ['/nonexistent/*.yaml']\nvariants: [{name: b, baseline: true}]\n",
]


@fuzz(60)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")), yamlish.map(yaml.safe_dump)))
def test_arbitrary_suite_text(text):
    _check(text, "suite: arbitrary text")


def test_regressions_found_by_fuzzing():
    for text in REGRESSIONS:
        _check(text, "suite: regression")


def test_a_glob_in_a_suite_selects_its_files(tmp_path):
    """Suites resolve paths to absolute ones; a glob among them once raised NotImplementedError."""
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "cases.yaml").write_text(yaml.safe_dump(CASES), "utf-8")
    (tmp_path / "suite.yaml").write_text("casesets: ['sets/*.yaml']\nvariants: [{name: b, baseline: true}]\n", "utf-8")
    assert [c.id for c in load_suite(tmp_path / "suite.yaml").load_cases()] == ["q1", "q2"]
