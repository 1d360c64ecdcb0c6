"""The evidence beside a flagged output, from its case, both outputs and their score records.

The report's flagged cases and the review queue's items show the same evidence, built here once:
what was asked (`case_brief`), the context documents with what each side cites and where
(`citations_evidence`), the JSON key by key (`json_drift_rows`), the glossary terms each side kept
or dropped (`terms_evidence`), the unit-test results of both sides (`code_evidence`) and the tool
calls of both sides with their tools' schemas (`tool_evidence`). Pure
functions of their inputs: no files, no models.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..backends.base import Generation
    from ..backends.toolcalls import ToolCall
    from ..cases.caseset import Case
    from ..cases.tools import ToolExpect
    from ..run.store import ScoreRecord

CLIP = 4000  #: characters of a document, schema or test file kept as evidence


def clip(text: str | None, n: int = CLIP) -> str | None:
    """`text` cut to `n` characters, saying how much was left out."""
    if text is None or len(text) <= n:
        return text
    return text[:n] + f" ... ({len(text) - n} more characters)"


def flatten_json(value: object, prefix: str = "$") -> dict[str, object]:
    """Leaf paths of a JSON value (`$.features[1]`) -> leaf value; empty containers are leaves."""
    out: dict[str, object] = {}
    if isinstance(value, dict) and value:
        for k, v in value.items():
            out.update(flatten_json(v, f"{prefix}.{k}"))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            out.update(flatten_json(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _drift_row(path: str, fb: Mapping[str, object], fv: Mapping[str, object], variant_ok: bool) -> dict:
    inb, inv = path in fb, path in fv
    if inb and inv:
        change = "same" if fb[path] == fv[path] else "changed"
    elif inb:
        change = "missing" if variant_ok else "unparsed"
    else:
        change = "added"
    return {
        "path": path,
        "baseline": json.dumps(fb[path], ensure_ascii=False) if inb else "",
        "variant": json.dumps(fv[path], ensure_ascii=False) if inv else "",
        "change": change,
    }


def json_drift_rows(baseline_text: str | None, variant_text: str | None) -> dict | None:
    """Key-by-key comparison of the JSON in two outputs; None when neither holds JSON."""
    from .jsonformat import extract_json

    b = extract_json(baseline_text or "")
    v = extract_json(variant_text or "")
    if not b.ok and not v.ok:
        return None
    fb = flatten_json(b.value) if b.ok else {}
    fv = flatten_json(v.value) if v.ok else {}
    rows = [_drift_row(path, fb, fv, v.ok) for path in dict.fromkeys(list(fb) + list(fv))]
    return {
        "rows": rows,
        "baseline_error": None if b.ok else (b.error or "no JSON found"),
        "variant_error": None if v.ok else (v.error or "no JSON found"),
        "changed": sum(1 for r in rows if r["change"] != "same"),
    }


def _call_view(call: ToolCall | None) -> dict | None:
    if call is None:
        return None
    view = {"name": call.name, "arguments": call.arguments}
    if call.error:
        view.update(error=call.error, raw=clip(call.raw, 600))
    return view


def tool_evidence(case: Case | None, baseline_text: str | None, variant_text: str | None) -> dict | None:
    """A tool-use case's calls side by side, paired by position: each pair's arguments key by key
    and the schema of the tool called; with the calls expected and the tools forbidden. None for
    other cases."""
    use = getattr(case, "tool_use", None)
    if use is None:
        return None
    from ..backends.toolcalls import parse_text_calls

    b, v = parse_text_calls(baseline_text), parse_text_calls(variant_text)
    pairs = []
    for i in range(max(len(b), len(v))):
        cb, cv = (b[i] if i < len(b) else None), (v[i] if i < len(v) else None)
        tool = use.tool(cv.name if cv is not None else None) or use.tool(cb.name if cb is not None else None)
        fb = flatten_json(cb.arguments) if cb is not None and cb.arguments is not None else {}
        fv = flatten_json(cv.arguments) if cv is not None and cv.arguments is not None else {}
        ok = cv is not None and cv.arguments is not None
        pairs.append(
            {
                "baseline": _call_view(cb),
                "variant": _call_view(cv),
                "arguments": [_drift_row(p, fb, fv, ok) for p in dict.fromkeys(list(fb) + list(fv))],
                "tool": tool.name if tool else None,
                "schema": clip(json.dumps(tool.parameters, indent=1, ensure_ascii=False)) if tool else None,
            }
        )
    return {
        "pairs": pairs,
        "expected": [{"name": e.name, "arguments": e.arguments, "match": e.match} for e in use.expect.calls],
        "forbidden": list(use.expect.forbidden),
        "no_call": use.expect.no_call,
    }


def citations_evidence(case: Case | None, baseline_text: str | None, variant_text: str | None, max_text: int = 600, dropped: Sequence[str] = ()) -> dict | None:
    """The case's context documents with the gold citations, what each output cites, and the
    passages (character spans of the document text) each output's citing sentences rest on.
    `dropped`: the documents the variant's context trimming left out of its prompt (marked on each,
    and listed, so a lost citation can be traced to them)."""
    if case is None or not case.context:
        return None
    from .citations import cited_ids, cited_spans

    cb = cited_ids(baseline_text or "", case)
    cv = cited_ids(variant_text or "", case)
    sb = cited_spans(case, baseline_text or "")
    sv = cited_spans(case, variant_text or "")
    gold = set(case.expect.citations)
    docs = []
    for d in case.context:
        text = d.text if len(d.text) <= max_text else d.text[:max_text] + " ..."
        docs.append(
            {
                "id": d.id,
                "title": d.title,
                "access": d.access,
                "roles": list(d.roles),
                "gold": d.id in gold,
                "baseline": d.id in cb,
                "variant": d.id in cv,
                "text": text,
                "spans": {
                    "baseline": [list(s) for s in sb.get(d.id, []) if s[1] <= len(text)],
                    "variant": [list(s) for s in sv.get(d.id, []) if s[1] <= len(text)],
                },
            }
        )
        if d.id in dropped:
            docs[-1]["dropped"] = True
    known = {d.id for d in case.context}
    trimmed = {"dropped": [d.id for d in case.context if d.id in dropped]} if dropped else {}
    return {
        **trimmed,
        "docs": docs,
        "baseline_cited": cb,
        "variant_cited": cv,
        "unknown_baseline": [c for c in cb if c not in known],
        "unknown_variant": [c for c in cv if c not in known],
        "gold": sorted(gold),
    }


def trim_drops(generations: Iterable[Generation]) -> dict[tuple[str, str], list[str]]:
    """(variant, case id) -> the documents its context trimming dropped (`extra["context_trim"]`,
    recorded by the runner), from sample 0 of each case."""
    out = {}
    for g in generations:
        rec = (g.extra or {}).get("context_trim") if g.sample == 0 else None
        if rec and rec.get("dropped"):
            out[(g.variant, g.case_id)] = list(rec["dropped"])
    return out


def _code_side(r: ScoreRecord | None) -> dict:
    det = (r.details or {}) if r is not None else {}
    return {
        "passed": None if r is None else r.passed,
        "status": det.get("status") or det.get("skipped") or ("-" if r is None else ""),
        "reason": det.get("reason") or "",
        "stderr": det.get("stderr_tail") or "",
    }


def code_evidence(case: Case | None, recs: Mapping[str, Mapping[str, ScoreRecord]]) -> dict | None:
    """Unit-test results of both sides (code.pass details) and pass@k, with the case's tests."""
    if case is None or not case.expect.tests:
        if not any(m.startswith("code.") for side in recs.values() for m in side):
            return None
    sides = {side: _code_side(by_metric.get("code.pass")) for side, by_metric in recs.items()}
    pass_at_k = []
    metrics = sorted(
        {m for side in recs.values() for m in side if m.startswith("code.pass@")}, key=lambda m: int(m.split("@")[1]) if m.split("@")[1].isdigit() else 0
    )
    for m in metrics:
        b, v = recs.get("baseline", {}).get(m), recs.get("variant", {}).get(m)
        pass_at_k.append(
            {
                "metric": m,
                "baseline": None if b is None else b.value,
                "variant": None if v is None else v.value,
                "baseline_statuses": (b.details or {}).get("statuses") if b is not None else None,
                "variant_statuses": (v.details or {}).get("statuses") if v is not None else None,
            }
        )
    return {
        "tests": (case.expect.tests if case is not None else None) or "",
        "entry_point": case.expect.entry_point if case is not None else None,
        "baseline": sides.get("baseline"),
        "variant": sides.get("variant"),
        "pass_at_k": pass_at_k,
    }


