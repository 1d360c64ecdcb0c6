"""The branded structured-text case set (casesets/brand): schemas, examples, glossary use, coverage.

The case files are read as plain YAML for parametrizing (so one broken case fails one test, not the
collection) and through `load_cases` once, to prove the library accepts them.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from evalsuite.cases.caseset import all_cases, load_cases

ROOT = Path(__file__).resolve().parents[2]
BRAND = ROOT / "casesets" / "brand"
SCHEMA_DIR = BRAND / "schemas"
EXAMPLE_DIR = SCHEMA_DIR / "examples"
CASE_FILES = sorted(p for p in BRAND.glob("*.yaml") if p.name != "glossary.yaml")
SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.json"))
JSON_ONLY = {"en": "Reply with JSON only", "zh": "只回复 JSON"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def _yaml(path: Path):
    return yaml.safe_load(path.read_text("utf-8"))


@lru_cache(maxsize=None)
def glossary() -> dict:
    return _yaml(BRAND / "glossary.yaml")


def raw_cases() -> list[dict]:
    """Every case of the brand files, defaults applied, with `_file` added."""
    out = []
    for f in CASE_FILES:
        data = _yaml(f)
        for c in data["cases"]:
            out.append({**data.get("defaults", {}), **c, "_file": f.name})
    return out


CASES = raw_cases()
# the shipped examples.yaml illustrates the format; the coverage rules apply to the real case files
SUITE_CASES = [c for c in CASES if "example" not in c.get("tags", [])]


def _lang(case: dict) -> str:
    return case.get("lang", "en")


def _term_name(t) -> str:
    return t if isinstance(t, str) else t["term"]


def accepted_forms(lang: str) -> set[str]:
    """Spellings a required term may use in `lang`: glossary terms and synonyms of that language."""
    forms = set()
    for t in glossary()["terms"]:
        if t.get("lang") in (None, lang):
            forms.add(t["term"])
            forms.update(t.get("synonyms", ()))
    return forms


def forbidden_forms(lang: str) -> set[str]:
    """What a case in `lang` may forbid: forbidden variants of that language's terms and tone words to avoid."""
    forms = set(glossary().get("tone", {}).get("avoid", ()))
    for t in glossary()["terms"]:
        if t.get("lang") in (None, lang):
            forms.update(t.get("forbidden", ()))
    return forms


def spellings(term, lang: str) -> set[str]:
    """A required term and every spelling that counts as it (the case's and the glossary's synonyms)."""
    name = _term_name(term)
    out = {name, *([] if isinstance(term, str) else term.get("synonyms", ()))}
    for t in glossary()["terms"]:
        if t.get("lang") in (None, lang) and t["term"] == name:
            out.update(t.get("synonyms", ()))
    return out


