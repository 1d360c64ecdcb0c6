"""A flagged tool-use item's context: both calls side by side, key by key, with the called tool's
schema, and the case's tool expectations in the brief."""

from __future__ import annotations

import json
from pathlib import Path

from evalsuite.cases.caseset import all_cases, load_cases
from evalsuite.review.context import item_context

REPO = Path(__file__).resolve().parents[2]


def call(name, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _case(cid):
    return next(c for c in all_cases(load_cases([REPO / "casesets" / "tool_use"])) if c.id == cid)


def test_the_two_calls_side_by_side_with_the_tools_schema():
    case = _case("tool-s-002")
    ctx = item_context(case, call("get_weather", city="Chicago", unit="fahrenheit"), call("get_weather", city="Chicago", unit="kelvin", days=2), {}, {})
    (pair,) = ctx["tools"]["pairs"]
    assert pair["tool"] == "get_weather" and '"enum"' in pair["schema"]
    changes = {r["path"]: r["change"] for r in pair["arguments"]}
    assert changes == {"$.city": "same", "$.unit": "changed", "$.days": "added"}
    assert ctx["tools"]["expected"] == [{"name": "get_weather", "arguments": {"city": "Chicago", "unit": "fahrenheit"}, "match": "normalized"}]
    assert ctx["brief"]["expected"]["tool_calls"][0]["name"] == "get_weather"


def test_a_broken_or_missing_call_shows_as_such():
    case = _case("tool-p-001")
    broken = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris",}}</tool_call>'
    ctx = item_context(case, call("get_weather", city="Paris") + call("get_weather", city="Rome"), broken, {}, {})
    first, second = ctx["tools"]["pairs"]
    assert first["variant"]["error"].startswith("invalid JSON") and first["variant"]["raw"]
    assert {r["change"] for r in first["arguments"]} == {"unparsed"}
    assert second["variant"] is None and second["baseline"]["arguments"] == {"city": "Rome"}


def test_the_brief_shows_earlier_calls_and_forbidden_tools():
    ctx = item_context(_case("tool-r-006"), "No.", "No.", {}, {})
    texts = [m["text"] for m in ctx["brief"]["messages"]]
    assert texts[1].startswith("<tool_call>") and "lookup_customer" in texts[1] and texts[2].startswith('{"customer_id"')
    assert ctx["brief"]["expected"]["forbidden_tools"] == ["delete_customer_account"]
    assert "tools" in ctx and ctx["tools"]["pairs"] == []


def test_other_cases_carry_no_tool_context():
    case = next(c for c in all_cases(load_cases([REPO / "casesets" / "brand"])))
    assert "tools" not in item_context(case, "{}", "{}", {}, {})
