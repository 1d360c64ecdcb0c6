"""A case set whose content passed the case schema once is not checked again (evalsuite.cachedir: the
check was most of a warm re-run's time); a changed file is, and a file with problems always is. Each
case-set file is parsed once per load."""

from __future__ import annotations

import pytest

from evalsuite.cases import caseset, valid_memo
from evalsuite.errors import ValidationError

CASESET = """\
name: memo
cases:
  - id: q1
    scenario: kb_qa
    kind: ungrounded
    prompt: "What is 2 + 2?"
    expect: {answer_keywords: ["4"]}
"""


@pytest.fixture
def checks(tmp_path, monkeypatch) -> list[str]:
    """The files checked against the case schema from now on, with a cache directory of the test's own."""
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[str] = []
    real = caseset.schema_problems

    def counted(data, schema_name, file, *args, **kwargs):
        if schema_name == "caseset.schema.json":
            seen.append(file)
        return real(data, schema_name, file, *args, **kwargs)

    monkeypatch.setattr(caseset, "schema_problems", counted)
    return seen


def test_content_that_passed_once_is_not_checked_again(tmp_path, checks):
    f = tmp_path / "sets" / "memo.yaml"
    f.parent.mkdir()
    f.write_text(CASESET)
    first = caseset.all_cases(caseset.load_cases([f]))
    second = caseset.all_cases(caseset.load_cases([f]))
    assert [c.id for c in first] == [c.id for c in second] == ["q1"] and first[0].digest() == second[0].digest()
    assert checks == [str(f)]  # the second load found it in the memo
    assert list((tmp_path / "cache" / "valid" / "caseset").iterdir())

    f.write_text(CASESET.replace("2 + 2", "3 + 3"))  # changed content: checked anew
    assert [c.prompt for c in caseset.all_cases(caseset.load_cases([f]))] == ["What is 3 + 3?"]
    assert checks == [str(f), str(f)]


def test_a_file_with_problems_is_checked_every_time(tmp_path, checks):
    f = tmp_path / "bad.yaml"
    f.write_text(CASESET.replace("kind: ungrounded", "kind: ungrounded\n    colour: blue"))
    for _ in range(2):
        with pytest.raises(ValidationError) as err:
            caseset.load_cases([f])
        assert "colour" in str(err.value) and f"{f}:" in str(err.value)
    assert checks == [str(f), str(f)]


def test_a_date_and_its_text_are_not_the_same_content(tmp_path, checks):
    assert valid_memo.content_key({"version": "2024-01-01"}) != valid_memo.content_key({"version": __import__("datetime").date(2024, 1, 1)})
    assert valid_memo.content_key({1: "a", "b": 2}) is None  # keys of mixed types: no canonical JSON, no memo


def test_an_unwritable_cache_only_means_checking_again(tmp_path, monkeypatch, checks):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(blocker))
    f = tmp_path / "memo.yaml"
    f.write_text(CASESET)
    for _ in range(2):
        assert [c.id for c in caseset.all_cases(caseset.load_cases([f]))] == ["q1"]
    assert checks == [str(f), str(f)]


def test_each_file_is_parsed_once_per_load(tmp_path, monkeypatch, checks):
    f = tmp_path / "memo.yaml"
    f.write_text(CASESET)
    parsed: list[str] = []
    real = caseset.load_yaml
    monkeypatch.setattr(caseset, "load_yaml", lambda p: parsed.append(str(p)) or real(p))
    caseset.load_cases([f])
    assert parsed == [str(f)]
