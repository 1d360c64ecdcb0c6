"""The program in a model's answer, for the code scorers (evalsuite.scoring.code): fenced blocks
first, else the text trimmed to where code starts, completed with the prompt's own code (its imports,
or the signature a body-only completion belongs to)."""

from __future__ import annotations

import ast
import re
import textwrap

from ..cases.caseset import Case

FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:(?P<close>^[ \t]*\1[ \t]*$)|\Z)", re.S | re.M)
_PY_TAGS = {"python", "py", "python3", "py3", "pycon", "ipython"}
_CODE_START = re.compile(r"^(def |async def |class |import |from \S+ import |@|[A-Za-z_][\w.]*\s*(=|\()|if __name__|assert |for |while |with |try:|#)")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def _fenced_blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language tag, body, closed) of each fenced block, in order."""
    out = []
    for m in FENCE.finditer(text):
        out.append((m.group(2).lower(), m.group(3), m.group("close") is not None))
    return out


def _trim_to_code(text: str) -> str | None:
    """The longest run of lines that parses, starting at a line that looks like code."""
    lines = text.split("\n")
    if len(lines) > 400:
        lines = lines[:400]
    starts = [i for i, ln in enumerate(lines) if _CODE_START.match(ln)]
    best: str | None = None
    for s in starts:
        for e in range(len(lines), s, -1):
            chunk = "\n".join(lines[s:e]).strip("\n")
            if chunk and _parses(chunk) and any(not ln.startswith("#") for ln in chunk.split("\n") if ln.strip()):
                if best is None or len(chunk) > len(best):
                    best = chunk
                break
        if best is not None and len(best) >= len("\n".join(lines[s:])):
            break
    return best


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def prompt_code(prompt: str | None, entry_point: str | None = None) -> str | None:
    """The code part of a completion prompt (imports, helpers, the signature and docstring)."""
    if not prompt:
        return None
    if _parses(prompt.rstrip() + "\n    pass\n") and (entry_point is None or _defines(prompt + "\n    pass\n", entry_point)):
        return prompt.rstrip("\n") + "\n"  # a pure-code prompt (HumanEval style)
    for _, body, _ in _fenced_blocks(prompt):
        if entry_point is None or _defines(body + "\n    pass\n", entry_point):
            return body.rstrip("\n") + "\n"
    lines = prompt.split("\n")
    for i, ln in enumerate(lines):
        if _CODE_START.match(ln) and not ln.startswith("#"):
            chunk = "\n".join(lines[i:]).rstrip() + "\n"
            if _parses(chunk + "    pass\n") and (entry_point is None or _defines(chunk + "    pass\n", entry_point)):
                return chunk
    return None


def _prompt_preamble(pcode: str, entry_point: str | None, answer: str) -> str:
    """Imports and helper definitions of the prompt that a whole-function answer does not repeat."""
    try:
        tree = ast.parse(pcode + "    pass\n")
    except SyntaxError:
        return ""
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(ast.get_source_segment(pcode + "    pass\n", node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name != entry_point:
            if not _defines(answer, node.name):
                keep.append(ast.get_source_segment(pcode + "    pass\n", node))
    return "\n".join(s for s in keep if s)


def _attach_body(pcode: str, body: str) -> str | None:
    """Prompt code + a body-only answer; trailing prose is cut until it parses."""
    body = body.strip("\n")
    first = next((ln for ln in body.split("\n") if ln.strip()), "")
    if first and not first[0].isspace():
        body = textwrap.indent(body, "    ")
    lines = body.split("\n")
    for e in range(len(lines), 0, -1):
        combined = pcode.rstrip("\n") + "\n" + "\n".join(lines[:e]).rstrip() + "\n"
        if _parses(combined):
            return combined
    return None


def extract_code(text: str, *, prompt: str | None = None, entry_point: str | None = None, kind: str = "completion") -> tuple[str, str]:
    """The program in a model's answer, and how it was found.

    `how` is one of "fence:python", "fence", "fence-unclosed", "raw", "raw-trimmed", "none", with
    "+prompt-signature" (a body-only completion: the prompt's code is put in front, like HumanEval's
    prompt + completion) or "+prompt-imports" (a whole function: the prompt's imports and helpers
    it does not repeat go in front) appended for completions.
    """
    text = text.replace("\r\n", "\n")
    blocks = _fenced_blocks(text)
    code, how = "", "none"
    if blocks:
        py = [b for b in blocks if b[0] in _PY_TAGS]
        cands = py or [b for b in blocks if b[0] == ""] or blocks
        chosen = None
        if entry_point:
            chosen = next((b for b in cands if _defines(b[1], entry_point)), None)
        if chosen is None:
            chosen = next((b for b in cands if _parses(b[1])), cands[0])
        code = chosen[1]
        how = ("fence:python" if chosen[0] in _PY_TAGS else "fence") if chosen[2] else "fence-unclosed"
        first = FENCE.search(text)
        lead = text[: first.start()] if first else ""
        if how == "fence-unclosed" and any(_CODE_START.match(ln) for ln in lead.split("\n")) and not any(_CODE_START.match(ln) for ln in code.split("\n")):
            # code, then a lone closing fence, then prose: the "unclosed block" is the prose
            code, how = lead, "raw"
    elif text.strip():
        code, how = text, "raw"

    pcode = prompt_code(prompt, entry_point) if kind == "completion" and entry_point else None
    if pcode and code and entry_point and not _defines(code, entry_point):
        body = code if how != "raw" else text
        attached = _attach_body(pcode, body)
        if attached is not None:
            return attached, how + "+prompt-signature"
    if how == "raw" and not _parses(code):
        trimmed = _trim_to_code(text)
        if trimmed is not None:
            code, how = trimmed, "raw-trimmed"
        elif not any(_CODE_START.match(ln) for ln in text.split("\n")):
            code, how = "", "none"  # prose only; broken code that looks like code is kept and fails in the run
    elif how == "fence-unclosed" and not _parses(code):
        lines = code.rstrip("\n").split("\n")
        while lines and not _parses("\n".join(lines)):
            lines.pop()
        code = "\n".join(lines)
    code = code.strip("\n") + "\n" if code.strip() else ""
    if pcode and code:
        pre = _prompt_preamble(pcode, entry_point, code)
        if pre:
            return pre + "\n\n" + code, how + "+prompt-imports"
    return code, how


def _prompt_text(case: Case) -> str | None:
    if case.prompt is not None:
        return case.prompt
    users = [content for role, content in case.messages if role == "user"]
    return users[-1] if users else None


def case_code(case: Case, text: str) -> tuple[str, str]:
    return extract_code(text, prompt=_prompt_text(case), entry_point=case.expect.entry_point, kind=case.kind)
