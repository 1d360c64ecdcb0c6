"""Tool-use cases: the tools a case offers, the conversation's earlier calls and results, and the
calls it expects; checked at load against each other (names, ids, argument schemas).

A case-set file may hold a `tools:` library (OpenAI tool definitions, each optionally with `roles`:
the user roles allowed to use it). A case names its tools from there (`tools: [get_weather]`), or
writes them inline, or leaves `tools` out to offer the whole library. Its expectations sit under
`expect:` beside the others:

- `tool_calls`: the calls expected, each a `name`, the `arguments` and how they are compared
  (`match`: `exact`, `normalized` (default) or `schema`: the arguments only validate);
- `forbidden_tools`: tools that must not be called (with the tools the case's `user_role` may not use);
- `no_tool_call`: the answer needs no call;
- `parallel`: the expected calls all come in this one turn (default: when more than one is expected);
- `uses_result`: terms of an earlier tool result the final answer must carry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import suggest
from ..schemalib import jsonschema as _jsonschema
from .valid_memo import once_valid

__all__ = ["MATCH_MODES", "TOOL_KINDS", "ExpectedCall", "Tool", "ToolExpect", "ToolUse", "build_tool_use", "library_tools"]

TOOL_KINDS = ("single", "parallel", "no_call", "multistep", "restricted", "final_answer")
MATCH_MODES = ("exact", "normalized", "schema")
Match = Literal["exact", "normalized", "schema"]
#: a problem reporter: (path below the case, field name, message)
Report = Callable[[tuple, str, str], None]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One tool a case offers: an OpenAI function definition, and who may use it."""

    name: str
    description: str = ""
    parameters: dict  #: the JSON Schema of the arguments
    roles: tuple[str, ...] = ()  #: user roles allowed to call it; empty: everyone

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Tool:
        fn = raw["function"]
        return cls(
            name=fn["name"],
            description=fn.get("description", ""),
            parameters=dict(fn.get("parameters") or {"type": "object"}),
            roles=tuple(raw.get("roles", ())),
        )

    def to_openai(self) -> dict:
        """The definition as an OpenAI `tools` item (without evalsuite's `roles`)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def usable_by(self, role: str | None) -> bool:
        return not self.roles or (role is not None and role in self.roles)


@dataclass(frozen=True, kw_only=True)
class ExpectedCall:
    """A call the case expects."""

    name: str
    arguments: dict | None = None  #: None: any arguments that validate
    match: Match = "normalized"


@dataclass(frozen=True, kw_only=True)
class ToolExpect:
    """What a good answer of a tool-use case does with its tools."""

    calls: tuple[ExpectedCall, ...] = ()
    forbidden: tuple[str, ...] = ()  #: written `forbidden_tools` and the tools the user's role may not use
    no_call: bool = False
    parallel: bool = False
    uses_result: tuple[tuple[str, ...], ...] = ()  #: each: a term of a tool result and its accepted synonyms


@dataclass(frozen=True, kw_only=True)
class ToolUse:
    """A case's tools, its tool choice, its conversation in OpenAI form and its tool expectations."""

    tools: tuple[Tool, ...]
    tool_choice: str | dict | None = None
    messages: tuple[dict, ...] = ()  #: OpenAI-format messages (with `tool_calls` and `tool` turns); empty for a `prompt` case
    expect: ToolExpect = ToolExpect()

    def tool(self, name: str | None) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)


def library_tools(items: Sequence[Mapping[str, Any]], report: Report) -> dict[str, Tool]:
    """A case-set file's `tools:` library by name; a parameters block that is no JSON Schema, or a
    name used twice, is a problem."""
    out: dict[str, Tool] = {}
    for i, raw in enumerate(items):
        tool = Tool.parse(raw)
        if tool.name in out:
            report(("tools", i), f"tools[{i}]", f"tool {tool.name!r} is defined twice")
        _check_parameters(tool, ("tools", i, "function", "parameters"), f"tools[{i}].function.parameters", report)
        out[tool.name] = tool
    return out


#: a tools library's parameters schemas checked so far in this process (canonical JSON -> the
#: metaschema's complaint, None when valid): every case-set file of a directory repeats the library
_CHECKED: dict[str, str | None] = {}


