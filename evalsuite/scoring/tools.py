"""Tool-call scorers (tool_use): the calls parse and name an offered tool, their arguments fit the
tool's schema and match the expected ones, no forbidden tool is called, no call is made where none
is needed, parallel calls all come, the final answer uses the tool's result; and drift from the
baseline's calls, key by key.

Each scorer reads the calls the backend parsed (`ScoreInput.calls`), or else parses the text with
the `<tool_call>` template's parser (evalsuite.backends.toolcalls), so a stored text-only run
scores too. A scorer that does not apply to a case (no call expected, no forbidden tool) gives None.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Sequence

from ..backends.toolcalls import ToolCall, parse_text_calls, text_without_calls
from ..cases.tools import ExpectedCall, Tool, ToolUse
from .base import Score, ScoreInput, scorer
from .jsonformat import DRIFT_CATEGORIES, json_drift, schema_errors
from .textnorm import contains_term

SCENARIO = ("tool_use",)
CALL_DRIFT_CATEGORIES = ("call_count_changes", "name_changes", *DRIFT_CATEGORIES)


def calls_of(inp: ScoreInput) -> tuple[ToolCall, ...]:
    """The output's calls: as the backend parsed them, else parsed from its text."""
    return inp.calls if inp.calls is not None else parse_text_calls(inp.text)


def baseline_calls_of(inp: ScoreInput) -> tuple[ToolCall, ...] | None:
    """The baseline's calls for the same sample; None without a baseline output."""
    if inp.baseline_calls is not None:
        return inp.baseline_calls
    return None if inp.baseline_text is None else parse_text_calls(inp.baseline_text)


def _use(inp: ScoreInput) -> ToolUse | None:
    return inp.case.tool_use


def _na(metric: str, reason: str, *, higher_is_better: bool = True) -> list[Score]:
    return [Score(metric, None, higher_is_better=higher_is_better, details={"reason": reason})]


def _binary(metric: str, ok: bool, details: dict) -> list[Score]:
    return [Score(metric, 1.0 if ok else 0.0, passed=ok, details=details)]


def _shown(calls: Sequence[ToolCall]) -> list[dict]:
    """The calls for a score's details (and the review): name, arguments, and what broke."""
    return [{"name": c.name, "arguments": c.arguments, **({"error": c.error, "raw": c.raw[:500]} if c.error else {})} for c in calls]


def _args_errors(call: ToolCall, tool: Tool | None) -> list[dict]:
    if tool is None or call.arguments is None:
        return [{"path": "(root)", "message": call.error or f"unknown tool {call.name!r}"}]
    return schema_errors(call.arguments, tool.parameters)


# ---------------------------------------------------------------------------------------------
# argument matching


def _norm(value: object) -> object:
    """Arguments as `normalized` matching compares them: strings NFKC, case- and space-folded;
    numbers by value (2 == 2.0); null-valued keys dropped (an omitted optional argument)."""
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    return value


