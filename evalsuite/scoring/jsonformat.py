"""Structured-output scorers (brand): JSON parsed, valid against the case's schema, drift from the
baseline's JSON.

Models wrap JSON in fences or prose even when told not to; `extract_json` finds the value anyway
and records which of "raw", "fence" or "prose" was needed, so a variant that starts chatting around
its JSON shows up in the details even when it still parses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..schemalib import jsonschema as _jsonschema
from .base import Score, ScoreInput, scorer

if TYPE_CHECKING:
    import jsonschema

_FENCE = re.compile(r"(?:```|~~~)[ \t]*([A-Za-z][A-Za-z0-9_+-]*)?[ \t]*\r?\n?(.*?)(?:```|~~~|\Z)", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Extracted:
    """The outcome of looking for JSON in an output."""

    ok: bool
    value: Any = None
    how: str | None = None  #: "raw", "fence" or "prose"; None when nothing parsed
    error: str | None = None  #: why the raw text did not parse, when nothing did
    span: tuple[int, int] | None = None  #: where the JSON sits in the output (fence/prose)
    extra: dict = field(default_factory=dict)


def _scan(text: str) -> tuple[object, tuple[int, int]] | None:
    """The longest JSON object or array embedded in `text` (outermost first, left to right)."""
    best: tuple[object, tuple[int, int]] | None = None
    i, n = 0, len(text)
    while i < n:
        if text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            if best is None or end - i > best[1][1] - best[1][0]:
                best = (value, (i, end))
            i = end
        else:
            i += 1
    return best


def extract_json(text: str) -> Extracted:
    """Find the JSON value in a model output: the whole text, else a fenced block, else embedded in prose."""
    stripped = (text or "").strip().lstrip("\ufeff")
    try:
        return Extracted(True, json.loads(stripped), "raw")
    except json.JSONDecodeError as exc:
        raw_error = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
    for m in _FENCE.finditer(text or ""):
        body = m.group(2).strip()
        try:
            return Extracted(True, json.loads(body), "fence", span=m.span(2), extra={"lang": m.group(1) or None})
        except json.JSONDecodeError:
            continue
    found = _scan(text or "")
    if found is not None:
        return Extracted(True, found[0], "prose", span=found[1])
    if not stripped:
        return Extracted(False, error="empty output")
    return Extracted(False, error=_candidate_error(text or "") or raw_error)


#: at most this many `{` / `[` positions are tried as JSON candidates when nothing parses
MAX_CANDIDATES = 200


def _candidate_error(text: str) -> str | None:
    """Why the best JSON candidate in `text` did not parse: the error of the `{...}` or `[...]` that
    parsed furthest (a fenced block's body counts too), at its line and column *inside that
    candidate*, and where the candidate starts. Prose before the JSON would otherwise give the error
    of parsing the whole text ("Expecting value (line 1, column 1)"), which points at the prose."""
    starts = [i for i, ch in enumerate(text) if ch in "{["][:MAX_CANDIDATES]
    best: tuple[int, int, json.JSONDecodeError] | None = None  # (how far it parsed, start, error)
    for start in starts:
        try:
            _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if best is None or exc.pos - start > best[0]:
                best = (exc.pos - start, start, exc)
    if best is None:
        return None
    _, start, err = best
    cand, at = text[start:], err.pos - start
    line = cand.count("\n", 0, at) + 1
    col = at - (cand.rfind("\n", 0, at) + 1) + 1
    where_line = text.count("\n", 0, start) + 1
    where_col = start - (text.rfind("\n", 0, start) + 1) + 1
    kind = "object" if text[start] == "{" else "array"
    msg = f"{err.msg} (line {line}, column {col} of the JSON {kind} starting at line {where_line}, column {where_col} of the output)"
    before = cand[:at].rstrip()
    if before.endswith(",") and cand[at : at + 1] in ("}", "]"):
        msg += f": a trailing comma before '{cand[at]}'"
    return msg


def _path(parts) -> str:
    return "/".join(str(p) for p in parts) or "(root)"


def _missing_property(e: jsonschema.ValidationError) -> str | None:
    """The property a `required` error is about (jsonschema yields one error per missing name)."""
    inst = e.instance if isinstance(e.instance, dict) else {}
    required = e.validator_value if isinstance(e.validator_value, (list, tuple)) else ()
    names = [p for p in required if isinstance(p, str) and p not in inst]
    named = [p for p in names if e.message.startswith(repr(p) + " ")]
    return named[0] if named else (names[0] if len(names) == 1 else None)


def _extra_keys(e: jsonschema.ValidationError) -> list[str]:
    """The keys an `additionalProperties: false` error is about, in the instance's order."""
    if not isinstance(e.instance, dict) or not isinstance(e.schema, dict):
        return []
    props = e.schema.get("properties") or {}
    patterns = list((e.schema.get("patternProperties") or {}).keys())
    return [k for k in e.instance if k not in props and not any(re.search(p, k) for p in patterns)]


def _located(e: jsonschema.ValidationError) -> list[dict]:
    """One entry per field the error is about: `required` and `additionalProperties` errors point at
    the missing or offending key itself (`items/0/price`), not at the object holding it."""
    parent = list(e.absolute_path)
    base = {"message": e.message, "validator": e.validator}
    if e.validator == "required":
        name = _missing_property(e)
        if name is not None:
            return [{"path": _path(parent + [name]), **base, "property": name}]
    elif e.validator == "additionalProperties" and e.validator_value is False:
        keys = _extra_keys(e)
        if keys:
            return [{"path": _path(parent + [k]), **base, "property": k} for k in keys]
    return [{"path": _path(parent), **base}]


def schema_errors(value: object, schema: dict) -> list[dict]:
    """Every schema violation as {"path": "features/2", "message": ..., "validator": ...}, sorted by
    path; a missing required property or a forbidden extra key has its own path and a `property`."""
    cls = _jsonschema().validators.validator_for(schema)
    out = [d for e in cls(schema).iter_errors(value) for d in _located(e)]
    return sorted(out, key=lambda d: (d["path"].split("/") if d["path"] != "(root)" else [], d["message"]))


@scorer("json.parsed", scenarios=("brand",))
def parsed(inp: ScoreInput) -> list[Score]:
    """1 when a JSON value could be extracted from the output, else 0."""
    ex = extract_json(inp.text)
    details = {"how": ex.how} if ex.ok else {"how": None, "error": ex.error}
    return [Score("json.parsed", 1.0 if ex.ok else 0.0, passed=ex.ok, details=details)]


@scorer("json.valid", scenarios=("brand",))
def valid(inp: ScoreInput) -> list[Score]:
    """1 when the extracted JSON satisfies the case's schema; None when the case has no schema."""
    schema = inp.case.json_schema
    if schema is None:
        return [Score("json.valid", None, details={"reason": "case has no JSON schema"})]
    ex = extract_json(inp.text)
    if not ex.ok:
        return [Score("json.valid", 0.0, passed=False, details={"error": f"no JSON found: {ex.error}", "paths": []})]
    errors = schema_errors(ex.value, schema)
    return [
        Score(
            "json.valid",
            0.0 if errors else 1.0,
            passed=not errors,
            details={"how": ex.how, "paths": list(dict.fromkeys(e["path"] for e in errors)), "errors": errors},
        )
    ]


# ---------------------------------------------------------------------------------------------
# drift

DRIFT_CATEGORIES = ("missing_keys", "extra_keys", "type_changes", "enum_changes", "const_changes", "array_length_changes")


def _json_type(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


class _Schema:
    """Just enough schema navigation to know which fields are enum or const: local $ref, allOf /
    anyOf / oneOf merged, properties / additionalProperties / items / prefixItems."""

    def __init__(self, root: dict | None):
        self.root = root or {}

    def _resolve(self, node: object, depth: int = 0) -> list[dict]:
        if not isinstance(node, dict) or depth > 20:
            return []
        out = []
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target: object = self.root
            for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            out += self._resolve(target, depth + 1)
        out.append(node)
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, ()) or ():
                out += self._resolve(sub, depth + 1)
        return out

    def nodes(self, node: object) -> list[dict]:
        return self._resolve(node)

    def child(self, nodes: list[dict], key: str) -> list[dict]:
        out: list[dict] = []
        for n in nodes:
            props = n.get("properties") or {}
            if key in props:
                out += self._resolve(props[key])
            else:
                for pat, sub in (n.get("patternProperties") or {}).items():
                    if re.search(pat, key):
                        out += self._resolve(sub)
                if isinstance(n.get("additionalProperties"), dict):
                    out += self._resolve(n["additionalProperties"])
        return out

    def item(self, nodes: list[dict], index: int) -> list[dict]:
        out: list[dict] = []
        for n in nodes:
            prefix = n.get("prefixItems")
            items = n.get("items")
            if isinstance(prefix, list) and index < len(prefix):
                out += self._resolve(prefix[index])
            elif isinstance(items, list):  # draft 4-7 tuple form
                if index < len(items):
                    out += self._resolve(items[index])
            elif isinstance(items, dict):
                out += self._resolve(items)
        return out


def json_drift(baseline: object, variant: object, schema: dict | None = None) -> dict[str, list]:
    """Structural differences of `variant` from `baseline`, by category (see DRIFT_CATEGORIES).

    Free-text values may differ (that is what sampling and paraphrase do); what counts is shape:
    keys, types, array lengths, and values the schema fixes to an enum or a const.
    """
    sch = _Schema(schema)
    out: dict[str, list] = {c: [] for c in DRIFT_CATEGORIES}

    def walk(b: object, v: object, path: list, nodes: list[dict]) -> None:
        tb, tv = _json_type(b), _json_type(v)
        p = _path(path)
        if tb != tv:
            out["type_changes"].append({"path": p, "baseline": tb, "variant": tv})
            return
        if isinstance(b, dict) and isinstance(v, dict):
            for k in b:
                if k not in v:
                    out["missing_keys"].append(_path(path + [k]))
            for k in v:
                if k not in b:
                    out["extra_keys"].append(_path(path + [k]))
            for k in b:
                if k in v:
                    walk(b[k], v[k], path + [k], sch.child(nodes, k))
            return
        if isinstance(b, list) and isinstance(v, list):
            if len(b) != len(v):
                out["array_length_changes"].append({"path": p, "baseline": len(b), "variant": len(v)})
            for i in range(min(len(b), len(v))):
                walk(b[i], v[i], path + [i], sch.item(nodes, i))
            return
        if b == v:
            return
        if any("const" in n for n in nodes):
            out["const_changes"].append({"path": p, "baseline": b, "variant": v})
        elif any("enum" in n for n in nodes):
            out["enum_changes"].append({"path": p, "baseline": b, "variant": v})

    walk(baseline, variant, [], sch.nodes(schema) if schema else [])
    return out


@scorer("json.drift", scenarios=("brand",))
def drift(inp: ScoreInput) -> list[Score]:
    """Count of structural differences from the baseline's JSON (lower is better); None for the
    baseline itself, when the baseline's output did not parse, or when this output did not (that
    shows in `json.parsed`)."""
    if inp.baseline_text is None:
        return [Score("json.drift", None, higher_is_better=False, details={"reason": "no baseline output"})]
    base = extract_json(inp.baseline_text)
    if not base.ok:
        return [Score("json.drift", None, higher_is_better=False, details={"reason": "baseline output did not parse"})]
    mine = extract_json(inp.text)
    if not mine.ok:
        return [Score("json.drift", None, higher_is_better=False, details={"reason": "output did not parse"})]
    diffs = json_drift(base.value, mine.value, inp.case.json_schema)
    counts = {c: len(diffs[c]) for c in DRIFT_CATEGORIES}
    details = {"counts": counts, **{c: diffs[c] for c in DRIFT_CATEGORIES if diffs[c]}}
    if base.how != mine.how:
        details["how"] = {"baseline": base.how, "variant": mine.how}
    return [Score("json.drift", float(sum(counts.values())), higher_is_better=False, details=details)]
