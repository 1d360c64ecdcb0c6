"""Draft case sets on disk: one YAML file per scenario in the shipped case-set format, every case
`status: draft`, JSON Schemas beside them, a header that says where they came from and whether they
were scrubbed."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import EvalsuiteError
from ...hashing import sha256_json
from ...yamlio import atomic_write_text, dump_yaml
from .records import TrafficRequest

SCRUBBED = "scrubbed before writing: e-mail addresses, phone numbers, card numbers, IP addresses, API keys and tokens replaced by typed placeholders"
NOT_SCRUBBED = "NOT SCRUBBED (--no-scrub): may hold e-mail addresses, phone numbers, card numbers, API keys and tokens as logged"
DRAFT = "every case is `status: draft`: inferred, to be confirmed by a person (`evalsuite cases review`)"
GLOSSARY = "glossary.yaml"


@dataclass(frozen=True, kw_only=True)
class Draft:
    """One case to write (scrubbed already when scrubbing is on) and its JSON Schema, if any."""

    scenario: str
    case: dict[str, Any]
    schema: dict | None = None


def case_id(scenario: str, key: str) -> str:
    return f"traffic-{scenario}-{key[:12]}"


def draft_case(req: TrafficRequest, *, scenario: str, kind: str, lang: str, key: str, fields: dict) -> dict[str, Any]:
    """The case as written: id, draft status, where it came from, then the inferred fields."""
    origin = {"kind": "traffic", "source": f"{req.source}:{req.line}"}
    if req.request_id:
        origin["request_id"] = req.request_id
    return {"id": case_id(scenario, key), "status": "draft", "origin": origin, "kind": kind, "lang": lang, **fields}


def write_casesets(drafts: Sequence[Draft], out: Path, *, scrubbed: bool, glossary: Path | None, sources: Sequence[str], overwrite: bool = False) -> list[Path]:
    """One file per scenario under `out` (schemas under `out/schemas/`); the paths written. An existing
    file is replaced only with `overwrite` (a person's review of its drafts would be lost)."""
    scenarios = sorted({d.scenario for d in drafts})
    taken = [str(out / f"{s}.yaml") for s in scenarios if (out / f"{s}.yaml").exists()]
    if taken and not overwrite:
        raise EvalsuiteError(f"{', '.join(taken)}: already there (reviewed drafts would be lost); choose another --out, or --force to replace")
    out.mkdir(parents=True, exist_ok=True)
    by_scenario: dict[str, list[dict]] = defaultdict(list)
    for d in drafts:
        case = dict(d.case)
        if d.schema is not None:
            case["expect"] = dict(case.get("expect", {}), schema=_write_schema(out, d.schema))
        by_scenario[d.scenario].append(case)
    if glossary is not None and "brand" in by_scenario:
        shutil.copyfile(glossary, out / GLOSSARY)
    written = []
    for scenario, cases in sorted(by_scenario.items()):
        path = out / f"{scenario}.yaml"
        data = _caseset(scenario, cases, scrubbed=scrubbed, glossary=glossary is not None and scenario == "brand")
        atomic_write_text(path, _header(sources, scrubbed) + dump_yaml(data))
        written.append(path)
    return written


def _write_schema(out: Path, schema: dict) -> str:
    name = f"schemas/{sha256_json(schema)[:12]}.json"
    (out / "schemas").mkdir(exist_ok=True)
    atomic_write_text(out / name, json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    return name


def _caseset(scenario: str, cases: list[dict], *, scrubbed: bool, glossary: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "name": f"traffic-{scenario}",
        "description": f"Drafts from logged traffic; {SCRUBBED if scrubbed else NOT_SCRUBBED}.",
        "version": sha256_json(cases)[:12],
        "defaults": {"scenario": scenario, "tags": ["traffic"]},
    }
    if glossary:
        data["glossary"] = GLOSSARY
    data["cases"] = cases
    return data


def _header(sources: Sequence[str], scrubbed: bool) -> str:
    lines = ["# written by `evalsuite cases from-traffic` from: " + ", ".join(sources), "# " + (SCRUBBED if scrubbed else NOT_SCRUBBED), "# " + DRAFT]
    return "\n".join(lines) + "\n"
