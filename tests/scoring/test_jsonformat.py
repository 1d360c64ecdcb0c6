"""json.*: extraction from messy outputs, schema validity, drift from the baseline's JSON."""

import pytest

from evalsuite.cases.caseset import Case, Expect
from evalsuite.scoring.base import ScoreInput
from evalsuite.scoring.jsonformat import drift, extract_json, json_drift, parsed, schema_errors, valid

CARD = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["product", "tagline", "features"],
    "additionalProperties": False,
    "properties": {
        "product": {"type": "string"},
        "tagline": {"type": "string", "maxLength": 40},
        "features": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 5},
        "tone": {"enum": ["friendly", "formal"]},
        "kind": {"const": "product_card"},
        "meta": {"$ref": "#/$defs/meta"},
    },
    "$defs": {"meta": {"type": "object", "properties": {"channel": {"anyOf": [{"enum": ["web", "email"]}, {"type": "null"}]}}}},
}


def case(schema=CARD):
    return Case(id="b", scenario="brand", kind="structured", prompt="card", expect=Expect(schema="card.json"), json_schema=schema)


def score(fn, text, baseline=None, c=None):
    (s,) = fn(ScoreInput(c or case(), text, baseline_text=baseline))
    return s


GOOD = '{"product": "Lumora Cloud", "tagline": "Your files, safe.", "features": ["Backups", "Sharing"]}'


@pytest.mark.parametrize(
    "text, ok, how, value",
    [
        (GOOD, True, "raw", {"product": "Lumora Cloud", "tagline": "Your files, safe.", "features": ["Backups", "Sharing"]}),
        ("\n  [1, 2]  \n", True, "raw", [1, 2]),
        ('Here you go:\n```json\n{"a": 1}\n```\nLet me know if you want changes [1].', True, "fence", {"a": 1}),
        ('```\n{"a": [1, 2]}\n```', True, "fence", {"a": [1, 2]}),
        ('```JSON {"a": 1}```', True, "fence", {"a": 1}),  # everything on one line
        ('```json\n{"a": 1}', True, "fence", {"a": 1}),  # truncated: no closing fence
        ('```python\nprint(1)\n```\n```json\n{"b": 2}\n```', True, "fence", {"b": 2}),  # second block is the JSON
        ('Sure! Option [2] is best: {"a": {"b": [1]}} -- enjoy {"c": 1}', True, "prose", {"a": {"b": [1]}}),  # longest value wins
        ('The card is {"a": 1,} ... oops', False, None, None),  # trailing comma: not JSON
        ("", False, None, None),
        ("I cannot write JSON today.", False, None, None),
    ],
)
def test_extract_json(text, ok, how, value):
    ex = extract_json(text)
    assert (ex.ok, ex.how, ex.value) == (ok, how, value)


@pytest.mark.parametrize(
    "text, value, how",
    [
        (GOOD, 1.0, "raw"),
        ("Sure, here it is:\n```json\n" + GOOD + "\n```\nHope this helps!", 1.0, "fence"),
        ("Here: " + GOOD + " (all on brand)", 1.0, "prose"),
        ('{"product": "Lumora Cloud", "tagline": "x"', 0.0, None),  # cut off by max_tokens
    ],
)
def test_parsed(text, value, how):
    s = score(parsed, text)
    assert s.value == value and s.passed is (value == 1.0)
    assert s.details["how"] == how
    if value == 0.0:
        assert "error" in s.details


@pytest.mark.parametrize(
    "text, value, paths",
    [
        (GOOD, 1.0, []),
        ("```json\n" + GOOD + "\n```\nTrailing words.", 1.0, []),
        ('{"product": "Lumora Cloud", "tagline": "Your files, safe.", "features": ["Backups", "Sharing", 3]}', 0.0, ["features/2"]),
        ('{"product": "Lumora Cloud", "features": ["only one"], "price": 5}', 0.0, ["features", "price", "tagline"]),
        ('{"product": "P", "tagline": "' + "x" * 41 + '", "features": ["a", "b"], "tone": "loud"}', 0.0, ["tagline", "tone"]),
        ("[]", 0.0, ["(root)"]),
    ],
)
def test_valid(text, value, paths):
    s = score(valid, text)
    assert s.value == value and s.passed is (value == 1.0)
    assert s.details["paths"] == paths


def test_valid_details_name_each_error():
    s = score(valid, '{"product": "Lumora Cloud", "features": ["only one"], "price": 5}')
    assert sorted(e["validator"] for e in s.details["errors"]) == ["additionalProperties", "minItems", "required"]


@pytest.mark.parametrize(
    "text, error",
    [
        # prose, then an object with a trailing comma: the object's error, inside the object, not the
        # error of parsing the whole text ("Expecting value (line 1, column 1)")
        (
            'Here is the card:\n{"product": "Lumora Cloud",\n "tagline": "Safe.",\n}',
            "Expecting property name enclosed in double quotes (line 3, column 1 of the JSON object starting at line 2, column 1 of the output)"
            ": a trailing comma before '}'",
        ),
        ('Sure! {"a": 1, "b": 2,} done', "(line 1, column 17 of the JSON object starting at line 1, column 7 of the output): a trailing comma before '}'"),
        ('Sure! [1, 2,]', "Expecting value (line 1, column 7 of the JSON array starting at line 1, column 7 of the output): a trailing comma before ']'"),
        # the candidate that parsed furthest wins over an earlier stray brace
        ('Use {x} here: {"product": "P", "tagline": 7 "features": 1}', "Expecting ',' delimiter (line 1, column 31 of the JSON object starting at line 1, column 15"),
        ('{"product": "Lumora Cloud", "tagline": "x"', "Expecting ',' delimiter (line 1, column 43 of the JSON object starting at line 1, column 1 of the output)"),
        ("no json at all", "Expecting value (line 1, column 1)"),
        ("   ", "empty output"),
    ],
)
def test_unparsed_json_error_points_into_the_best_candidate(text, error):
    ex = extract_json(text)
    assert not ex.ok and error in ex.error, ex.error
    assert score(parsed, text).details["error"] == ex.error


