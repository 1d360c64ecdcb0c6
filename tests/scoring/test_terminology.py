"""terminology.*: required terms kept, forbidden variants avoided, terms dropped against the baseline."""

import pytest

from evalsuite.cases.caseset import Case, Expect, Glossary, Term, load_caseset
from evalsuite.scoring.base import SCORERS, ScoreInput
from evalsuite.scoring.terminology import dropped, forbidden, retention

GLOSSARY = Glossary.parse(
    {
        "name": "test",
        "company": "Lumora",
        "terms": [
            {"term": "Lumora Cloud", "lang": "en", "forbidden": ["LumoraCloud", "Lumora cloud", "L-Cloud"]},
            {"term": "Lumora Insights", "lang": "en", "forbidden": ["Lumora Analytics"]},
            {"term": "backup", "lang": "en", "synonyms": ["backups"], "forbidden": ["back-up"]},
            {"term": "露莫拉云", "lang": "zh", "synonyms": ["Lumora Cloud"], "forbidden": ["露莫拉雲", "鲁莫拉云"]},
        ],
    }
)


def brand(required=("Lumora Cloud",), forbidden_terms=(), lang="en", glossary=GLOSSARY, scenario="brand", kind="structured"):
    return Case(
        id=f"t-{lang}",
        scenario=scenario,
        kind=kind,
        lang=lang,
        prompt="Write a product card.",
        expect=Expect(required_terms=tuple(Term.parse(t) for t in required), forbidden_terms=tuple(forbidden_terms)),
        glossary=glossary,
    )


def score(fn, case, text, baseline=None):
    (s,) = fn(ScoreInput(case, text, baseline_text=baseline))
    return s


@pytest.mark.parametrize(
    "case, text, value, missing",
    [
        (brand(), '{"product": "Lumora Cloud"}', 1.0, []),
        (brand(), '{"product": "ＬＵＭＯＲＡ　ＣＬＯＵＤ"}', 1.0, []),  # full-width, other case: still the term
        (brand(), '{"product": "LumoraCloud"}', 0.0, ["Lumora Cloud"]),
        (brand(required=("Lumora Cloud", "Lumora Insights")), "Lumora Cloud keeps your files.", 0.5, ["Lumora Insights"]),
        # synonyms of the case's own term
        (brand(required=({"term": "12 hours", "synonyms": ["twelve hours"]},), scenario="kb_qa", kind="grounded", glossary=None),
         "Sessions end after twelve hours [ex-vpn].", 1.0, []),
        # zh case: the glossary's synonym "Lumora Cloud" counts for 露莫拉云; stray space in Chinese too
        (brand(required=("露莫拉云",), lang="zh"), '{"product": "Lumora Cloud 托管存储"}', 1.0, []),
        (brand(required=("露莫拉云",), lang="zh"), '{"product": "露莫拉 云"}', 1.0, []),
        (brand(required=("露莫拉云",), lang="zh"), '{"product": "露莫拉雲"}', 0.0, ["露莫拉云"]),
    ],
)
def test_retention(case, text, value, missing):
    s = score(retention, case, text)
    assert s.value == value
    assert s.passed is (value == 1.0)
    assert s.higher_is_better is True
    assert s.details["missing"] == missing


def test_retention_without_required_terms_is_none():
    s = score(retention, brand(required=()), "anything")
    assert s.value is None and s.passed is None


@pytest.mark.parametrize(
    "case, text, value, found",
    [
        # the correct spelling is never flagged, though "Lumora cloud" matches it case-insensitively
        (brand(forbidden_terms=("LumoraCloud",)), "Lumora Cloud backs up your files.", 0.0, {}),
        (brand(), "Try Lumora cloud today.", 1.0, {"Lumora cloud": 1}),
        (brand(), "Try LUMORA CLOUD today.", 0.0, {}),  # all caps: not the case-only variant
        # case-insensitive for variants that differ by more than case; counted per distinct variant
        (brand(forbidden_terms=("LumoraCloud",)), "lumoracloud and ＬｕｍｏｒａＣｌｏｕｄ, also L-Cloud.", 2.0, {"LumoraCloud": 2, "L-Cloud": 1}),
        (brand(), "Your back-up is in Lumora Analytics.", 2.0, {"Lumora Analytics": 1, "back-up": 1}),
        (brand(), "Automatic backups in Lumora Cloud.", 0.0, {}),
        # zh case uses the zh glossary entries only
        (brand(required=("露莫拉云",), lang="zh"), "欢迎使用鲁莫拉云和露莫拉雲。", 2.0, {"露莫拉雲": 1, "鲁莫拉云": 1}),
        (brand(required=("露莫拉云",), lang="zh"), "LumoraCloud 露莫拉云", 0.0, {}),
    ],
)
def test_forbidden(case, text, value, found):
    s = score(forbidden, case, text)
    assert s.value == value
    assert s.details["found"] == found
    assert s.passed is (value == 0.0)
    assert s.higher_is_better is False


def test_forbidden_part_of_preferred_term_is_not_flagged():
    case = brand(forbidden_terms=("Lumora",), glossary=None)
    assert score(forbidden, case, "Lumora Cloud is here.").value == 0.0
    assert score(forbidden, case, "Lumora is here.").value == 1.0


def test_forbidden_without_any_variant_is_none():
    assert score(forbidden, brand(glossary=None), "text").value is None


@pytest.mark.parametrize(
    "baseline, text, value, lost",
    [
        (None, "Lumora Cloud", None, None),
        ("Lumora Cloud and Lumora Insights with backups.", "Lumora Cloud with backups.", 1.0, ["Lumora Insights"]),
        ("Lumora Cloud and Lumora Insights with backups.", "LumoraCloud, no more.", 3.0, ["Lumora Cloud", "Lumora Insights", "backup"]),
        ("Lumora Cloud only.", "Lumora Cloud and Lumora Insights.", 0.0, []),  # gained terms are not drift
        ("Plain text.", "Plain text.", 0.0, []),
    ],
)
def test_dropped(baseline, text, value, lost):
    s = score(dropped, brand(), text, baseline)
    assert s.value == value
    assert s.higher_is_better is False
    if lost is not None:
        assert s.details["dropped"] == lost
        assert s.passed is (not lost)


def test_registered_for_brand_and_kb_qa():
    for name in ("terminology.retention", "terminology.forbidden", "terminology.dropped"):
        spec = SCORERS.get(name)
        assert spec.scenarios == ("brand", "kb_qa")
        assert spec.applies(brand()) and not spec.applies(brand(scenario="code", kind="explanation"))


def test_loaded_caseset(write):
    write("glossary.yaml", """
        kind: glossary
        schema_version: 1
        name: g
        terms:
          - {term: Lumora Cloud, lang: en, forbidden: [Lumora cloud]}
    """)
    write("schemas/card.json", '{"type": "object"}')
    path = write("cases.yaml", """
        schema_version: 1
        defaults: {scenario: brand, kind: structured, lang: en}
        glossary: glossary.yaml
        cases:
          - id: b1
            prompt: Write a card.
            expect: {schema: schemas/card.json, required_terms: [Lumora Cloud], forbidden_terms: [LumoraCloud]}
    """)
    (case,) = load_caseset(path).cases
    text = "```json\n{\"product\": \"Lumora cloud\"}\n```"
    assert score(retention, case, text).value == 1.0
    assert score(forbidden, case, text).details["found"] == {"Lumora cloud": 1}
