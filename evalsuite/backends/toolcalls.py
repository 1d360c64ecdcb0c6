"""Tool calls: the parsed-call record, the text template for models without one, and the parsers.

One module for every way a tool call reaches evalsuite, so the backends and the scorers agree on
what a call is:

- **Text**, from a model whose own chat template has no tools (the embedded SmolLM2-135M-Instruct's
  ChatML template renders `role` and `content` only). `render_tools` writes the tools into the
  system prompt and asks for the Hermes / Qwen2.5 call format, one call per block::

      <tool_call>
      {"name": "get_weather", "arguments": {"city": "Paris"}}
      </tool_call>

  `render_call` and `render_result` write a conversation's earlier calls and results in the same
  form (results as a user turn in `<tool_response>` tags, as Qwen2.5's template does), and
  `parse_text_calls` reads the calls back. `TOOL_CHAT_TEMPLATE` is the same fragment as a Jinja
  ChatML template, for `tokenizer.apply_chat_template(..., tools=..., chat_template=...)`.
- **OpenAI chat completions**: `parse_openai_calls` reads `message.tool_calls`, and
  `StreamedCalls` accumulates streamed `delta.tool_calls` fragments by index.

A call that does not parse is kept, with its raw text and the reason, never dropped: a variant that
starts emitting broken JSON must show up as broken calls, not as "no call".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TOOL_CHAT_TEMPLATE",
    "StreamedCalls",
    "ToolCall",
    "calls_from_dicts",
    "parse_openai_calls",
    "parse_text_calls",
    "render_call",
    "render_result",
    "render_tools",
    "text_without_calls",
]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call a model made, parsed or not."""

    name: str | None  #: the function named; None when the call did not parse far enough to name one
    arguments: dict | None  #: the arguments as a JSON object; None when they did not parse
    id: str | None = None  #: the call id (OpenAI's `tool_calls[].id`); None for text calls
    raw: str = ""  #: the call as the model wrote it (the block's body, or the arguments string)
    error: str | None = None  #: why the call did not parse; None for a good call

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "raw": self.raw, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolCall:
        return cls(id=d.get("id"), name=d.get("name"), arguments=d.get("arguments"), raw=d.get("raw", ""), error=d.get("error"))


def calls_from_dicts(items: Iterable[Mapping[str, Any]] | None) -> tuple[ToolCall, ...] | None:
    """Stored calls (`ToolCall.to_dict` each) back as records; None stays None."""
    return None if items is None else tuple(ToolCall.from_dict(d) for d in items)


# ---------------------------------------------------------------------------------------------
# the text template

TOOLS_INTRO = {
    "en": (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>\n'
        "If no function is needed, answer directly without a <tool_call> block."
    ),
    "zh": (
        "# 工具\n\n你可以调用一个或多个函数来完成用户的请求。\n\n"
        "函数签名在 <tools></tools> XML 标签中给出：\n<tools>\n{tools}\n</tools>\n\n"
        "每次函数调用，请在 <tool_call></tool_call> XML 标签中返回一个包含函数名和参数的 json 对象：\n<tool_call>\n"
        '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>\n'
        "如果不需要调用函数，请直接回答，不要输出 <tool_call> 块。"
    ),
}
_CHOICE = {
    "en": {
        "none": "Do not call any function for this request.",
        "required": "You must call at least one function.",
        "named": "You must call the function {name}.",
    },
    "zh": {"none": "本次请求不要调用任何函数。", "required": "你必须至少调用一个函数。", "named": "你必须调用函数 {name}。"},
}


def _choice_line(tool_choice: str | Mapping | None, lang: str) -> str | None:
    words = _CHOICE.get(lang, _CHOICE["en"])
    if isinstance(tool_choice, Mapping):
        return words["named"].format(name=(tool_choice.get("function") or {}).get("name", ""))
    return words.get(tool_choice) if tool_choice in ("none", "required") else None


def render_tools(tools: Sequence[Mapping[str, Any]], *, tool_choice: str | Mapping | None = None, lang: str = "en") -> str:
    """The system-prompt block offering `tools` (OpenAI format, one JSON object a line) and asking
    for `<tool_call>` blocks; `tool_choice` other than "auto" adds one line saying what it asks."""
    listed = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
    text = TOOLS_INTRO.get(lang, TOOLS_INTRO["en"]).format(tools=listed)
    line = _choice_line(tool_choice, lang)
    return f"{text}\n{line}" if line else text


