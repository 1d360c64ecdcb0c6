"""What a reviewer needs beside two outputs to judge them, stored with the item when it is flagged.

A queue outlives its runs (it is copied, shared, opened where the run directory is not), so an item
carries its own context, as JSON: what was asked (`brief`: system prompt, conversation or prompt,
the user's role, the expected answer or behaviour, the JSON schema, the unit tests), the KB
documents with the passages each side cites (`documents`), the JSON key by key (`json`), the
glossary terms each side kept or dropped (`terms`), the documents a trimming variant left out
(`documents.dropped`), the unit-test results of both sides (`code`), the tool calls side by side
with the called tool's schema (`tools`), and each side's failed checks in words (`checks`). Built
from the evidence functions the report uses (evalsuite.scoring.evidence); items flagged before
queue schema 3 have none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..scoring.evidence import CLIP, case_brief, citations_evidence, code_evidence, json_drift_rows, terms_evidence, tool_evidence

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..run.store import ScoreRecord


def _failed(recs: Mapping[str, ScoreRecord]) -> list[dict]:
    """A side's failed pass/fail checks with the reason its scorer gave, where it gave one."""
    out = []
    for m, r in sorted(recs.items()):
        if r.passed is False:
            det = r.details or {}
            why = det.get("reason") or det.get("error") or det.get("missing") or det.get("errors") or det.get("found") or ""
            out.append({"metric": m, "why": why if isinstance(why, str) else str(why)[:300]})
    return out


def item_context(
    case: Case,
    baseline_text: str | None,
    variant_text: str | None,
    base_recs: Mapping[str, ScoreRecord],
    var_recs: Mapping[str, ScoreRecord],
    *,
    dropped: Sequence[str] = (),
) -> dict:
    """The item's context (see the module docstring): plain data, stored as JSON. `dropped`: the
    documents the variant's context trimming left out of its prompt."""
    ctx: dict[str, object] = {"brief": case_brief(case)}
    docs = citations_evidence(case, baseline_text, variant_text, max_text=CLIP, dropped=dropped)
    if docs is not None:
        ctx["documents"] = docs
    if case.json_schema or case.scenario == "brand" or "json.valid" in var_recs:
        ctx["json"] = json_drift_rows(baseline_text, variant_text)
    terms = terms_evidence(case, baseline_text, variant_text)
    if terms is not None:
        ctx["terms"] = terms
    tools = tool_evidence(case, baseline_text, variant_text)
    if tools is not None:
        ctx["tools"] = tools
    if case.scenario == "code" or case.expect.tests:
        ctx["code"] = code_evidence(case, {"baseline": base_recs, "variant": var_recs})
    ctx["checks"] = {"baseline": _failed(base_recs), "variant": _failed(var_recs)}
    return ctx
