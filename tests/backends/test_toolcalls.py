"""Tool calls: the text template's parser, OpenAI `tool_calls` (whole and streamed), the record's
round trip through a stored Generation, and the Jinja template against evalsuite's own rendering."""

from __future__ import annotations

import json

import pytest

from evalsuite.backends.base import Generation
from evalsuite.backends.toolcalls import (
    TOOL_CHAT_TEMPLATE,
    StreamedCalls,
    ToolCall,
    parse_openai_calls,
    parse_text_calls,
    render_call,
    render_result,
    render_tools,
    text_without_calls,
)

TEXT = [
    ("one call", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', [("f", {"a": 1}, None)]),
    (
        "two calls and prose",
        'ok <tool_call>{"name": "f", "arguments": {}}</tool_call> and <tool_call>{"name": "g", "arguments": {"b": "x"}}</tool_call>',
        [("f", {}, None), ("g", {"b": "x"}, None)],
    ),
    ("fenced body", '<tool_call>\n```json\n{"name": "f", "arguments": {"a": 1}}\n```\n</tool_call>', [("f", {"a": 1}, None)]),
    ("arguments as a JSON string", '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', [("f", {"a": 1}, None)]),
    ("trailing comma", '<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>', [("f", None, "invalid JSON")]),
    ("unclosed block", '<tool_call>{"name": "f", "argum', [("f", None, "invalid JSON")]),
    ("no name", '<tool_call>{"arguments": {}}</tool_call>', [(None, None, "not a")]),
    ("arguments not an object", '<tool_call>{"name": "f", "arguments": [1]}</tool_call>', [("f", None, "arguments are not")]),
    ("no block", "The weather is fine.", []),
]


@pytest.mark.parametrize(("label", "text", "expected"), TEXT, ids=[t[0] for t in TEXT])
def test_text_calls_parse_or_say_why(label, text, expected):
    calls = parse_text_calls(text)
    got = [(c.name, c.arguments, c.error[: len(e)] if c.error else None) for c, (_, _, e) in zip(calls, expected)]
    assert got == expected and len(calls) == len(expected)
    assert all(c.raw for c in calls), "every call keeps its raw text"


def test_the_prose_without_the_calls():
    assert text_without_calls('Done. <tool_call>{"name": "f", "arguments": {}}</tool_call>') == "Done."


def test_openai_message_calls():
    msg = {
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"a": '}},
        ],
    }
    calls = parse_openai_calls(msg)
    assert calls[0] == ToolCall(id="c1", name="f", arguments={"a": 1}, raw='{"a": 1}')
    assert (calls[1].id, calls[1].name, calls[1].arguments, calls[1].raw) == ("c2", "g", None, '{"a": ')
    assert calls[1].error.startswith("invalid JSON")
    assert parse_openai_calls({"content": "hi"}) is None, "no tool_calls key: read the text"
    assert parse_openai_calls({"content": "hi", "tool_calls": []}) == ()


def test_streamed_fragments_accumulate_by_index():
    stream = StreamedCalls()
    deltas = [
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "get_weather", "arguments": '{"ci'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": 'ty": "Rome"}'}}]},
        {"content": "ignored"},
    ]
    assert stream.calls() is None
    for d in deltas:
        stream.add(d)
    calls = stream.calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {"city": "Rome"})]


def test_a_generation_carries_its_calls_and_old_records_still_load():
    calls = (ToolCall(id="c1", name="f", arguments={"a": 1}, raw='{"a": 1}'), ToolCall(name="g", arguments=None, raw="{", error="invalid JSON"))
    g = Generation(case_id="c", variant="v", sample=0, text="x", tool_calls=calls)
    back = Generation.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g and back.tool_calls[1].error == "invalid JSON"
    plain = Generation(case_id="c", variant="v", sample=0, text="x")
    assert "tool_calls" not in plain.to_dict(), "records without calls are written as before"
    old = {k: v for k, v in plain.to_dict().items()}
    assert Generation.from_dict(old).tool_calls is None
    assert Generation.from_dict({**old, "tool_calls": []}).tool_calls == ()


def test_render_then_parse_is_the_identity():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": "上海"}'}}
    (parsed,) = parse_text_calls(render_call(call))
    assert (parsed.name, parsed.arguments) == ("f", {"x": "上海"})
    assert render_result("42") == "<tool_response>\n42\n</tool_response>"


def test_tool_choice_adds_its_line():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert render_tools(tools).endswith("without a <tool_call> block.")
    assert render_tools(tools, tool_choice="none").endswith("Do not call any function for this request.")
    assert render_tools(tools, tool_choice={"type": "function", "function": {"name": "f"}}).endswith("You must call the function f.")
    assert "工具" in render_tools(tools, lang="zh")


def _chatml(turns):
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns) + "<|im_start|>assistant\n"


def test_the_jinja_template_renders_what_evalsuite_renders():
    """TOOL_CHAT_TEMPLATE (for apply_chat_template) and evalsuite's own text rendering through the
    embedded model's ChatML template give the same prompt."""
    jinja2 = pytest.importorskip("jinja2")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment()
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)  # as transformers' chat templates define it
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
    ]
    c1 = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    c2 = {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [c1, c2]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"t": 18}'},
        {"role": "tool", "tool_call_id": "c2", "content": '{"t": 25}'},
    ]
    rendered = env.from_string(TOOL_CHAT_TEMPLATE).render(messages=messages, tools=tools, add_generation_prompt=True)
    ours = [
        ("system", "Be brief.\n\n" + render_tools(tools)),
        ("user", "Paris and Rome?"),
        ("assistant", render_call(c1) + "\n" + render_call(c2)),
        ("user", render_result('{"t": 18}') + "\n" + render_result('{"t": 25}')),
    ]
    assert jinja2 is not None and rendered == _chatml(ours)