def _schema(name: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{name}.json").read_text("utf-8"))


def _errors(schema: dict, instance) -> list[str]:
    cls = jsonschema.validators.validator_for(schema)
    return [e.message for e in cls(schema).iter_errors(instance)]


def _ids(cases):
    return [c["id"] for c in cases]


# ---------------------------------------------------------------------------------- schemas


def test_schema_count():
    assert 6 <= len(SCHEMA_FILES) <= 8, [p.name for p in SCHEMA_FILES]


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
def test_schema_is_valid_and_small(path):
    s = json.loads(path.read_text("utf-8"))
    assert s.get("$schema") == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.validators.validator_for(s).check_schema(s)
    assert s["type"] == "object"
    assert s.get("additionalProperties") is False
    assert 3 <= len(s["required"]) <= 6
    assert set(s["required"]) <= set(s["properties"])


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("kind", ["valid", "invalid"])
def test_schema_example(path, kind):
    example = EXAMPLE_DIR / f"{path.stem}.{kind}.json"
    assert example.is_file(), f"missing example {example.name}"
    errors = _errors(json.loads(path.read_text("utf-8")), json.loads(example.read_text("utf-8")))
    if kind == "valid":
        assert errors == []
    else:
        assert errors, f"{example.name} should not validate"


@pytest.mark.parametrize("path", sorted(EXAMPLE_DIR.glob("*.valid.json")), ids=lambda p: p.name)
def test_valid_examples_are_on_brand(path):
    text = path.read_text("utf-8")
    lang = "zh" if CJK.search(text) else "en"
    assert [f for f in forbidden_forms(lang) if occurs(f, text)] == []


def test_every_example_belongs_to_a_schema():
    stems = {p.stem for p in SCHEMA_FILES}
    orphans = [p.name for p in EXAMPLE_DIR.glob("*.json") if p.name.split(".")[0] not in stems]
    assert orphans == []


# ---------------------------------------------------------------------------------- glossary


def test_glossary_size_and_languages():
    terms = glossary()["terms"]
    assert 15 <= len(terms) <= 30
    assert sum(t.get("lang") == "zh" for t in terms) >= 5
    assert glossary()["company"] == "Lumora Technologies"
    for product in ("Lumora Cloud", "Lumora Insights", "Lumora Sync", "Lumora Guard", "露莫拉云", "露莫拉洞察", "露莫拉同步", "露莫拉卫士"):
        assert product in {t["term"] for t in terms}


def occurs(needle: str, hay: str) -> bool:
    """Whether `needle` occurs in `hay` as the terminology scorer matches it: on word boundaries for
    Latin text (any position in Chinese), ignoring case unless `needle` differs from a correct
    spelling only by case ("Lumora cloud")."""
    correct = accepted_forms("en") | accepted_forms("zh")
    if needle in correct or needle.casefold() not in {c.casefold() for c in correct}:
        needle, hay = needle.casefold(), hay.casefold()
    if CJK.search(needle):
        return needle in hay
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", hay) is not None


@pytest.mark.parametrize(
    "needle, hay, found",
    [("signin", "signing in", False), ("outage", "an Outage", True), ("Lumora cloud", "Lumora Cloud", False),
     ("L-Cloud", "use l-cloud now", True), ("露莫拉雲", "露莫拉云", False), ("云", "露莫拉云", True)],
)
def test_occurs_table(needle, hay, found):
    assert occurs(needle, hay) is found


@pytest.mark.parametrize("term", glossary()["terms"], ids=lambda t: t["term"])
def test_glossary_forbidden_never_inside_a_correct_form(term):
    # a forbidden variant inside a preferred spelling would flag every correct answer
    correct = accepted_forms(term.get("lang", "en"))
    for bad in term.get("forbidden", ()):
        assert bad not in correct, bad
        assert [good for good in correct if occurs(bad, good)] == [], bad


@pytest.mark.parametrize(
    "lang, form, accepted",
    [("en", "Lumora Cloud", True), ("en", "LumoraCloud", False), ("en", "露莫拉云", False),
     ("zh", "露莫拉云", True), ("zh", "Lumora Cloud", True), ("zh", "露莫拉雲", False)],
)
def test_accepted_forms_table(lang, form, accepted):
    assert (form in accepted_forms(lang)) is accepted


# ---------------------------------------------------------------------------------- cases


def test_load_cases():
    cases = all_cases(load_cases([BRAND]))
    assert {c.id for c in cases} == {c["id"] for c in CASES}
    assert all(c.json_schema is not None and c.glossary is not None for c in cases)


def test_counts_and_languages():
    assert len(CASES) >= 90
    zh = [c for c in CASES if _lang(c) == "zh"]
    assert len(zh) / len(CASES) >= 0.2
    easy = [c for c in SUITE_CASES if "easy" in c["tags"]]
    assert 0.35 <= len(easy) / len(SUITE_CASES) <= 0.65
    assert len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_case_names_existing_schema(case):
    assert case["id"].startswith("brand-")
    assert (case["scenario"], case["kind"]) == ("brand", "structured")
    path = BRAND / case["expect"]["schema"]
    assert path.is_file() and path.parent == SCHEMA_DIR


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_case_terms_follow_glossary(case):
    lang = _lang(case)
    required = [_term_name(t) for t in case["expect"].get("required_terms", [])]
    forbidden = case["expect"].get("forbidden_terms", [])
    assert required, "a brand case requires at least one term"
    assert [t for t in required if t not in accepted_forms(lang)] == []
    assert [f for f in forbidden if f not in forbidden_forms(lang)] == []
    assert set(required).isdisjoint(forbidden_forms(lang))
    assert [(f, r) for f in forbidden for r in required if occurs(f, r)] == []


@pytest.mark.parametrize("case", SUITE_CASES, ids=_ids(SUITE_CASES))
def test_case_tags(case):
    tags = case.get("tags", [])
    assert ("easy" in tags) != ("hard" in tags)
    assert Path(case["expect"]["schema"]).stem in tags


@pytest.mark.parametrize("case", SUITE_CASES, ids=_ids(SUITE_CASES))
def test_case_prompt_states_keys_terms_and_format(case):
    lang, prompt = _lang(case), case["prompt"]
    schema = _schema(Path(case["expect"]["schema"]).stem)
    assert JSON_ONLY[lang] in prompt
    assert [k for k in schema["required"] if f'"{k}"' not in prompt] == []
    if "trap" not in case["tags"]:
        # a trap prompt may leave the correct name for the model to supply
        terms = case["expect"].get("required_terms", [])
        assert [_term_name(t) for t in terms if not any(s in prompt for s in spellings(t, lang))] == []
    quoted = [f for f in case["expect"].get("forbidden_terms", []) if f in prompt]
    if "trap" in case["tags"]:
        assert quoted, "a trap case quotes a forbidden variant in its prompt"
    else:
        assert quoted == []
    assert bool(CJK.search(prompt)) is (lang == "zh")


@pytest.mark.parametrize("case", [c for c in SUITE_CASES if "easy" in c["tags"]], ids=lambda c: c["id"])
def test_easy_cases_use_flat_three_key_schemas(case):
    schema = _schema(Path(case["expect"]["schema"]).stem)
    assert len(schema["required"]) == 3
    assert all(p.get("type") != "object" and p.get("items", {}).get("type") != "object" for p in schema["properties"].values())
