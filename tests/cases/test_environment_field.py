"""A variant's `environment:` (issue 42): parsed with the suite, the `framework` change, in the
fingerprint only when set, inherited from the baseline, refused at its file:line when malformed."""

from __future__ import annotations

import pytest

from evalsuite.cases.suite import CHANGE_CATEGORIES, Variant, compute_changes, load_suite
from evalsuite.errors import ValidationError
from evalsuite.hashing import sha256_json

SETS = """
schema_version: 1
name: s
defaults: {scenario: kb_qa, lang: en}
documents:
  - {id: d1, title: T, access: public, text: "The office opens at 9 am."}
cases:
  - {id: k1, kind: grounded, prompt: "When does the office open?", context: [d1], expect: {required_terms: ["9 am"], citations: [d1]}}
"""


def _suite(write, variants: str, baseline: str = "  - {name: base, baseline: true, backend: transformers, model: embedded}\n"):
    write("sets/kb.yaml", SETS)
    return write("suite.yaml", "schema_version: 1\nname: t\ncasesets: [sets]\nvariants:\n" + baseline + variants)


def test_an_environment_is_the_framework_change_alone(write):
    s = load_suite(_suite(write, '  - name: tf-next\n    environment: {requirements: ["transformers==5.25.0"]}\n'))
    v = s.variant("tf-next")
    assert v.environment == {"requirements": ["transformers==5.25.0"]}
    assert v.changes == ("framework",) and not s.warnings  # one variable, not `backend`
    assert "framework" in CHANGE_CATEGORIES
    assert v.to_dict()["environment"] == v.environment and "environment" not in s.baseline.to_dict()
    assert s.resolved()["variants"][1]["environment"] == v.environment


def test_an_environment_and_another_change_warn(write):
    s = load_suite(_suite(write, '  - name: both\n    environment: {requirements: ["transformers==5.25.0"]}\n    quantization: {method: bnb, bits: 8}\n'))
    assert s.variant("both").changes == ("quantization", "framework")
    assert any("changes quantization, framework" in w for w in s.warnings)


def test_the_fingerprint_holds_the_environment_and_is_unchanged_without_one():
    plain = Variant("a", backend="transformers", model="embedded")
    assert "environment" not in plain.spec()
    # the fingerprint a variant without the field had before it existed
    before = {"backend": "transformers", "model": "embedded", "options": {}, "quantization": None, "speculative": None, "degrade": None, "batch_size": 1}
    assert plain.fingerprint() == sha256_json({"spec": before, "weights": None})
    fps = {
        Variant("a", backend="transformers", model="embedded", environment=env).fingerprint()
        for env in (None, {"requirements": ["transformers==5.25.0"]}, {"requirements": ["transformers==5.24.0"]}, {"python": "/opt/py/bin/python"})
    }
    assert len(fps) == 4


def test_compute_changes_compares_environments():
    base = Variant("b", backend="transformers", model="embedded", baseline=True)
    assert compute_changes(Variant("v", backend="transformers", model="embedded", environment={"python": "/x"}), base) == ("framework",)
    assert compute_changes(Variant("v", backend="transformers", model="embedded", environment={}), base) == ()


def test_variants_inherit_the_baselines_environment_and_null_leaves_it(write):
    baseline = '  - name: base\n    baseline: true\n    backend: transformers\n    model: embedded\n    environment: {requirements: ["transformers==5.25.0"]}\n'
    s = load_suite(_suite(write, "  - {name: int8, quantization: {method: bnb, bits: 8}}\n  - {name: own, environment: null}\n", baseline=baseline))
    assert s.variant("int8").environment == {"requirements": ["transformers==5.25.0"]} and s.variant("int8").changes == ("quantization",)
    assert s.variant("own").environment is None and s.variant("own").changes == ("framework",)


def test_a_python_path_is_relative_to_the_suite_file(write, tmp_path):
    s = load_suite(_suite(write, "  - {name: mine, environment: {python: venv/bin/python}}\n  - {name: abs, environment: {python: /usr/bin/python3}}\n"))
    assert s.variant("mine").environment == {"python": str(tmp_path / "venv" / "bin" / "python")}
    assert s.variant("abs").environment == {"python": "/usr/bin/python3"}


@pytest.mark.parametrize(
    "variant, field, message",
    [
        ("  - {name: e, environment: transformers==5.25.0}\n", "variants[1].environment", "expected a mapping"),
        ("  - {name: e, environment: {}}\n", "variants[1].environment", "give exactly one of `requirements`"),
        ('  - {name: e, environment: {requirements: ["transformers"], python: /x}}\n', "variants[1].environment", "give exactly one of"),
        (
            '  - {name: e, environment: {requirements: ["transformers"], pin: 1}}\n',
            "variants[1].environment.pin",
            "unknown field (known: python, requirements)",
        ),
        ("  - {name: e, environment: {requirements: transformers==5.25.0}}\n", "variants[1].environment.requirements", "expected a list of pip requirements"),
        ("  - {name: e, environment: {requirements: []}}\n", "variants[1].environment.requirements", "expected a list of pip requirements"),
        ('  - {name: e, environment: {requirements: ["transformers=5.25"]}}\n', "variants[1].environment.requirements.0", "not a pip requirement"),
        (
            '  - {name: e, environment: {requirements: ["torch==2.13.0", "-e ."]}}\n',
            "variants[1].environment.requirements.1",
            "pip options are not requirements",
        ),
        ("  - {name: e, environment: {python: 3}}\n", "variants[1].environment.python", "expected the path of a Python interpreter"),
        (
            '  - {name: e, backend: fake, environment: {requirements: ["transformers==5.25.0"]}}\n',
            "variants[1].environment",
            "the fake backend does not take `environment`",
        ),
        ('  - {name: e, backend: vllm, environment: {requirements: ["vllm"]}}\n', "variants[1].environment", "vLLM runs in its own environment already"),
    ],
)
def test_a_malformed_environment_is_refused_at_its_line(write, variant, field, message):
    with pytest.raises(ValidationError) as info:
        load_suite(_suite(write, variant))
    found = [p for p in info.value.problems if p.field == field and message in p.message]
    assert found and found[0].line == 6 and found[0].case_id == "e", info.value  # the variant's line of suite.yaml


def test_a_malformed_baseline_environment_is_reported_once(write):
    baseline = "  - {name: base, baseline: true, backend: transformers, model: embedded, environment: {requirements: []}}\n"
    with pytest.raises(ValidationError) as info:
        load_suite(
            _suite(write, "  - {name: a, quantization: {method: bnb, bits: 8}}\n  - {name: b, quantization: {method: bnb, bits: 4}}\n", baseline=baseline)
        )
    assert [p.field for p in info.value.problems] == ["variants[0].environment.requirements"]