def terms_evidence(case: Case | None, baseline_text: str | None, variant_text: str | None) -> dict | None:
    """Per tracked term (required terms, glossary terms): the form each side used, or None when it
    dropped the term; and the forbidden variants each side wrote. None when the case tracks none."""
    if case is None:
        return None
    from .terminology import find_forbidden, terms_found, tracked_terms

    terms = tracked_terms(case)
    if not terms and not case.expect.forbidden_terms:
        return None
    fb = terms_found(case, baseline_text or "", terms)
    fv = terms_found(case, variant_text or "", terms)
    rows = []
    for t in terms:
        b, v = fb.get(t), fv.get(t)
        status = "kept" if b and v else "dropped" if b else "gained" if v else "absent"
        rows.append({"term": t, "baseline": b, "variant": v, "status": status})
    return {
        "rows": rows,
        "forbidden": {"baseline": find_forbidden(case, baseline_text or ""), "variant": find_forbidden(case, variant_text or "")},
        "dropped": [r["term"] for r in rows if r["status"] == "dropped"],
    }


def _expected(case: Case) -> dict:
    e = case.expect
    out: dict[str, object] = {}
    if e.reference_answer or e.reference:
        out["answer"] = clip(e.reference_answer or e.reference)
    if e.must_refuse:
        out["behaviour"] = "refuse: the documents are restricted for this user"
    elif e.must_abstain:
        out["behaviour"] = "abstain: the documents do not answer the question"
    if e.answer_keywords:
        out["keywords"] = list(e.answer_keywords)
    if e.required_terms:
        out["required_terms"] = [t.term for t in e.required_terms]
    if e.citations:
        out["citations"] = list(e.citations)
    if e.forbidden_terms:
        out["forbidden_terms"] = list(e.forbidden_terms)
    use = getattr(case, "tool_use", None)
    if use is not None:
        out.update(_tool_expected(use.expect))
    return out