def _arguments_value(arguments: Any) -> Any:
    """OpenAI carries arguments as a JSON string; a case may write them as an object."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def render_call(call: Mapping[str, Any]) -> str:
    """One OpenAI-format call (`{"function": {"name", "arguments"}}`) as a `<tool_call>` block."""
    fn = call.get("function") or call
    body = {"name": fn.get("name"), "arguments": _arguments_value(fn.get("arguments", {}))}
    return f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>"


def render_result(content: str) -> str:
    """One tool result as a `<tool_response>` block (a user turn: ChatML has no tool role)."""
    return f"<tool_response>\n{content}\n</tool_response>"


#: The fragment above as a ChatML Jinja template (after Qwen2.5's), for models whose own template
#: has no tools: pass it as `chat_template=` with `tools=` to `apply_chat_template`. English only;
#: evalsuite's own rendering (`render_tools`) also speaks Chinese to Chinese cases.
TOOL_CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n\n{% endif %}"
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
    "If no function is needed, answer directly without a <tool_call> block.<|im_end|>\n"
    "{% elif messages[0]['role'] == 'system' %}<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}<|im_start|>user\n{% else %}\n{% endif %}"
    "<tool_response>\n{{ message['content'] }}\n</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}<|im_end|>\n{% endif %}"
    "{% elif message['role'] != 'system' or not loop.first %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{% if message['content'] or not loop.first %}\n{% endif %}"
    '<tool_call>\n{"name": "{{ call.function.name }}", "arguments": '
    "{{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ---------------------------------------------------------------------------------------------
# parsers

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _call_from_json(body: str, *, call_id: str | None = None) -> ToolCall:
    """One `{"name": ..., "arguments": {...}}` body as a call; a bad one keeps its text and why."""
    raw = body.strip()
    fenced = _FENCE.match(raw)
    text = fenced.group(1) if fenced else raw
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=_name_guess(text), arguments=None, raw=raw, error=f"invalid JSON: {exc.msg} (column {exc.colno})")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ToolCall(id=call_id, name=None, arguments=None, raw=raw, error='not a {"name": ..., "arguments": ...} object')
    args = _arguments_value(value.get("arguments", value.get("parameters", {})))
    if not isinstance(args, dict):
        return ToolCall(id=call_id, name=value["name"], arguments=None, raw=raw, error=f"arguments are not a JSON object: {args!r}"[:200])
    return ToolCall(id=call_id, name=value["name"], arguments=args, raw=raw)


_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


def _name_guess(text: str) -> str | None:
    """The function a broken call names, when its `"name"` still reads (for the review's eyes)."""
    m = _NAME.search(text)
    return m.group(1) if m else None


def parse_text_calls(text: str | None) -> tuple[ToolCall, ...]:
    """Every `<tool_call>` block of a text output, in order (an unclosed last block counts: a
    truncated call is a broken call). No block: no calls."""
    return tuple(_call_from_json(m.group(1)) for m in _BLOCK.finditer(text or ""))


def text_without_calls(text: str | None) -> str:
    """The output's prose: its text with the `<tool_call>` blocks taken out."""
    return _BLOCK.sub("", text or "").strip()


def _openai_call(item: Mapping[str, Any]) -> ToolCall:
    fn = item.get("function") or {}
    name, args = fn.get("name"), fn.get("arguments")
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCall(id=item.get("id"), name=name, arguments=None, raw=raw, error=f"invalid JSON: {exc.msg} (column {exc.colno})")
    if not isinstance(args, dict):
        return ToolCall(id=item.get("id"), name=name, arguments=None, raw=raw, error="arguments are not a JSON object")
    if not isinstance(name, str) or not name:
        return ToolCall(id=item.get("id"), name=None, arguments=args, raw=raw, error="no function name")
    return ToolCall(id=item.get("id"), name=name, arguments=args, raw=raw)


def parse_openai_calls(message: Mapping[str, Any] | None) -> tuple[ToolCall, ...] | None:
    """The calls of a chat-completions `choices[i].message` (its `tool_calls`); None when the
    message has no `tool_calls` key at all (the server did not parse calls: read the text)."""
    if not message or message.get("tool_calls") is None:
        return None
    return tuple(_openai_call(item) for item in message["tool_calls"])


@dataclass(kw_only=True)
class StreamedCalls:
    """Tool calls arriving as streamed `delta.tool_calls` fragments: the first fragment of an index
    brings its id and name, the following ones pieces of the `arguments` string."""

    parts: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(self, delta: Mapping[str, Any] | None) -> None:
        """Take one chunk's `choices[i].delta`."""
        for item in (delta or {}).get("tool_calls") or ():
            slot = self.parts.setdefault(int(item.get("index", len(self.parts))), {"id": None, "name": "", "arguments": ""})
            slot["id"] = item.get("id") or slot["id"]
            fn = item.get("function") or {}
            slot["name"] += fn.get("name") or ""
            slot["arguments"] += fn.get("arguments") or ""

    def calls(self) -> tuple[ToolCall, ...] | None:
        """The accumulated calls by index; None when no fragment came."""
        if not self.parts:
            return None
        return tuple(_openai_call({"id": p["id"], "function": {"name": p["name"] or None, "arguments": p["arguments"]}}) for _, p in sorted(self.parts.items()))
