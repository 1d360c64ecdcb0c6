"""Case-set loading and validation: every problem located by file, line, case and field."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from evalsuite.cases.caseset import all_cases, load_cases, suite_digest
from evalsuite.cli import app
from evalsuite.errors import ValidationError

runner = CliRunner()

GOOD = """
schema_version: 1
defaults: {scenario: kb_qa, lang: en}
documents:
  - {id: d1, title: One, text: The gateway is vpn.example and sessions last 12 hours.}
  - {id: d2, title: Two, text: Pricing is 29 USD per user.}
cases:
  - id: c1
    kind: grounded
    prompt: How long do sessions last?
    context: [d1, d2]
    expect: {citations: [d1], required_terms: [12 hours]}
  - id: c2
    kind: ungrounded
    prompt: What is the Enterprise price?
    context: [d2]
    expect: {must_abstain: true}
"""

# (name, file text, expected (line, field) pairs, expected message fragments)
BROKEN = [
    (
        "wrong type",
        """
        cases:
          - id: a1
            scenario: kb_qa
            kind: grounded
            prompt: hi
            expect:
              must_abstain: "yes"
        """,
        [(7, "expect.must_abstain")],
        ["'yes' is not of type 'boolean'"],
    ),
    (
        "isolation misspelled",
        """
        cases:
          - id: a1
            scenario: code
            kind: completion
            prompt: add
            expect:
              entry_point: add
              tests: "assert add(1, 2) == 3"
              isolation: share
        """,
        [(9, "expect.isolation")],
        ["'share' is not one of ['process', 'shared']"],
    ),
    (
        "unknown field",
        """
        cases:
          - id: a1
            scenario: kb_qa
            kind: grounded
            promt: hi
        """,
        [(5, "promt")],
        ["unknown field"],
    ),
    (
        "unknown kind and missing prompt",
        """
        cases:
          - id: a1
            scenario: code
            kind: grounded
            prompt: x
          - id: a2
            scenario: kb_qa
            kind: grounded
        """,
        [(4, "kind"), (6, "prompt")],
        ["is not a kind of scenario 'code'", "exactly one of `prompt` or `messages`"],
    ),
    (
        "duplicate id",
        """
        cases:
          - id: a1
            scenario: kb_qa
            kind: grounded
            prompt: x
          - id: a1
            scenario: kb_qa
            kind: grounded
            prompt: y
        """,
        [(6, "id")],
        ["duplicate case id"],
    ),
    (
        "test code does not compile",
        """
        cases:
          - id: a1
            scenario: code
            kind: completion
            prompt: x
            expect:
              tests: "assert f(1) =="
              reference: "def f(x): return x"
              mutants: ["def f(x) return x"]
        """,
        [(7, "expect.tests"), (9, "expect.mutants[0]")],
        ["does not compile"],
    ),
    (
        "missing schema file and unknown document",
        """
        cases:
          - id: a1
            scenario: brand
            kind: structured
            prompt: x
            expect: {schema: schemas/nope.json}
          - id: a2
            scenario: kb_qa
            kind: grounded
            prompt: x
            context: [missing-doc]
            expect: {citations: [other]}
        """,
        [(6, "expect.schema"), (11, "context[0]"), (12, "expect.citations[0]")],
        ["schema file not found", "unknown document id 'missing-doc'", "not in the case's context"],
    ),
    (
        "yaml syntax error",
        """
        cases:
          - id: a1
            prompt: [unclosed
        """,
        [(4, "yaml")],
        [""],
    ),
]


@pytest.mark.parametrize("name,text,where,messages", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_case_files_name_file_line_and_field(name, text, where, messages, write, tmp_path):
    path = write("sets/broken.yaml", text)
    with pytest.raises(ValidationError) as info:
        load_cases([path])
    found = {(p.line, p.field) for p in info.value.problems}
    for expected in where:
        assert expected in found, f"{expected} not in {found}"
    text_out = str(info.value)
    for m in messages:
        assert m in text_out
    for p in info.value.problems:
        assert p.file == str(path)

    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 4  # issue 38: your input is wrong exits 4
    line, field = where[0]
    assert f"{path}:{line}:" in result.output
    assert field in result.output


def test_jsonl_problems_name_the_line(write):
    path = write(
        "sets/x.jsonl",
        """
        {"id": "j1", "scenario": "kb_qa", "kind": "grounded", "prompt": "q"}

        {"id": "j2", "scenario": "kb_qa", "kind": "grounded", "prompt": 3}
        """,
    )
    with pytest.raises(ValidationError) as info:
        load_cases([path])
    (problem,) = info.value.problems
    assert (problem.line, problem.case_id, problem.field) == (3, "j2", "prompt")


def test_duplicate_ids_across_files(write, tmp_path):
    write("sets/a.yaml", GOOD)
    write("sets/b.yaml", GOOD.replace("id: c2", "id: c3"))
    with pytest.raises(ValidationError) as info:
        load_cases([tmp_path / "sets"])
    dups = [p for p in info.value.problems if p.field == "id"]
    assert {p.case_id for p in dups} == {"c1"}
    assert "b.yaml" in dups[0].file and "first defined at" in dups[0].message


def test_shipped_casesets_validate(repo, monkeypatch):
    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["validate", "casesets/"])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output
    for scenario in ("kb_qa", "code", "brand"):
        assert scenario in result.output


def test_good_file_loads_resolved(write):
    path = write("sets/good.yaml", GOOD)
    (cs,) = load_cases([path])
    c1, c2 = cs.cases
    assert [d.id for d in c1.context] == ["d1", "d2"]
    assert c1.expect.citations == ("d1",)
    assert c1.expect.required_terms[0].term == "12 hours"
    assert c2.expect.must_abstain is True
    assert c1.line == 7  # the line of "- id: c1"


def test_digest_changes_when_any_case_changes_and_only_then(write, tmp_path):
    path = write("sets/good.yaml", GOOD)
    base = suite_digest(all_cases(load_cases([path])))
    # reloading, reformatting and reordering files change nothing
    assert suite_digest(all_cases(load_cases([path]))) == base
    path.write_text(path.read_text().replace("cases:\n", "# a comment\ncases:\n"))
    assert suite_digest(all_cases(load_cases([path]))) == base
    edits = [
        ("sessions last 12 hours", "sessions last 10 hours"),  # a shared document's text
        ("How long do sessions last?", "How long do sessions last"),  # a prompt
        ("required_terms: [12 hours]", "required_terms: [12h]"),  # an expectation
        ("lang: en", "lang: zh"),  # defaults
        ("citations: [d1]", "citations: [d1, d2]"),
    ]
    original = path.read_text()
    seen = {base}
    for old, new in edits:
        assert old in original
        path.write_text(original.replace(old, new, 1))
        d = suite_digest(all_cases(load_cases([path])))
        assert d not in seen, f"digest did not change for edit {old!r} -> {new!r}"
        seen.add(d)
    path.write_text(original)
    assert suite_digest(all_cases(load_cases([path]))) == base


def test_digest_of_a_copy_elsewhere_is_the_same(write, tmp_path):
    path = write("sets/good.yaml", GOOD)
    other = tmp_path / "elsewhere" / "good.yaml"
    other.parent.mkdir()
    shutil.copy(path, other)
    assert suite_digest(all_cases(load_cases([path]))) == suite_digest(all_cases(load_cases([other])))


def test_isolation_defaults_to_process_and_shared_is_kept(write):
    text = """
    cases:
      - id: a1
        scenario: code
        kind: completion
        prompt: add
        expect: {entry_point: add, tests: "assert add(1, 2) == 3"}
      - id: a2
        scenario: code
        kind: completion
        prompt: add
        expect: {entry_point: add, tests: "assert add(1, 2) == 3", isolation: shared}
    """
    cases = {c.id: c for c in all_cases(load_cases([write("sets/iso.yaml", text)]))}
    assert (cases["a1"].expect.isolation, cases["a2"].expect.isolation) == ("process", "shared")


LONG = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded}
cases:
  - {id: l1, prompt: q, tags: [long, ctx-2k]}
  - {id: l2, prompt: q, tags: [long, ctx-7k]}
  - {id: l3, prompt: q, kind: ungrounded, tags: [long, ctx-7k]}
  - {id: s1, prompt: q, tags: [ctx-7k]}
  - {id: s2, prompt: q}
"""


def _long_rows(output: str) -> dict[tuple[str, str], list[str]]:
    """The rows of validate's long-context table: (scenario, kind) -> the cells after them."""
    part = output.split("long-context cases", 1)[1]
    rows = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) > 2 and cells[0] in ("kb_qa", "code", "brand"):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_validate_counts_long_cases_per_scenario_and_size(write, monkeypatch):
    path = write("sets/long.yaml", LONG)
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "3 long-context cases" in result.output
    head = [line for line in result.output.splitlines() if "scenario" in line][-1]
    assert [c.strip() for c in head.strip("┃ ").split("┃")] == ["scenario", "kind", "2k", "7k", "total"]
    assert _long_rows(result.output) == {("kb_qa", "grounded"): ["1", "1", "2"], ("kb_qa", "ungrounded"): ["0", "1", "1"], ("kb_qa", "all"): ["1", "2", "3"]}


def test_the_shipped_long_cases_are_counted_by_their_size_tags(repo, monkeypatch):
    import yaml

    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["validate", "casesets/"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    data = yaml.safe_load((repo / "casesets" / "kb_qa_long" / "long.yaml").read_text("utf-8"))
    by_size: dict[str, int] = {}
    for c in data["cases"]:
        (size,) = [t[4:] for t in c["tags"] if t.startswith("ctx-")]
        by_size[size] = by_size.get(size, 0) + 1
    assert _long_rows(result.output)[("kb_qa", "all")] == [str(by_size["2k"]), str(by_size["4k"]), str(by_size["7k"]), str(len(data["cases"]))]


def test_a_long_case_must_name_its_size(write):
    path = write("sets/bad.yaml", LONG.replace("tags: [long, ctx-2k]", "tags: [long]").replace("tags: [long, ctx-7k]}", "tags: [long, ctx-7k, ctx-4k]}", 1))
    with pytest.raises(ValidationError) as info:
        load_cases([path])
    assert {(p.case_id, p.field) for p in info.value.problems} == {("l1", "tags"), ("l2", "tags")}
    assert "ctx-<N>k" in str(info.value)
