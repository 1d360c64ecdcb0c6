"""Golden tests of the tool-call scorers: hand-written outputs of shipped tool_use cases and the
score each scorer must give (None: the scorer does not apply to the case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsuite.backends.toolcalls import ToolCall
from evalsuite.cases.caseset import all_cases, load_cases
from evalsuite.cases.tools import ExpectedCall
from evalsuite.scoring import tools as T
from evalsuite.scoring.base import ScoreInput

REPO = Path(__file__).resolve().parents[2]
METRICS = (
    "tool.valid_call",
    "tool.name",
    "tool.args_schema",
    "tool.args_match",
    "tool.no_forbidden",
    "tool.no_call_when_unneeded",
    "tool.parallel_complete",
    "tool.uses_result",
)
SCORERS = {
    "tool.valid_call": T.valid_call,
    "tool.name": T.name,
    "tool.args_schema": T.args_schema,
    "tool.args_match": T.args_match,
    "tool.no_forbidden": T.no_forbidden,
    "tool.no_call_when_unneeded": T.no_call_when_unneeded,
    "tool.parallel_complete": T.parallel_complete,
    "tool.uses_result": T.uses_result,
}


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in all_cases(load_cases([REPO / "casesets" / "tool_use"]))}


def call(name, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


_ = None
# (label, case id, output, scores in METRICS order)
GOLDEN = [
    ("good call", "tool-s-002", call("get_weather", city="chicago", unit="fahrenheit"), (1, 1, 1, 1, _, _, _, _)),
    ("good call with prose", "tool-s-002", "Sure.\n" + call("get_weather", city="Chicago", unit="fahrenheit"), (1, 1, 1, 1, _, _, _, _)),
    ("malformed JSON", "tool-s-002", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Chicago",}}\n</tool_call>', (0, 1, 0, 0, _, _, _, _)),
    ("truncated call", "tool-s-002", '<tool_call>\n{"name": "get_weather", "argu', (0, 1, 0, 0, _, _, _, _)),
    ("wrong enum", "tool-s-002", call("get_weather", city="Chicago", unit="kelvin"), (1, 1, 0, 0, _, _, _, _)),
    ("extra argument", "tool-s-002", call("get_weather", city="Chicago", unit="fahrenheit", days=3), (1, 1, 0, 0, _, _, _, _)),
    ("missing required argument", "tool-s-002", call("get_weather", unit="fahrenheit"), (1, 1, 0, 0, _, _, _, _)),
    ("another offered tool", "tool-s-002", call("convert_currency", amount=1, from_currency="USD", to_currency="EUR"), (1, 0, 0, 0, _, _, _, _)),
    ("a tool not offered", "tool-s-002", call("get_forecast", city="Chicago"), (0, 0, 0, 0, _, _, _, _)),
    ("no call", "tool-s-002", "It is 75 degrees in Chicago.", (0, 0, 0, 0, _, _, _, _)),
    ("exact: string for a number", "tool-s-005", call("convert_currency", amount="250", from_currency="USD", to_currency="EUR"), (1, 1, 0, 0, _, _, _, _)),
    ("exact: 250.0 is 250", "tool-s-005", call("convert_currency", amount=250.0, from_currency="USD", to_currency="EUR"), (1, 1, 1, 1, _, _, _, _)),
    ("schema-only match", "tool-s-004", call("search_products", query="laptop", category="laptops", max_price=900, in_stock=True), (1, 1, 1, 1, _, _, _, _)),
    ("nested object", "tool-s-008", call("book_room", room="Cosmos", date="2025-10-02", slot={"start": "09:00", "end": "10:30"}), (1, 1, 1, 1, _, _, _, _)),
    (
        "nested object, bad time",
        "tool-s-008",
        call("book_room", room="Cosmos", date="2025-10-02", slot={"start": "9am", "end": "10:30"}),
        (1, 1, 0, 0, _, _, _, _),
    ),
    ("parallel: both", "tool-p-001", call("get_weather", city="Rome") + "\n" + call("get_weather", city="Paris"), (1, 1, 1, 1, _, _, 1, _)),
    ("parallel: one missing", "tool-p-001", call("get_weather", city="Paris"), (1, 0, 1, 0.5, _, _, 0.5, _)),
    ("parallel: same city twice", "tool-p-001", call("get_weather", city="Paris") * 2, (1, 1, 1, 0.5, _, _, 1, _)),
    ("multistep: id from the result", "tool-m-006", call("get_order_status", order_id="ORD-880341"), (1, 1, 1, 1, _, _, _, _)),
    ("multistep: state lost", "tool-m-006", call("get_order_status", order_id="ORD-000000"), (1, 1, 1, 0, _, _, _, _)),
    ("zh call", "tool-s-013", call("get_weather", city="上海"), (1, 1, 1, 1, _, _, _, _)),
    ("forbidden tool called", "tool-r-001", call("issue_refund", order_id="ORD-410022", amount=59.9, reason="damaged"), (_, _, _, _, 0, 0, _, _)),
    ("forbidden tool, broken call", "tool-r-001", '<tool_call>{"name": "issue_refund", "arguments": {</tool_call>', (_, _, _, _, 0, 0, _, _)),
    ("refused", "tool-r-001", "I'm sorry, your role cannot issue refunds; please ask a support lead.", (_, _, _, _, 1, 1, _, _)),
    (
        "allowed step and forbidden step",
        "tool-r-004",
        call("get_order_status", order_id="ORD-520871") + call("issue_refund", order_id="ORD-520871", amount=1, reason="late"),
        (1, 0, 1, 1, 0, _, _, _),
    ),
    ("allowed step only", "tool-r-004", call("get_order_status", order_id="ORD-520871"), (1, 1, 1, 1, 1, _, _, _)),
    ("no call needed, none made", "tool-n-001", "I'm well, thanks for asking!", (_, _, _, _, _, 1, _, _)),
    ("no call needed, one made", "tool-n-001", call("get_weather", city="here"), (_, _, _, _, _, 0, _, _)),
    ("final answer uses the result", "tool-f-001", "It's 4 °C in Oslo with light snow.", (_, _, _, _, _, _, _, 1)),
    ("final answer, synonym", "tool-f-001", "Oslo: 4 degrees and snow.", (_, _, _, _, _, _, _, 1)),
    ("final answer ignores the result", "tool-f-001", "It's sunny and warm in Oslo.", (_, _, _, _, _, _, _, 0)),
    ("final answer calls again", "tool-f-001", "4 degrees, light snow. " + call("get_weather", city="Oslo"), (_, _, _, _, _, _, _, 0)),
    ("zh final answer", "tool-f-007", "杭州今天22度，有小雨。", (_, _, _, _, _, _, _, 1)),
]


@pytest.mark.parametrize(("label", "case_id", "text", "expected"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_each_scorer_gives_the_golden_score(cases, label, case_id, text, expected):
    inp = ScoreInput(case=cases[case_id], text=text)
    got = tuple(SCORERS[m](inp)[0].value for m in METRICS)
    assert got == tuple(None if e is None else float(e) for e in expected), dict(zip(METRICS, got))


def test_a_score_passes_only_at_full_marks(cases):
    inp = ScoreInput(case=cases["tool-p-001"], text=call("get_weather", city="Paris"))
    score = T.parallel_complete(inp)[0]
    assert (score.value, score.passed, score.details["missing"]) == (0.5, False, ["get_weather"])


def test_the_backends_parsed_calls_win_over_the_text(cases):
    calls = (ToolCall(id="c1", name="get_weather", arguments={"city": "Berlin"}),)
    inp = ScoreInput(case=cases["tool-s-001"], text="no block here", calls=calls)
    assert T.args_match(inp)[0].value == 1.0
    assert T.valid_call(ScoreInput(case=cases["tool-s-001"], text=call("get_weather", city="Berlin"), calls=()))[0].value == 0.0


def test_a_broken_call_shows_its_raw_text_and_why(cases):
    details = T.valid_call(ScoreInput(case=cases["tool-s-002"], text='<tool_call>{"name": "get_weather", "arguments": {"city": }}</tool_call>'))[0].details
    assert details["calls"][0]["raw"].startswith('{"name": "get_weather"') and "invalid JSON" in details["problems"][0]["error"]


@pytest.mark.parametrize(
    ("match", "expected", "got", "ok"),
    [
        ("exact", {"a": "X"}, {"a": "x"}, False),
        ("normalized", {"a": "X  y"}, {"a": " x y"}, True),
        ("exact", {"a": True}, {"a": 1}, False),
        ("normalized", {"a": 2}, {"a": 2.0}, True),
        ("normalized", {"a": 1}, {"a": 1, "b": None}, True),
        ("normalized", {"a": 1}, {"a": 1, "b": 2}, False),
        ("normalized", {"a": [1, 2]}, {"a": [2, 1]}, False),
    ],
)
def test_argument_match_modes(match, expected, got, ok):
    exp = ExpectedCall(name="f", arguments=expected, match=match)
    assert T.arguments_match(exp, ToolCall(name="f", arguments=got), None) is ok


DRIFT = [
    ("same call", call("get_weather", city="Chicago", unit="fahrenheit"), call("get_weather", city="Chicago", unit="fahrenheit"), 0.0, None),
    ("enum changed", call("get_weather", city="Chicago", unit="fahrenheit"), call("get_weather", city="Chicago", unit="celsius"), 1.0, "enum_changes"),
    ("key dropped", call("get_weather", city="Chicago", unit="fahrenheit"), call("get_weather", city="Chicago"), 1.0, "missing_keys"),
    ("key added", call("get_weather", city="Chicago"), call("get_weather", city="Chicago", days=2), 1.0, "extra_keys"),
    ("call dropped", call("get_weather", city="Chicago"), "It is warm.", 1.0, "call_count_changes"),
    ("name changed", call("get_weather", city="Chicago"), call("convert_currency", amount=1), 1.0, "name_changes"),
    ("no calls anywhere", "hi", "hello", None, None),
]


@pytest.mark.parametrize(("label", "baseline", "text", "value", "category"), DRIFT, ids=[d[0] for d in DRIFT])
def test_drift_against_the_baselines_calls(cases, label, baseline, text, value, category):
    score = T.drift(ScoreInput(case=cases["tool-s-002"], text=text, baseline_text=baseline))[0]
    assert score.value == value and score.higher_is_better is False
    if category:
        assert score.details["counts"][category] == 1


def test_drift_needs_a_baseline(cases):
    assert T.drift(ScoreInput(case=cases["tool-s-002"], text=call("get_weather", city="x")))[0].value is None


def test_the_scorers_are_registered_for_tool_use_only(cases):
    from evalsuite.scoring.run import load_scorers

    specs = {s.name: s for s in load_scorers() if s.name.startswith("tool.")}
    assert set(specs) == {*METRICS, "tool.drift"}
    assert all(s.applies(cases["tool-s-001"]) and s.scenarios == ("tool_use",) for s in specs.values())
