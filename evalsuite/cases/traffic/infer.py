"""What a logged request tests: its scenario, kind and language, and the expectations the production
answer and a glossary give. Everything inferred here is a draft for a person to confirm."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .records import TrafficRequest

TOOL_USE = "tool-use scenario not available yet (issue 43)"
NO_SCENARIO = "no scenario fits: no documents, no JSON response_format, no code"
NO_ANSWER = "no production answer to keep as the reference"
# delimited documents inside a message: <document id="x">...</document> (or <doc id=x>...</doc>)
_DOC_BLOCK = re.compile(r"<(document|doc)\s+id=[\"']?([^\"'>\s]+)[\"']?\s*>(.*?)</\1>", re.S | re.I)
_CODE_FENCE = "```"
_CODE_WORDS = ("python", "function", "javascript", "typescript", "sql", "code", "def ", "class ", "代码", "函数")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LENGTHS = ((200, "short"), (1000, "medium"))  #: prompt characters below which a prompt is short, medium; else long


@dataclass(frozen=True, kw_only=True)
class Inferred:
    """One request read as a case: its scenario and kind, and the case's fields (a draft)."""

    scenario: str
    kind: str
    lang: str
    length: str  #: short, medium or long (the prompt's characters)
    schema: dict | None = None  #: the response_format's JSON Schema (brand/structured)
    fields: dict[str, Any] = field(default_factory=dict)  #: prompt or messages, system, context, expect

    @property
    def stratum(self) -> tuple[str, str, str]:
        return (self.scenario, self.lang, self.length)


def language(text: str) -> str:
    """`zh` when at least a tenth of the letters are CJK ideographs, else `en` (the case sets' two languages)."""
    letters = sum(ch.isalpha() for ch in text)
    return "zh" if letters and len(_CJK.findall(text)) * 10 >= letters else "en"


def length_bucket(text: str) -> str:
    for limit, name in LENGTHS:
        if len(text) < limit:
            return name
    return "long"


def prompt_text(req: TrafficRequest) -> str:
    """The request's text as one string (dedup, language and length read it)."""
    return "\n".join(t for _, t in req.messages)


def infer(req: TrafficRequest, glossary_terms: tuple[str, ...] = ()) -> Inferred | str:
    """The request as a draft case, or the reason it is set aside."""
    if req.tools:
        return TOOL_USE
    if not req.answer:
        return NO_ANSWER
    docs, messages = _documents(req)
    text = prompt_text(req)
    expect: dict[str, Any] = {"reference_answer": req.answer}
    fields = _turns(messages)
    schema = _json_schema(req.response_format)
    if docs:
        scenario, kind = "kb_qa", "grounded"
        cited = [d for d, _ in docs if f"[{d}]" in req.answer]
        if cited:
            expect["citations"] = cited
        fields["context"] = [{"id": d, "title": "", "text": t} for d, t in docs]
    elif schema is not None:
        scenario, kind = "brand", "structured"
    elif _is_code(text, req.answer):
        scenario, kind = "code", "explanation"
    else:
        return NO_SCENARIO
    return Inferred(
        scenario=scenario,
        kind=kind,
        lang=language(text),
        length=length_bucket(text),
        schema=schema if scenario == "brand" else None,
        fields=_with_expect(fields, expect, req.answer, glossary_terms),
    )


def _with_expect(fields: dict, expect: dict, answer: str, glossary_terms: tuple[str, ...]) -> dict:
    """`expect` with the glossary terms the production answer uses, as required terms."""
    terms = [t for t in glossary_terms if _uses(answer, t)]
    if terms:
        expect = dict(expect, required_terms=terms)
    return dict(fields, expect=expect)


def _uses(text: str, term: str) -> bool:
    """The term as a whole word (CJK terms, which have no word boundaries, anywhere), any case."""
    if _CJK.search(term):
        return term in text
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.I) is not None


def _documents(req: TrafficRequest) -> tuple[list[tuple[str, str]], tuple[tuple[str, str], ...]]:
    """The request's documents (its `documents` field, or blocks delimited in its messages), and its
    messages with those blocks taken out (the case's context carries them)."""
    docs = list(req.documents)
    messages = []
    for role, text in req.messages:
        found = _DOC_BLOCK.findall(text)
        if found and role in ("system", "user"):
            docs.extend((doc_id, body.strip()) for _, doc_id, body in found)
            text = _DOC_BLOCK.sub("", text).strip()
        messages.append((role, text))
    return list(dict(docs).items()), tuple(messages)


def _turns(messages: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The case's `system` and its `prompt` (one user turn) or `messages` (a conversation)."""
    system = "\n\n".join(t for r, t in messages if r == "system" and t)
    turns = [(r, t) for r, t in messages if r != "system"]
    while turns and turns[-1][0] != "user":
        turns.pop()
    out: dict[str, Any] = {"system": system} if system else {}
    if len(turns) == 1:
        out["prompt"] = turns[0][1] or "Answer from the documents."
    else:
        out["messages"] = [{"role": r, "content": t or "(empty)"} for r, t in turns]
    return out


def _json_schema(fmt: dict | None) -> dict | None:
    """The JSON Schema a `response_format` asks for: its `json_schema.schema`, or any object for `json_object`."""
    if not fmt:
        return None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else {"type": "object"}
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    return None


def _is_code(text: str, answer: str) -> bool:
    """Asks for code (names a language or code words) or answers with a fenced code block."""
    if _CODE_FENCE in answer:
        return True
    low = text.casefold()
    return any(w in low for w in _CODE_WORDS)