def _strict(value: object) -> object:
    """Exact matching: JSON equality, but `true` is not `1`."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return (type(value) is bool, value)


def arguments_match(expected: ExpectedCall, call: ToolCall, tool: Tool | None) -> bool:
    """Whether `call` is the expected call: same name, arguments equal under the expected match mode."""
    if call.name != expected.name or call.arguments is None:
        return False
    if expected.match == "schema" or expected.arguments is None:
        return not _args_errors(call, tool)
    if expected.match == "exact":
        return _strict(call.arguments) == _strict(expected.arguments)
    return _norm(call.arguments) == _norm(expected.arguments)


def _assign(use: ToolUse, calls: Sequence[ToolCall]) -> list[int | None]:
    """For each expected call, the index of the made call matching it (each made call used once)."""
    used: set[int] = set()
    out: list[int | None] = []
    for exp in use.expect.calls:
        hit = next((i for i, c in enumerate(calls) if i not in used and arguments_match(exp, c, use.tool(exp.name))), None)
        if hit is not None:
            used.add(hit)
        out.append(hit)
    return out


# ---------------------------------------------------------------------------------------------
# scorers


@scorer("tool.valid_call", scenarios=SCENARIO)
def valid_call(inp: ScoreInput) -> list[Score]:
    """1 when the output makes at least one call and every call parses and names an offered tool;
    None where no call is expected."""
    use = _use(inp)
    if use is None or not use.expect.calls:
        return _na("tool.valid_call", "the case expects no call")
    calls = calls_of(inp)
    problems = [{"index": i, "error": c.error or f"{c.name!r} is not an offered tool"} for i, c in enumerate(calls) if not c.ok or use.tool(c.name) is None]
    if not calls:
        problems = [{"index": None, "error": "no tool call"}]
    return _binary("tool.valid_call", not problems, {"calls": _shown(calls), "problems": problems})


@scorer("tool.name", scenarios=SCENARIO)
def name(inp: ScoreInput) -> list[Score]:
    """1 when the functions called are the expected ones (as a multiset: no missing, no extra call)."""
    use = _use(inp)
    if use is None or not use.expect.calls:
        return _na("tool.name", "the case expects no call")
    made = Counter(c.name for c in calls_of(inp))
    wanted: Counter[str | None] = Counter(e.name for e in use.expect.calls)
    missing, extra = sorted(str(n) for n in (wanted - made).elements()), sorted(str(n) for n in (made - wanted).elements())
    return _binary("tool.name", not missing and not extra, {"expected": sorted(wanted.elements()), "missing": missing, "extra": extra})


@scorer("tool.args_schema", scenarios=SCENARIO)
def args_schema(inp: ScoreInput) -> list[Score]:
    """1 when the output calls an expected tool and every call's arguments validate against its
    tool's parameters (an unparsed call fails); None where no call is expected."""
    use = _use(inp)
    if use is None or not use.expect.calls:
        return _na("tool.args_schema", "the case expects no call")
    calls = calls_of(inp)
    if not any(c.name in {e.name for e in use.expect.calls} for c in calls):
        return _binary("tool.args_schema", False, {"errors": [{"index": None, "message": "no call of an expected tool"}]})
    errors = [{"index": i, "name": c.name, **e} for i, c in enumerate(calls) for e in _args_errors(c, use.tool(c.name))]
    return _binary("tool.args_schema", not errors, {"errors": errors, "paths": sorted({e["path"] for e in errors})})


@scorer("tool.args_match", scenarios=SCENARIO)
def args_match(inp: ScoreInput) -> list[Score]:
    """The share of expected calls made with the expected arguments (by each call's match mode);
    passes when all are."""
    use = _use(inp)
    if use is None or not use.expect.calls:
        return _na("tool.args_match", "the case expects no call")
    calls = calls_of(inp)
    hits = _assign(use, calls)
    unmatched = [{"name": e.name, "arguments": e.arguments, "match": e.match} for e, h in zip(use.expect.calls, hits) if h is None]
    share = sum(h is not None for h in hits) / len(hits)
    return [Score("tool.args_match", share, passed=not unmatched, details={"unmatched": unmatched, "calls": _shown(calls)})]


@scorer("tool.no_forbidden", scenarios=SCENARIO)
def no_forbidden(inp: ScoreInput) -> list[Score]:
    """1 when no call (parsed or not, as far as it names a function) names a forbidden tool;
    None where the case forbids none."""
    use = _use(inp)
    if use is None or not use.expect.forbidden:
        return _na("tool.no_forbidden", "the case forbids no tool")
    called = [c.name for c in calls_of(inp) if c.name in use.expect.forbidden]
    return _binary("tool.no_forbidden", not called, {"forbidden": list(use.expect.forbidden), "called": called})