def _tool_expected(t: ToolExpect) -> dict:
    """A tool-use case's expectations in the brief's words."""
    out: dict[str, object] = {}
    if t.calls:
        out["tool_calls"] = [{"name": c.name, "arguments": c.arguments, "match": c.match} for c in t.calls]
    if t.no_call:
        out["behaviour"] = "answer without calling a tool"
    if t.forbidden:
        out["forbidden_tools"] = list(t.forbidden)
    if t.uses_result:
        out["uses_result"] = [forms[0] for forms in t.uses_result]
    return out


def _turn_text(message: Mapping[str, object]) -> str:
    """A tool-use turn as text: its content, and its calls as `<tool_call>` blocks."""
    from ..backends.toolcalls import render_call

    content, calls = message.get("content"), message.get("tool_calls")
    rendered = [render_call(c) for c in calls if isinstance(c, Mapping)] if isinstance(calls, (list, tuple)) else []
    return "\n".join([content if isinstance(content, str) else "", *rendered]).strip()


def case_brief(case: Case) -> dict:
    """What was asked and what a good answer does: the system prompt, the conversation (or the
    prompt), the user's role, the expected answer or behaviour, and the JSON schema."""
    messages = [{"role": r, "text": clip(t)} for r, t in case.messages] if case.messages else []
    use = case.tool_use
    if use is not None and use.messages:
        messages = [{"role": m["role"], "text": clip(_turn_text(m))} for m in use.messages]
    if case.prompt and not messages:
        messages = [{"role": "user", "text": clip(case.prompt)}]
    return {
        "title": case.title,
        "system": clip(case.system),
        "messages": messages,
        "user_role": case.user_role,
        "lang": case.lang,
        "expected": _expected(case),
        "schema": clip(json.dumps(case.json_schema, indent=1, ensure_ascii=False)) if case.json_schema else None,
        "tests": clip(case.expect.tests),
        "entry_point": case.expect.entry_point,
    }