def _check_parameters(tool: Tool, path: tuple, label: str, report: Report) -> None:
    message = json_schema_problem(tool.parameters)
    if message is not None:
        report(path, label, f"not a valid JSON Schema: {message}")


def json_schema_problem(schema: object) -> str | None:
    """Why `schema` is not a valid JSON Schema (its meta-schema's complaint), None when it is: checked
    once per process, and once per content across processes (evalsuite.cases.valid_memo)."""
    key = json.dumps(schema, sort_keys=True, default=repr)
    if key not in _CHECKED:
        found = once_valid("jsonschema", schema, lambda: _meta_problems(schema))
        _CHECKED[key] = found[0] if found else None
    return _CHECKED[key]


def _meta_problems(schema: object) -> list[str]:
    if not isinstance(schema, dict):
        return [f"expected a JSON object, got {type(schema).__name__}"]
    js = _jsonschema()
    try:
        js.validators.validator_for(schema).check_schema(schema)
    except js.SchemaError as exc:
        return [exc.message]
    return []


def _resolve_tools(raw: Mapping[str, Any], library: Mapping[str, Tool], report: Report) -> tuple[Tool, ...]:
    items = raw.get("tools")
    if items is None:
        return tuple(library.values())
    tools: list[Tool] = []
    for j, item in enumerate(items):
        if isinstance(item, str):
            if item in library:
                tools.append(library[item])
            else:
                report(("tools", j), f"tools[{j}]", f"unknown tool {item!r}{suggest(item, library)}")
            continue
        tool = Tool.parse(item)
        _check_parameters(tool, ("tools", j, "function", "parameters"), f"tools[{j}].function.parameters", report)
        tools.append(tool)
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        report(("tools",), "tools", "a tool is offered twice")
    return tuple(tools)


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _check_arguments(tool: Tool | None, args: Any, path: tuple, label: str, report: Report) -> None:
    """Arguments a case writes (an earlier call's, or an expected call's) must fit their tool."""
    if tool is None:
        return
    if not isinstance(args, dict):
        report(path, label, "arguments must be a JSON object")
        return
    found = once_valid("tool-arguments", [tool.parameters, args], lambda: _argument_problems(tool, args))
    if found:
        report(path, label, found[0])