@scorer("tool.no_call_when_unneeded", scenarios=SCENARIO)
def no_call_when_unneeded(inp: ScoreInput) -> list[Score]:
    """1 when a case that needs no call gets none (a broken call counts as a call)."""
    use = _use(inp)
    if use is None or not use.expect.no_call:
        return _na("tool.no_call_when_unneeded", "the case may need a call")
    calls = calls_of(inp)
    return _binary("tool.no_call_when_unneeded", not calls, {"calls": _shown(calls)})


@scorer("tool.parallel_complete", scenarios=SCENARIO)
def parallel_complete(inp: ScoreInput) -> list[Score]:
    """The share of a parallel case's expected calls present (by name) in the one turn; passes when
    all are."""
    use = _use(inp)
    if use is None or not use.expect.parallel:
        return _na("tool.parallel_complete", "the case expects no parallel calls")
    made = Counter(c.name for c in calls_of(inp))
    wanted: Counter[str | None] = Counter(e.name for e in use.expect.calls)
    missing = sorted(str(n) for n in (wanted - made).elements())
    share = 1 - len(missing) / len(use.expect.calls)
    return [Score("tool.parallel_complete", share, passed=not missing, details={"missing": missing, "made": sorted(str(n) for n in made.elements())})]


@scorer("tool.uses_result", scenarios=SCENARIO)
def uses_result(inp: ScoreInput) -> list[Score]:
    """1 when the final answer makes no further call and carries every term of the tool result it
    must use (any synonym counts)."""
    use = _use(inp)
    if use is None or not use.expect.uses_result:
        return _na("tool.uses_result", "the case names no result terms")
    calls = calls_of(inp)
    prose = text_without_calls(inp.text)
    missing = [forms[0] for forms in use.expect.uses_result if not any(contains_term(prose, f) for f in forms)]
    details: dict = {"missing": missing}
    if calls:
        details["calls"] = _shown(calls)
    return _binary("tool.uses_result", not missing and not calls, details)


# ---------------------------------------------------------------------------------------------
# drift


def call_drift(base: Sequence[ToolCall], mine: Sequence[ToolCall], use: ToolUse | None) -> dict[str, list]:
    """Differences of `mine` from the baseline's calls, pairing calls by position: the count, the
    names, and each pair's arguments key by key (json_drift, with the tool's parameters as schema)."""
    out: dict[str, list] = {c: [] for c in CALL_DRIFT_CATEGORIES}
    if len(base) != len(mine):
        out["call_count_changes"].append({"baseline": len(base), "variant": len(mine)})
    for i, (b, m) in enumerate(zip(base, mine)):
        if b.name != m.name:
            out["name_changes"].append({"index": i, "baseline": b.name, "variant": m.name})
            continue
        if b.arguments is None or m.arguments is None:
            continue
        tool = use.tool(b.name) if use is not None else None
        for cat, items in json_drift(b.arguments, m.arguments, tool.parameters if tool else None).items():
            out[cat] += [{"call": i, **d} if isinstance(d, dict) else {"call": i, "path": d} for d in items]
    return out


@scorer("tool.drift", scenarios=SCENARIO)
def drift(inp: ScoreInput) -> list[Score]:
    """Count of differences from the baseline's calls (lower is better); None for the baseline
    itself and where neither side calls a tool."""
    base = baseline_calls_of(inp)
    if base is None:
        return _na("tool.drift", "no baseline output", higher_is_better=False)
    mine = calls_of(inp)
    if not base and not mine:
        return _na("tool.drift", "no calls on either side", higher_is_better=False)
    diffs = call_drift(base, mine, _use(inp))
    counts = {c: len(diffs[c]) for c in CALL_DRIFT_CATEGORIES}
    details = {"counts": counts, **{c: diffs[c] for c in CALL_DRIFT_CATEGORIES if diffs[c]}}
    return [Score("tool.drift", float(sum(counts.values())), higher_is_better=False, details=details)]