def test_valid_unparsed_and_no_schema():
    s = score(valid, "no json")
    assert s.value == 0.0 and s.passed is False and s.details["error"].startswith("no JSON found")
    assert score(valid, GOOD, c=case(schema=None)).value is None


BASE = {
    "product": "Lumora Cloud",
    "tagline": "Safe files.",
    "features": ["a", "b", "c"],
    "tone": "friendly",
    "kind": "product_card",
    "meta": {"channel": "web"},
}


@pytest.mark.parametrize(
    "variant, counts",
    [
        (dict(BASE), {}),
        # free-text changes are not drift
        (dict(BASE, tagline="Files, safely.", features=["x", "y", "z"]), {}),
        (dict(BASE, features=["a", "b"]), {"array_length_changes": 1}),
        ({k: v for k, v in BASE.items() if k != "tone"} | {"extra": 1}, {"missing_keys": 1, "extra_keys": 1}),
        (dict(BASE, tone="formal", kind="card"), {"enum_changes": 1, "const_changes": 1}),
        (dict(BASE, meta={"channel": "email"}), {"enum_changes": 1}),  # enum behind $ref and anyOf
        (dict(BASE, meta={"channel": None}), {"type_changes": 1}),
        (dict(BASE, features="a, b, c", product=None), {"type_changes": 2}),
    ],
)
def test_json_drift(variant, counts):
    diffs = json_drift(BASE, variant, CARD)
    assert {k: len(v) for k, v in diffs.items() if v} == counts


def test_json_drift_paths():
    diffs = json_drift({"a": [{"x": 1}, {"x": 2}]}, {"a": [{"x": 1}, {"x": "2", "y": 0}]})
    assert diffs["type_changes"] == [{"path": "a/1/x", "baseline": "number", "variant": "string"}]
    assert diffs["extra_keys"] == ["a/1/y"]
    # without a schema, value changes are never drift; int vs float is the same JSON type
    assert sum(map(len, json_drift({"n": 1, "s": "a"}, {"n": 1.5, "s": "b"}).values())) == 0


@pytest.mark.parametrize(
    "baseline, text, value, reason",
    [
        (None, GOOD, None, "no baseline output"),
        ("I refuse to answer.", GOOD, None, "baseline output did not parse"),
        (GOOD, "nope", None, "output did not parse"),
        (GOOD, "```json\n" + GOOD + "\n```", 0.0, None),
        (GOOD, '{"product": "Lumora Cloud", "tagline": 7, "features": ["Backups"], "price": 1}', 3.0, None),
    ],
)
def test_drift_scorer(baseline, text, value, reason):
    s = score(drift, text, baseline)
    assert s.value == value
    assert s.higher_is_better is False
    if reason:
        assert s.details["reason"] == reason


def test_drift_scorer_details():
    s = score(drift, "```json\n" + '{"product": "Lumora Cloud", "tagline": 7, "features": ["Backups"], "price": 1}' + "\n```", GOOD)
    assert s.details["counts"] == {"missing_keys": 0, "extra_keys": 1, "type_changes": 1, "enum_changes": 0, "const_changes": 0, "array_length_changes": 1}
    assert s.details["extra_keys"] == ["price"]
    assert s.details["how"] == {"baseline": "raw", "variant": "fence"}


ORDER = {
    "type": "object",
    "required": ["id", "items"],
    "additionalProperties": False,
    "patternProperties": {"^x-": {}},
    "properties": {
        "id": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku", "price"], "properties": {"sku": {}, "price": {}}}},
    },
}


# Issue 16: `required` errors point at the missing property, `additionalProperties` at the extra key;
# jsonschema's message is kept. (value, [(path, validator, message)])
LOCATED = [
    ({"items": []}, [("id", "required", "'id' is a required property")]),
    ({"id": "a", "items": [{"sku": "s"}]}, [("items/0/price", "required", "'price' is a required property")]),
    ({"items": [{}, {"sku": 1, "price": 2}]}, [
        ("id", "required", "'id' is a required property"),
        ("items/0/price", "required", "'price' is a required property"),
        ("items/0/sku", "required", "'sku' is a required property"),
    ]),
    ({"id": "a", "items": [], "note": 1, "x-ok": 2, "extra": 3}, [
        ("extra", "additionalProperties", "'extra', 'note' do not match any of the regexes: '^x-'"),
        ("note", "additionalProperties", "'extra', 'note' do not match any of the regexes: '^x-'"),
    ]),
    ([], [("(root)", "type", "[] is not of type 'object'")]),
]


@pytest.mark.parametrize("value, want", LOCATED)
def test_schema_errors_name_the_field(value, want):
    got = schema_errors(value, ORDER)
    assert [(e["path"], e["validator"], e["message"]) for e in got] == want
    assert all(e["property"] == e["path"].rsplit("/", 1)[-1] for e in got if e["validator"] != "type")


def test_valid_paths_name_missing_and_extra_fields():
    c = case(CARD)
    s = score(valid, '{"product": "P", "features": ["a", "b"], "price": 5}', c=c)
    assert s.details["paths"] == ["price", "tagline"]
    assert {e["path"]: e["message"] for e in s.details["errors"]} == {
        "price": "Additional properties are not allowed ('price' was unexpected)",
        "tagline": "'tagline' is a required property",
    }