def _argument_problems(tool: Tool, args: dict) -> list[str]:
    js = _jsonschema()
    errors = sorted(js.validators.validator_for(tool.parameters)(tool.parameters).iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return []
    where = "/".join(map(str, errors[0].absolute_path)) or "(root)"
    return [f"do not fit {tool.name}'s parameters at {where}: {errors[0].message}"]


def _named(tools: Sequence[Tool], name: str, path: tuple, label: str, report: Report) -> Tool | None:
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        report(path, label, f"{name!r} is not one of the case's tools{suggest(name, [t.name for t in tools])}")
    return tool


def _check_messages(messages: Sequence[Mapping[str, Any]], tools: Sequence[Tool], report: Report) -> None:
    """Earlier calls name offered tools with fitting arguments; each result answers an earlier call."""
    call_ids: set[str] = set()
    for i, m in enumerate(messages):
        at = ("messages", i)
        if m["role"] == "assistant" and not m.get("content") and not m.get("tool_calls"):
            report(at, f"messages[{i}]", "an assistant message needs `content` or `tool_calls`")
        for j, call in enumerate(m.get("tool_calls") or ()):
            if call["id"] in call_ids:
                report(at + ("tool_calls", j, "id"), f"messages[{i}].tool_calls[{j}].id", f"call id {call['id']!r} is used twice")
            call_ids.add(call["id"])
            fn = call["function"]
            tool = _named(tools, fn["name"], at + ("tool_calls", j, "function", "name"), f"messages[{i}].tool_calls[{j}].function.name", report)
            path = at + ("tool_calls", j, "function", "arguments")
            _check_arguments(tool, _arguments(fn.get("arguments", {})), path, f"messages[{i}].tool_calls[{j}].function.arguments", report)
        if m["role"] == "tool" and m["tool_call_id"] not in call_ids:
            report(at + ("tool_call_id",), f"messages[{i}].tool_call_id", f"{m['tool_call_id']!r} answers no earlier call")


def _parse_expect(raw: Mapping[str, Any], tools: Sequence[Tool], role: str | None) -> ToolExpect:
    calls = tuple(
        ExpectedCall(name=c["name"], arguments=c.get("arguments"), match=c.get("match", "normalized" if "arguments" in c else "schema"))
        for c in raw.get("tool_calls", ())
    )
    by_role = [t.name for t in tools if not t.usable_by(role)]
    terms = tuple((t,) if isinstance(t, str) else (t["term"], *t.get("synonyms", ())) for t in raw.get("uses_result", ()))
    return ToolExpect(
        calls=calls,
        forbidden=tuple(dict.fromkeys([*raw.get("forbidden_tools", ()), *by_role])),
        no_call=bool(raw.get("no_tool_call", False)),
        parallel=bool(raw.get("parallel", len(calls) > 1)),
        uses_result=terms,
    )


def _check_expect(expect: ToolExpect, raw: Mapping[str, Any], tools: Sequence[Tool], report: Report) -> None:
    for j, call in enumerate(expect.calls):
        at = ("expect", "tool_calls", j)
        tool = _named(tools, call.name, at + ("name",), f"expect.tool_calls[{j}].name", report)
        if call.arguments is not None:
            _check_arguments(tool, call.arguments, at + ("arguments",), f"expect.tool_calls[{j}].arguments", report)
        if call.name in expect.forbidden:
            report(at + ("name",), f"expect.tool_calls[{j}].name", f"{call.name!r} is expected and forbidden")
    for j, name in enumerate(raw.get("forbidden_tools", ())):
        _named(tools, name, ("expect", "forbidden_tools", j), f"expect.forbidden_tools[{j}]", report)
    if expect.no_call and expect.calls:
        report(("expect",), "expect.no_tool_call", "a case expecting no call cannot expect `tool_calls`")
    if expect.parallel and len(expect.calls) < 2:
        report(("expect",), "expect.parallel", "parallel calls need at least two expected `tool_calls`")


def _check_kind(kind: str, use: ToolUse, report: Report) -> None:
    """What each kind of tool-use case must expect."""
    ex = use.expect
    has_result = any(m["role"] == "tool" for m in use.messages)
    needs = {
        "single": (len(ex.calls) == 1, "expect.tool_calls", "a single-call case expects exactly one call"),
        "parallel": (len(ex.calls) >= 2 and ex.parallel, "expect.tool_calls", "a parallel case expects two or more calls in one turn"),
        "no_call": (ex.no_call, "expect.no_tool_call", "a no-call case sets `no_tool_call: true`"),
        "multistep": (has_result and bool(ex.calls), "messages", "a multi-step case carries an earlier call's result and expects the next call"),
        "restricted": (bool(ex.forbidden), "expect.forbidden_tools", "a restricted case names a forbidden tool (or a user role that may not use one)"),
        "final_answer": (
            has_result and bool(ex.uses_result),
            "expect.uses_result",
            "a final-answer case carries a tool result and the terms the answer must use",
        ),
    }
    ok, label, message = needs.get(kind, (True, "", ""))
    if not ok:
        report(("expect",) if label.startswith("expect") else (label,), label, message)


def build_tool_use(raw: Mapping[str, Any], library: Mapping[str, Tool], report: Report) -> ToolUse | None:
    """A case's tool use from its written fields, every inconsistency reported; None for a case
    that carries no tools (other scenarios)."""
    expect_raw = raw.get("expect") or {}
    tool_keys = [k for k in ("tool_calls", "forbidden_tools", "no_tool_call", "parallel", "uses_result") if k in expect_raw]
    if raw.get("scenario") != "tool_use":
        if "tools" in raw or "tool_choice" in raw or tool_keys:
            report((), "tools", "tools and tool expectations belong to the tool_use scenario")
        return None
    tools = _resolve_tools(raw, library, report)
    if not tools:
        report((), "tools", "a tool_use case offers at least one tool (`tools`, or the file's `tools:` library)")
    choice = raw.get("tool_choice")
    if isinstance(choice, dict):
        _named(tools, choice["function"]["name"], ("tool_choice",), "tool_choice", report)
    messages = tuple(dict(m) for m in raw.get("messages", ()))
    _check_messages(messages, tools, report)
    expect = _parse_expect(expect_raw, tools, raw.get("user_role"))
    _check_expect(expect, expect_raw, tools, report)
    use = ToolUse(tools=tools, tool_choice=choice, messages=messages, expect=expect)
    _check_kind(raw["kind"], use, report)
    return use
