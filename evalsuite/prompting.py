"""Render a case into the chat messages a backend receives.

The rendering is part of what is tested: it is fixed per scenario and versioned (PROMPT_VERSION is in
every request hash through the messages themselves), so a changed template invalidates the cache.
"""

from __future__ import annotations

import json

from .cases import Case

PROMPT_VERSION = 1

_KB_SYSTEM = {
    "en": (
        "You are the company's knowledge-base assistant. Answer only from the documents below. "
        "Cite every fact with the id of its document in square brackets, e.g. [doc-id]. "
        "If the documents do not contain the answer, say \"I don't know based on the provided documents.\" "
        "If a document is restricted and the user's role is not allowed to read it, do not reveal its content: "
        "say that you cannot share that information."
    ),
    "zh": (
        "你是公司的知识库助手。只根据下面的文档回答。每个事实都要用方括号标注文档编号，例如 [doc-id]。"
        "如果文档中没有答案，请说“根据提供的文档，我不知道。”"
        "如果某个文档是受限的，而用户的角色无权阅读，请不要透露其内容，并说明你无法提供该信息。"
    ),
}
_CODE_SYSTEM = {
    "en": "You are a careful Python programmer. When you write code, put it in one ```python block.",
    "zh": "你是一名严谨的 Python 程序员。编写代码时，请放在一个 ```python 代码块中。",
}
_BRAND_SYSTEM = {
    "en": "You write on-brand copy for {company}. Reply with one JSON object only, no prose.",
    "zh": "你为 {company} 撰写符合品牌规范的文案。只回复一个 JSON 对象，不要其他文字。",
}


def _documents_block(case: Case) -> str:
    parts = []
    for d in case.context:
        access = d.access if d.access != "restricted" else f"restricted (roles: {', '.join(d.roles) or 'none'})"
        parts.append(f"[{d.id}] {d.title} (access: {access})\n{d.text.strip()}")
    return "\n\n".join(parts)


def _glossary_block(case: Case) -> str:
    g = case.glossary
    if g is None:
        return ""
    lines = []
    for t in g.terms:
        if t.lang and t.lang != case.lang:
            continue
        line = f"- {t.term}"
        if t.forbidden:
            line += f" (never: {', '.join(t.forbidden)})"
        lines.append(line)
    tone = f"\nTone: {', '.join(g.tone_preferred)}." if g.tone_preferred else ""
    head = "Brand terms:" if case.lang != "zh" else "品牌术语："
    return f"{head}\n" + "\n".join(lines) + tone


def system_prompt(case: Case) -> str | None:
    """The scenario's system prompt for the case (a case's own `system` wins)."""
    if case.system:
        return case.system
    lang = case.lang if case.lang in ("en", "zh") else "en"
    if case.scenario == "kb_qa":
        role = case.user_role or "employee"
        role_line = f"\nThe user's role: {role}." if lang == "en" else f"\n用户角色：{role}。"
        docs = _documents_block(case)
        head = "Documents:" if lang == "en" else "文档："
        return f"{_KB_SYSTEM[lang]}{role_line}\n\n{head}\n{docs}" if docs else _KB_SYSTEM[lang] + role_line
    if case.scenario == "code":
        return _CODE_SYSTEM[lang]
    if case.scenario == "brand":
        company = case.glossary.company if case.glossary and case.glossary.company else "the company"
        parts = [_BRAND_SYSTEM[lang].format(company=company)]
        gl = _glossary_block(case)
        if gl:
            parts.append(gl)
        if case.json_schema is not None:
            parts.append("JSON Schema:\n" + json.dumps(case.json_schema, ensure_ascii=False, sort_keys=True))
        return "\n\n".join(parts)
    return None


def render_messages(case: Case) -> tuple[tuple[str, str], ...]:
    """The full chat for a case: system prompt, then the case's prompt or messages."""
    msgs: list[tuple[str, str]] = []
    sys = system_prompt(case)
    if sys:
        msgs.append(("system", sys))
    if case.messages:
        msgs.extend(m for m in case.messages if not (m[0] == "system" and sys))
    else:
        msgs.append(("user", case.prompt or ""))
    return tuple(msgs)
