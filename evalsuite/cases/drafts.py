"""Draft cases (`status: draft`): inferred from traffic and not yet confirmed by a person. They run and
are reported, but cannot fail a production gate; `evalsuite cases review` confirms, edits or drops them."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError, suggest
from ..hashing import sha256_json
from ..yamlio import atomic_write_text, dump_yaml, load_yaml
from .caseset import Case, load_caseset


def draft_note(n: int, stage: str, *, gated: bool, every: bool = False) -> str:
    """The line the gate and the report show about a run's drafts (`every`: the run has no other cases)."""
    if every:
        return f"every case of the run is a draft (status: draft): drafts are not gated at stage {stage}; confirm them first (evalsuite cases review)"
    if gated:
        return f"{n} draft case(s) (status: draft) count at stage {stage}; at production they cannot fail the gate (confirm them: evalsuite cases review)"
    return f"{n} draft case(s) (status: draft) ran but are not gated at stage {stage} (confirm them: evalsuite cases review)"


def draft_ids(text: str) -> frozenset[str]:
    """The ids of the draft cases in the text of a run's copy of its cases (`cases.jsonl`), read without
    validating them again: the gate asks for them on every judgment."""
    if '"draft"' not in text:
        return frozenset()
    records = (json.loads(line) for line in text.splitlines() if line.strip())
    return frozenset(r["id"] for r in records if isinstance(r, dict) and r.get("status") == "draft")


def origin_counts(cases: Iterable[Case]) -> dict[str, int]:
    """Cases by origin (traffic, review: kept failures) and drafts, for `evalsuite validate`."""
    counts: Counter = Counter()
    for c in cases:
        origin = c.raw.get("origin") or {}
        if c.origin == "traffic":
            counts["from traffic"] += 1
        elif c.origin == "review":
            counts[f"kept from review of run {origin.get('run', '?')}"] += 1
        if c.draft:
            counts["drafts (status: draft)"] += 1
    return dict(sorted(counts.items()))


DECISIONS = ("confirm", "edit", "drop", "skip")


def draft_entries(path: Path) -> list[dict[str, Any]]:
    """The draft cases of a case-set file, as written (defaults not applied)."""
    data, _ = load_yaml(path)
    if isinstance(data, dict) and data.get("kind") in ("documents", "glossary") and "cases" not in data:
        return []  # a resource file beside the case sets
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise EvalsuiteError(f"{path}: not a case set (expected a mapping with a `cases` list)")
    return [c for c in data["cases"] if isinstance(c, dict) and c.get("status") == "draft"]


def apply_review(path: Path, decisions: Mapping[str, tuple[str, dict | None]]) -> dict[str, int]:
    """Write a person's decisions back: case id -> (confirm | edit | drop | skip, the edited case for edit).
    A confirmed or edited case loses `status: draft`; a dropped one is removed. The file keeps its
    header comments, is checked as a case set before it replaces the old one, and its `version` is the
    new digest. Returns the count of each decision."""
    data, _ = load_yaml(path)
    counts: Counter = Counter()
    cases = []
    for case in data["cases"]:
        what, edited = decisions.get(case.get("id"), ("skip", None))
        if what not in DECISIONS:
            raise EvalsuiteError(f"case {case.get('id')}: unknown decision {what!r}{suggest(what, DECISIONS)}; one of: {', '.join(DECISIONS)}")
        counts[what] += 1
        if what == "drop":
            continue
        if what in ("confirm", "edit"):
            case = {k: v for k, v in (edited if what == "edit" and edited is not None else case).items() if k != "status"}
        cases.append(case)
    data["cases"] = cases
    data["version"] = sha256_json(cases)[:12]
    atomic_write_text(path, _header(path) + dump_yaml(data), check=lambda tmp: load_caseset(Path(tmp)))
    return dict(counts)


def _header(path: Path) -> str:
    """The file's leading comment lines (where it came from, whether it was scrubbed)."""
    lines = []
    for line in path.read_text("utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(f"{x}\n" for x in lines)
