"""Tool-use cases at load: tools from a tools file or inline, earlier calls and results, expected
calls checked against the tools' schemas, every problem located (file, line, case, field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite.cases.caseset import all_cases, load_cases, load_caseset
from evalsuite.errors import ValidationError
from evalsuite.run.prompting import offered_tools, render_messages

REPO = Path(__file__).resolve().parents[2]

HEAD = """schema_version: 1
defaults: {scenario: tool_use, lang: en}
tools:
  - type: function
    function:
      name: get_weather
      parameters: {type: object, properties: {city: {type: string}, unit: {enum: [c, f]}}, required: [city], additionalProperties: false}
  - type: function
    roles: [finance]
    function: {name: refund, parameters: {type: object, properties: {order: {type: string}}, required: [order]}}
cases:
"""

BAD = [
    (
        "unknown expected tool",
        "  - {id: x, kind: single, prompt: p, expect: {tool_calls: [{name: get_wether}]}}\n",
        "expect.tool_calls[0].name",
        "did you mean 'get_weather'",
    ),
    (
        "arguments off schema",
        "  - {id: x, kind: single, prompt: p, expect: {tool_calls: [{name: get_weather, arguments: {city: B, unit: k}}]}}\n",
        "expect.tool_calls[0].arguments",
        "at unit: 'k' is not one of",
    ),
    ("unknown offered tool", "  - {id: x, kind: no_call, tools: [wether], prompt: p, expect: {no_tool_call: true}}\n", "tools[0]", "unknown tool 'wether'"),
    ("single without a call", "  - {id: x, kind: single, prompt: p}\n", "expect.tool_calls", "exactly one call"),
    (
        "parallel with one call",
        "  - {id: x, kind: parallel, prompt: p, expect: {tool_calls: [{name: get_weather}]}}\n",
        "expect.tool_calls",
        "two or more calls",
    ),
    (
        "parallel flag with one call",
        "  - {id: x, kind: single, prompt: p, expect: {parallel: true, tool_calls: [{name: get_weather}]}}\n",
        "expect.parallel",
        "at least two",
    ),
    (
        "no call and calls",
        "  - {id: x, kind: no_call, prompt: p, expect: {no_tool_call: true, tool_calls: [{name: get_weather}]}}\n",
        "expect.no_tool_call",
        "cannot expect",
    ),
    (
        "expected and forbidden",
        "  - {id: x, kind: restricted, user_role: intern, prompt: p, expect: {tool_calls: [{name: refund}]}}\n",
        "expect.tool_calls[0].name",
        "expected and forbidden",
    ),
    (
        "restricted without a forbidden tool",
        "  - {id: x, kind: restricted, user_role: finance, prompt: p, expect: {no_tool_call: true}}\n",
        "expect.forbidden_tools",
        "names a forbidden tool",
    ),
    ("bad kind", "  - {id: x, kind: chained, prompt: p}\n", "kind", "one of: single, parallel"),
    (
        "tools on another scenario",
        "  - {id: x, scenario: brand, kind: structured, prompt: p, tools: [get_weather], expect: {schema: s.json}}\n",
        "tools",
        "belong to the tool_use scenario",
    ),
    (
        "result answering no call",
        "  - id: x\n    kind: final_answer\n    messages:\n      - {role: user, content: hi}\n      - {role: tool, tool_call_id: nope, content: r}\n    expect: {uses_result: [r]}\n",
        "messages[1].tool_call_id",
        "answers no earlier call",
    ),
    (
        "earlier call off schema",
        "  - id: x\n    kind: multistep\n    messages:\n      - {role: user, content: hi}\n      - role: assistant\n        tool_calls: [{id: c1, function: {name: get_weather, arguments: '{\"town\": 1}'}}]\n"
        "      - {role: tool, tool_call_id: c1, content: r}\n    expect: {tool_calls: [{name: get_weather}]}\n",
        "messages[1].tool_calls[0].function.arguments",
        "do not fit get_weather's parameters",
    ),
    (
        "tool message without its call id",
        "  - id: x\n    kind: final_answer\n    messages:\n      - {role: user, content: hi}\n      - {role: tool, content: r}\n",
        "messages.1",
        "'tool_call_id' is a required property",
    ),
    (
        "library tool with a bad schema",
        "  - {id: x, kind: no_call, prompt: p, tools: [{type: function, function: {name: t, parameters: {type: objekt}}}], expect: {no_tool_call: true}}\n",
        "tools[0].function.parameters",
        "not a valid JSON Schema",
    ),
]


@pytest.mark.parametrize(("label", "case", "field", "message"), BAD, ids=[b[0] for b in BAD])
def test_each_problem_names_its_file_line_case_and_field(tmp_path, label, case, field, message):
    f = tmp_path / "t.yaml"
    f.write_text(HEAD + case, encoding="utf-8")
    with pytest.raises(ValidationError) as err:
        load_caseset(f)
    found = [p for p in err.value.problems if p.field == field]
    assert found, [(p.field, p.message) for p in err.value.problems]
    p = found[0]
    assert message in p.message and p.file == str(f) and p.line is not None and p.line > HEAD.count("\n")
    assert p.case_id == "x" or field == "tools[0].function.parameters"


def test_a_role_that_may_not_use_a_tool_forbids_it(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text(HEAD + "  - {id: x, kind: restricted, user_role: intern, prompt: refund 1, expect: {no_tool_call: true}}\n", encoding="utf-8")
    (case,) = load_caseset(f).cases
    assert case.tool_use.expect.forbidden == ("refund",)
    (_, refund) = offered_tools(case)
    assert refund["function"]["description"] == "(Only for roles: finance.)" and "roles" not in refund


def test_the_shipped_set_counts_every_kind_and_a_chinese_share():
    cases = all_cases(load_cases([REPO / "casesets" / "tool_use"]))
    kinds = {k: sum(c.kind == k for c in cases) for k in ("single", "parallel", "no_call", "multistep", "restricted", "final_answer")}
    assert all(kinds.values()) and 55 <= len(cases) <= 70, kinds
    assert 0.15 <= sum(c.lang == "zh" for c in cases) / len(cases) <= 0.35
    assert sum("easy" in c.tags for c in cases) >= 10


def test_a_multistep_case_renders_its_calls_and_results_as_text():
    cases = {c.id: c for c in all_cases(load_cases([REPO / "casesets" / "tool_use"]))}
    msgs = render_messages(cases["tool-m-006"])
    assert [r for r, _ in msgs] == ["system", "user", "assistant", "user"]
    assert "<tools>" in msgs[0][1] and '"name": "lookup_customer"' in msgs[0][1]
    assert msgs[2][1] == '<tool_call>\n{"name": "lookup_customer", "arguments": {"email": "jon.park@example.com"}}\n</tool_call>'
    assert msgs[3][1].startswith("<tool_response>\n") and "ORD-880341" in msgs[3][1]
    parallel = render_messages(cases["tool-f-006"])
    assert parallel[3][1].count("<tool_response>") == 2 and parallel[2][1].count("<tool_call>") == 2
