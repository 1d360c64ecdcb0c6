"""Failures kept: a reviewed output turned into a fixed case (`evalsuite review keep ITEM`, and the
rubric's `review: {keep: regression}`).

The kept case holds the request as it was asked (messages, system, context documents inlined, its
JSON Schema copied beside the case set), the baseline's answer as its reference, and where it came
from: run, variant, review item, verdict, reviewer and note. The kept set is an ordinary case-set file
(`casesets/kept/kept.yaml`) whose `version` is its cases' digest, so a suite whose case sets include it
runs it next time, and the run's case digest shows that the case sets changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EvalsuiteError
from ..hashing import sha256_json
from ..yamlio import atomic_write_text, dump_yaml, load_yaml

if TYPE_CHECKING:
    from ..cases.caseset import Case

DEFAULT_KEPT_DIR = Path("casesets/kept")
KEPT_FILE = "kept.yaml"
_HEADER = "# failures kept from review (`evalsuite review keep`, or the rubric's `review: {keep: regression}`); edit freely, it is an ordinary case set\n"
_DROPPED = ("perturbation_of", "perturbation", "status")  #: a kept case stands alone, and a person has looked at it


@dataclass(frozen=True, kw_only=True)
class Kept:
    """One kept case: its id, the case-set file it is in, and whether it replaced an earlier copy."""

    case_id: str
    path: Path
    replaced: bool
    version: str  #: the kept set's digest after the change


def kept_case(case: Case, item: Mapping[str, Any], verdict: Mapping[str, Any] | None, schema_ref: str | None) -> dict[str, Any]:
    """The case to keep: the request as asked, the baseline's answer as reference, its origin."""
    raw = {k: v for k, v in case.raw.items() if k not in _DROPPED}
    raw["id"] = f"kept-{item['id']}-{case.id}"
    raw["scenario"], raw["kind"], raw["lang"] = case.scenario, case.kind, case.lang
    if case.context:
        raw["context"] = [d.to_raw() for d in case.context]
    expect = {k: v for k, v in dict(raw.get("expect") or {}).items() if k != "schema_inline"}
    if item.get("baseline_output"):
        expect["reference_answer"] = item["baseline_output"]
    if schema_ref is not None:
        expect["schema"] = schema_ref
    raw["expect"] = expect
    raw["tags"] = list(dict.fromkeys([*raw.get("tags", []), "kept"]))
    raw["origin"] = _origin(case, item, verdict)
    return raw


def _origin(case: Case, item: Mapping[str, Any], verdict: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "review", "run": str(item["run_id"]), "variant": str(item["variant"]), "item": int(item["id"]), "case": case.id}
    if verdict:
        out["verdict"] = str(verdict.get("verdict") or "")
        out["reviewer"] = str(verdict.get("reviewer") or "")
        if verdict.get("note"):
            out["note"] = str(verdict["note"])
    return out


def last_verdict(history: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The item's latest standing verdict (retractions and their targets left out)."""
    standing = [h for h in history if h.get("verdict") not in (None, "retracted") and not h.get("retracted")]
    return standing[-1] if standing else None


def keep_case(case: Case, item: Mapping[str, Any], history: list[Mapping[str, Any]], into: Path = DEFAULT_KEPT_DIR) -> Kept:
    """Write the reviewed output's case into the kept set under `into` (created on first use)."""
    into.mkdir(parents=True, exist_ok=True)
    schema_ref = _write_schema(into, case.json_schema) if case.json_schema is not None else None
    new = kept_case(case, item, last_verdict(history), schema_ref)
    path = into / KEPT_FILE
    data = _read(path)
    cases = [c for c in data["cases"] if c.get("id") != new["id"]]
    replaced = len(cases) != len(data["cases"])
    cases.append(new)
    data["cases"] = cases
    data["version"] = sha256_json(cases)[:12]
    atomic_write_text(path, _HEADER + dump_yaml(data))
    return Kept(case_id=new["id"], path=path, replaced=replaced, version=data["version"])


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"schema_version": 1, "name": "kept", "description": "Reviewed outputs kept as fixed cases.", "version": "", "cases": []}
    data, _ = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise EvalsuiteError(f"{path}: not a case set (expected a mapping with a `cases` list)")
    return data


def _write_schema(into: Path, schema: dict) -> str:
    name = f"schemas/{sha256_json(schema)[:12]}.json"
    (into / "schemas").mkdir(exist_ok=True)
    atomic_write_text(into / name, json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    return name
