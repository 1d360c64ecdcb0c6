"""Fuzzed case sets (evalsuite/cases/caseset.py): any file yields a CaseSet or a clear error naming the
place, never another exception, and loading writes nothing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from evalsuite.cases.caseset import CaseSet, load_caseset, load_cases

from .fuzz import Counter, check_error, fuzz, mutate, snapshot, splice, yamlish

CASESET = {
    "schema_version": 1, "name": "fz", "version": 1,
    "defaults": {"scenario": "kb_qa", "kind": "grounded", "lang": "en", "tags": ["t"]},
    "documents": [{"id": "d1", "text": "The VPN lasts 12 hours.", "access": "restricted", "roles": ["admin"], "canaries": ["CANARY-1234"]}, "docs.yaml"],
    "cases": [
        {"id": "q1", "prompt": "How long?", "context": ["d1", "d3"], "user_role": "admin",
         "expect": {"required_terms": ["12 hours", {"term": "VPN", "synonyms": ["tunnel"]}], "citations": ["d1"], "canaries": ["CANARY-1234"]}},
        {"id": "q2", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "tags": ["x"],
         "perturbation_of": "q1", "perturbation": "paraphrase", "context": [{"id": "d2", "text": "inline"}], "expect": {"must_abstain": True}},
        {"id": "c1", "scenario": "code", "kind": "completion", "prompt": "def f(): ...",
         "expect": {"tests": "assert f() == 1", "entry_point": "f", "mutants": ["def f():\n    return 2\n"]}},
        {"id": "c2", "scenario": "code", "kind": "tests", "prompt": "write tests", "expect": {"tests": "assert True", "reference": "def g(): return 1"}},
        {"id": "b1", "scenario": "brand", "kind": "structured", "prompt": "json please", "expect": {"schema": "schema.json", "forbidden_terms": ["cheap"]}},
    ],
    "glossary": "glossary.yaml",
}
RESOURCES = {
    "docs.yaml": {"kind": "documents", "schema_version": 1, "documents": [{"id": "d3", "text": "Reset at the portal.", "lang": "en"}]},
    "glossary.yaml": {"kind": "glossary", "schema_version": 1, "company": "Acme", "tone": {"preferred": ["clear"], "avoid": ["hype"]},
                      "terms": [{"term": "Acme Cloud", "lang": "en", "synonyms": ["the cloud"], "forbidden": ["acme-cloud"]}]},
}
SCHEMA = {"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}}


def _write_files(root: Path, caseset_text: str, resources: dict, schema_text: str, name: str = "cases.yaml") -> Path:
    for fname, doc in resources.items():
        (root / fname).write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True), "utf-8")
    (root / "schema.json").write_text(schema_text, "utf-8")
    path = root / name
    path.write_text(caseset_text, "utf-8")
    return path


def _check_load(root: Path, path: Path, name: str) -> None:
    before = snapshot(root)
    try:
        result = load_caseset(path)
    except Exception as exc:  # noqa: BLE001 - the property: only clear EvalsuiteErrors
        check_error(exc, root)
        Counter.hit(name, "error")
    else:
        assert isinstance(result, CaseSet) and all(c.id and c.scenario and c.kind for c in result.cases)
        Counter.hit(name, "valid")
    try:
        load_cases([root])  # the whole folder, as `evalsuite validate` and suites load it
    except Exception as exc:  # noqa: BLE001
        check_error(exc, root)
    assert snapshot(root) == before, "loading must write nothing"


def test_the_unmutated_case_set_is_valid(tmp_path):
    path = _write_files(tmp_path, yaml.safe_dump(CASESET), RESOURCES, json.dumps(SCHEMA))
    assert [c.id for c in load_caseset(path).cases] == ["q1", "q2", "c1", "c2", "b1"]


@fuzz(100)
@given(st.data())
def test_mutated_case_sets(data):
    """Structural edits of a valid case set and of the files it names."""
    target = data.draw(st.sampled_from(["cases.yaml"] * 4 + ["docs.yaml", "glossary.yaml", "schema.json"]), label="file")
    caseset, resources, schema = CASESET, dict(RESOURCES), SCHEMA
    if target == "cases.yaml":
        caseset = mutate(data, CASESET)
    elif target == "schema.json":
        schema = mutate(data, SCHEMA)
    else:
        resources[target] = mutate(data, RESOURCES[target])
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = _write_files(root, yaml.safe_dump(caseset, allow_unicode=True), resources, json.dumps(schema, default=str))
        _check_load(root, path, "cases: mutated tree")


@fuzz(60)
@given(st.data())
def test_damaged_case_set_text(data):
    """Text-level damage: broken YAML, tabs, anchors, python tags, several documents."""
    text = splice(data, yaml.safe_dump(CASESET, allow_unicode=True))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = _write_files(root, text, RESOURCES, json.dumps(SCHEMA))
        _check_load(root, path, "cases: damaged text")


@fuzz(60)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")), yamlish.map(yaml.safe_dump)))
@example("cases: []\nnull: 1\n1: 2\n")  # keys of mixed types once crashed the unknown-field report
@example("cases:\n- {id: [a], scenario: kb_qa, kind: grounded, prompt: x}\n- {id: [a], prompt: y}\n")  # an unhashable id
@example("cases: []\n'': 1\n")  # an empty key is named, not left blank
@example("[" * 200)
def test_arbitrary_case_set_text(text):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = _write_files(root, text, RESOURCES, json.dumps(SCHEMA))
        _check_load(root, path, "cases: arbitrary text")


@fuzz(40)
@given(st.binary(max_size=120))
@example(b"cases: []\n# caf\xe9\n")  # Latin-1, once a UnicodeDecodeError
def test_arbitrary_bytes(raw):
    """Not UTF-8 at all: still a clear error naming the file."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = _write_files(root, "", RESOURCES, json.dumps(SCHEMA))
        path.write_bytes(raw)
        _check_load(root, path, "cases: arbitrary bytes")


@fuzz(60)
@given(st.data())
def test_mutated_jsonl_case_sets(data):
    lines = []
    for case in CASESET["cases"][:4]:
        case = {"scenario": "kb_qa", "kind": "grounded", **case}
        case.pop("context", None)
        if data.draw(st.booleans(), label="mutate line"):
            case = mutate(data, case, max_mutations=2)
        lines.append(json.dumps(case, default=str) if data.draw(st.integers(0, 9), label="garbage") else data.draw(st.text(max_size=30), label="line"))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = _write_files(root, "\n".join(lines) + "\n", RESOURCES, json.dumps(SCHEMA), name="cases.jsonl")
        _check_load(root, path, "cases: mutated jsonl")
