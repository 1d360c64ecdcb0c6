"""Cases and case sets: loading YAML/JSONL, validation against the shipped schema, content digests.

A case-set file is YAML with a top-level `cases` list (or JSONL, one case per line). Resource files
(`kind: documents`, `kind: glossary`) hold shared documents and brand glossaries that case sets name.
Every problem is reported as `file:line: case <id>: field: message`, all of them, not only the first.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem, ValidationError
from ..hashing import sha256_json
from ..schemalib import jsonschema as _jsonschema
from ..yamlio import LineMap, load_jsonl, load_yaml
from .case import LONG_TAG, SIZE_TAG, Case, CaseSet, Document, Expect, Glossary

# re-exported: the case records are known by this module's name
from .case import GlossaryTerm as GlossaryTerm
from .case import Term as Term
from .case import context_size as context_size
from .case import long_case_counts as long_case_counts
from .case import suite_digest as suite_digest
from .tools import TOOL_KINDS, Tool, build_tool_use, json_schema_problem, library_tools
from .valid_memo import once_valid

if TYPE_CHECKING:
    import jsonschema

SCENARIOS = ("kb_qa", "code", "brand", "tool_use")
#: an imported run's scenarios are its tasks, named `<tool>:<task>` (evalsuite.importers; rubrics name them so)
IMPORTED_PREFIXES = ("lm-eval:", "inspect:")
KINDS: dict[str, tuple[str, ...]] = {
    "kb_qa": ("grounded", "ungrounded", "restricted", "multiturn"),
    "code": ("completion", "explanation", "refactor", "tests"),
    "brand": ("structured",),
    "tool_use": TOOL_KINDS,
}
CASE_SUFFIXES = (".yaml", ".yml", ".jsonl")


@cache
def _schema(name: str) -> dict:
    return json.loads(resources.files("evalsuite.schemas").joinpath(name).read_text("utf-8"))


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    from referencing import Registry, Resource

    jsonschema = _jsonschema()

    registry = Registry().with_resources(
        [(s["$id"], Resource.from_contents(s)) for s in (_schema("caseset.schema.json"), _schema("resources.schema.json"))]
        + [(n, Resource.from_contents(_schema(n))) for n in ("caseset.schema.json", "resources.schema.json")]
    )
    schema = _schema(name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry)


def case_schema() -> dict:
    """The JSON Schema of one case (as used for JSONL lines)."""
    base = _schema("caseset.schema.json")
    return {"$schema": base["$schema"], "$defs": base["$defs"], "$ref": "#/$defs/case"}


# ---------------------------------------------------------------------------------------------
# loading


def schema_problems(data: Any, schema_name: str, file: str, lines: LineMap, base_path: tuple = (), bad_cases: set | None = None) -> list[Problem]:
    """Every schema violation of `data` as a located problem (`file:line: case <id>: field: message`)."""
    problems = []
    jsonschema = _jsonschema()
    validator = _validator(schema_name)
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        # descend oneOf errors to the most specific one, so the message names the real field
        best = jsonschema.exceptions.best_match([err]) if err.context else err
        path = tuple(best.absolute_path)
        case_id = None
        if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
            cases = data.get("cases") if isinstance(data, dict) else None
            if isinstance(cases, list) and path[1] < len(cases) and isinstance(cases[path[1]], dict):
                case_id = cases[path[1]].get("id")
            field_path = path[2:]
            if bad_cases is not None:
                bad_cases.add(path[1])
        else:
            field_path = path
        field_name = ".".join(str(p) for p in field_path)
        if best.validator == "additionalProperties" and isinstance(best.instance, dict):
            allowed = set(best.schema.get("properties", {}) if isinstance(best.schema, dict) else {})
            for extra in sorted((k for k in best.instance if k not in allowed), key=repr):  # YAML keys may be of any type
                label = str(extra) or "''"
                name = f"{field_name}.{label}" if field_name else label
                problems.append(
                    Problem(file, lines.line_of(base_path + path + (extra,)), case_id, name, f"unknown field (allowed: {', '.join(sorted(allowed))})")
                )
            continue
        problems.append(Problem(file, lines.line_of(base_path + path), case_id, field_name or "(top level)", best.message))
    return problems


def _load_resource(path: Path, problems: list[Problem], cache: dict, loaded: tuple | None = None) -> dict | None:
    """A resource file (documents, glossary, tools), schema-checked, once per `cache`; `loaded`: its
    YAML and lines when the caller has parsed it already."""
    key = path.resolve()
    if key in cache:
        return cache[key]
    data, lines = loaded if loaded is not None else load_yaml(path)
    found = once_valid("resources", data, lambda: schema_problems(data, "resources.schema.json", str(path), lines))
    problems.extend(found)
    cache[key] = None if found else data
    return cache[key]


def _load_json_schema(path: Path, problems: list[Problem], file: str, line: int | None, case_id: str, cache: dict) -> dict | None:
    key = ("schema", path.resolve())
    if key in cache:
        return cache[key]
    result = None
    if not path.is_file():
        problems.append(Problem(file, line, case_id, "expect.schema", f"schema file not found: {path}"))
    else:
        try:
            schema = json.loads(path.read_text("utf-8"))
            found = json_schema_problem(schema)
            if found:
                problems.append(Problem(file, line, case_id, "expect.schema", f"{path}: not a valid JSON Schema: {found}"))
            else:
                result = schema
        except UnicodeDecodeError as exc:
            problems.append(Problem(file, line, case_id, "expect.schema", f"{path}: not UTF-8 text ({exc.reason} at offset {exc.start})"))
        except json.JSONDecodeError as exc:
            problems.append(Problem(file, line, case_id, "expect.schema", f"{path}: invalid JSON: {exc.msg} (line {exc.lineno})"))
    cache[key] = result
    return result


def _compile_check(code: str, label: str, file: str, line: int | None, case_id: str, problems: list[Problem]) -> None:
    try:
        compile(code, f"<{case_id}:{label}>", "exec")
    except SyntaxError as exc:
        problems.append(Problem(file, line, case_id, label, f"does not compile: {exc.msg} (line {exc.lineno})"))


def _is_resource(data: object) -> bool:
    return isinstance(data, dict) and data.get("kind") in ("documents", "glossary", "tools") and "cases" not in data


@dataclass
class _Loading:
    """What the steps of loading one case-set file share."""

    file: str
    lines: LineMap
    base: Path
    problems: list[Problem]
    cache: dict
    library: dict[str, Document] = field(default_factory=dict)
    glossary: Glossary | None = None
    tools: dict[str, Tool] = field(default_factory=dict)  #: the file's `tools:` library

    def add(self, path: tuple, case_id: str | None, fld: str, message: str) -> None:
        self.problems.append(Problem(self.file, self.lines.line_of(path), case_id, fld, message))


def load_caseset(path: str | Path, _cache: dict | None = None, loaded: tuple | None = None) -> CaseSet:
    """Load and validate one case-set file; raise ValidationError listing every problem. `loaded`:
    the file's YAML and lines when the caller has parsed it already."""
    path = Path(path)
    problems: list[Problem] = []
    bad_cases: set[int] = set()
    data, lines = _read_caseset(path, problems, bad_cases, loaded)
    # a case with schema problems is skipped below; the others are still checked, so one pass
    # reports every problem in the file
    if any(p.case_id is None for p in problems) or not isinstance(data.get("cases"), list):
        raise ValidationError(problems)
    ld = _Loading(str(path), lines, path.parent, problems, {} if _cache is None else _cache)
    _load_documents(ld, data.get("documents", []))
    if "glossary" in data:
        ld.glossary = _load_glossary(ld, data["glossary"])
    ld.tools = library_tools(_tool_items(ld, data.get("tools", [])), lambda p, f, m: ld.add(p, None, f, m))
    defaults = data.get("defaults", {})
    cases: list[Case] = []
    for i, own in enumerate(data["cases"]):
        if i in bad_cases:
            continue
        raw = {**defaults, **own}
        if "tags" in defaults and "tags" in own:
            raw["tags"] = list(dict.fromkeys(defaults["tags"] + own["tags"]))
        case = _build_case(ld, i, raw)
        if case is not None:
            cases.append(case)
    _check_duplicate_ids(ld, data["cases"])
    if problems:
        raise ValidationError(problems)
    return CaseSet(path=ld.file, name=data.get("name", path.stem), cases=tuple(cases), version=str(data["version"]) if "version" in data else None)


def _read_caseset(path: Path, problems: list[Problem], bad_cases: set[int], loaded: tuple | None = None) -> tuple[dict, LineMap]:
    """A case-set file (YAML, or JSONL: one case per line) and its schema problems."""
    file = str(path)
    if path.suffix == ".jsonl" and loaded is None:
        records, jl = load_jsonl(path)
        data: dict = {"cases": records}
        lines = LineMap({("cases",) + k: v for k, v in jl.items()})  # each JSONL line is one case: every field on that line
    else:
        data, lines = loaded if loaded is not None else load_yaml(path)
        if data is None or not isinstance(data, dict):
            raise ValidationError([Problem(file, 1, None, "(top level)", "expected a mapping with a `cases` list")])
    problems.extend(once_valid("caseset", data, lambda: schema_problems(data, "caseset.schema.json", file, lines, bad_cases=bad_cases)))
    return data, lines


def _load_documents(ld: _Loading, items: list) -> None:
    """The case set's documents, inline or from files of `kind: documents`, into `ld.library`."""
    for i, item in enumerate(items):
        if not isinstance(item, str):
            ld.library[item["id"]] = Document.parse(item)
            continue
        doc_path = ld.base / item
        if not doc_path.is_file():
            ld.add(("documents", i), None, f"documents[{i}]", f"document file not found: {doc_path}")
            continue
        res = _load_resource(doc_path, ld.problems, ld.cache)
        if res is None:
            continue
        if res.get("kind") != "documents":
            ld.add(("documents", i), None, f"documents[{i}]", f"{doc_path} is not a documents file")
            continue
        for d in res["documents"]:
            ld.library[d["id"]] = Document.parse(d)


def _tool_items(ld: _Loading, items: list) -> list[dict]:
    """The file's tool library: inline definitions, and those of files of `kind: tools`."""
    out: list[dict] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            out.append(item)
            continue
        path = ld.base / item
        res = _load_resource(path, ld.problems, ld.cache) if path.is_file() else None
        if res is None or res.get("kind") != "tools":
            ld.add(("tools", i), None, f"tools[{i}]", f"{path} is not a tools file" if path.is_file() else f"tools file not found: {path}")
            continue
        out.extend(res["tools"])
    return out


def _load_glossary(ld: _Loading, name: str) -> Glossary | None:
    gpath = ld.base / name
    if not gpath.is_file():
        ld.add(("glossary",), None, "glossary", f"glossary file not found: {gpath}")
        return None
    res = _load_resource(gpath, ld.problems, ld.cache)
    if res is None:
        return None
    if res.get("kind") != "glossary":
        ld.add(("glossary",), None, "glossary", f"{gpath} is not a glossary file")
        return None
    return Glossary.parse(res, digest=sha256_json(res))


def _build_case(ld: _Loading, i: int, raw: dict) -> Case | None:
    """One case with its defaults applied, checked against its scenario and kind; None when it cannot be built."""
    cid = raw["id"]
    at = functools.partial(_case_path, i)
    scenario, kind = raw.get("scenario"), raw.get("kind")
    if scenario is None or kind is None:
        missing = "scenario" if scenario is None else "kind"
        ld.add(at(), cid, missing, "missing (set it on the case or in `defaults`)")
        return None
    if kind not in KINDS[scenario]:
        ld.add(at("kind"), cid, "kind", f"{kind!r} is not a kind of scenario {scenario!r} (one of: {', '.join(KINDS[scenario])})")
    has_prompt, has_messages = "prompt" in raw, "messages" in raw
    if has_prompt == has_messages:
        ld.add(at(), cid, "prompt", "give exactly one of `prompt` or `messages`")
    last = raw["messages"][-1]["role"] if has_messages else "user"
    if last != "user" and not (scenario == "tool_use" and last == "tool"):
        ld.add(at("messages"), cid, "messages", "the last message must be from the user" + (" or a tool" if scenario == "tool_use" else ""))
    context = _case_context(ld, i, cid, raw.get("context", []))
    json_schema = _check_expect(ld, i, raw, [d.id for d in context])
    if (raw.get("perturbation_of") is None) != (raw.get("perturbation") is None):
        ld.add(at(), cid, "perturbation", "`perturbation_of` and `perturbation` go together")
    tags = raw.get("tags", [])
    if LONG_TAG in tags and sum(bool(SIZE_TAG.fullmatch(t)) for t in tags) != 1:
        ld.add(at("tags"), cid, "tags", f"a case tagged `{LONG_TAG}` names its context size with exactly one `ctx-<N>k` tag (e.g. ctx-4k)")
    tool_use = build_tool_use(raw, ld.tools, lambda p, f, m: ld.add(at(*p), cid, f, m))
    line = ld.lines.line_of(at())
    return Case.build(raw, context=tuple(context), json_schema=json_schema, glossary=ld.glossary, source=ld.file, line=line, tool_use=tool_use)


def _case_path(i: int, *p: str | int) -> tuple:
    return ("cases", i) + p


def _case_context(ld: _Loading, i: int, cid: str, items: list) -> list[Document]:
    """The case's context documents: ids from the case set's library, or inline documents."""
    context: list[Document] = []
    for j, item in enumerate(items):
        if not isinstance(item, str):
            context.append(Document.parse(item))
        elif item in ld.library:
            context.append(ld.library[item])
        else:
            ld.add(_case_path(i, "context", j), cid, f"context[{j}]", f"unknown document id {item!r}")
    ids = [d.id for d in context]
    if len(set(ids)) != len(ids):
        ld.add(_case_path(i, "context"), cid, "context", "a document appears twice")
    return context


def _check_expect(ld: _Loading, i: int, raw: dict, ctx_ids: list[str]) -> dict | None:
    """The case's `expect:` checked against its context, scenario and kind; its JSON Schema, if any."""
    cid, scenario, kind = raw["id"], raw["scenario"], raw["kind"]
    at = functools.partial(_case_path, i)
    expect_raw = raw.get("expect", {})
    expect = Expect.parse(expect_raw)
    for j, cit in enumerate(expect.citations):
        if cit not in ctx_ids:
            ld.add(at("expect", "citations", j), cid, f"expect.citations[{j}]", f"gold citation {cit!r} is not in the case's context")
    json_schema = None
    if expect.schema:
        json_schema = _load_json_schema(ld.base / expect.schema, ld.problems, ld.file, ld.lines.line_of(at("expect", "schema")), cid, ld.cache)
    if scenario == "brand" and kind == "structured" and not expect.schema:
        ld.add(at("expect"), cid, "expect.schema", "a structured brand case must name a JSON Schema")
    for label in ("tests", "reference"):
        if expect_raw.get(label) is not None:
            _compile_check(expect_raw[label], f"expect.{label}", ld.file, ld.lines.line_of(at("expect", label)), cid, ld.problems)
    for j, code in enumerate(expect.mutants):
        _compile_check(code, f"expect.mutants[{j}]", ld.file, ld.lines.line_of(at("expect", "mutants", j)), cid, ld.problems)
    if scenario == "code" and kind in ("completion", "refactor", "tests") and not expect.tests:
        ld.add(at("expect"), cid, "expect.tests", f"a {kind} case needs unit tests")
    if scenario == "code" and kind == "tests" and not expect.reference:
        ld.add(at("expect"), cid, "expect.reference", "a test-writing case needs the reference implementation")
    return json_schema


def _check_duplicate_ids(ld: _Loading, raw_cases: list) -> None:
    first_line: dict[str, int | None] = {}
    for i, raw in enumerate(raw_cases):
        cid = raw.get("id")
        if not isinstance(cid, str):  # already reported by the schema check
            continue
        if cid in first_line:
            ld.add(("cases", i, "id"), cid, "id", f"duplicate case id (first defined at line {first_line[cid]})")
        else:
            first_line[cid] = ld.lines.line_of(("cases", i, "id"))


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Case-set files under the given files, directories or globs (sorted, resources skipped later)."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in CASE_SUFFIXES and f.is_file()))
        elif any(ch in str(p) for ch in "*?["):
            import glob  # Path().glob refuses absolute patterns, and suites resolve theirs to absolute paths

            out.extend(sorted(Path(x) for x in glob.glob(str(p), recursive=True)))
        elif p.exists():
            out.append(p)
        else:
            raise ValidationError([Problem(str(p), None, None, "path", "no such file or directory")])
    return list(dict.fromkeys(out))


def load_cases(paths: Iterable[str | Path]) -> list[CaseSet]:
    """Load every case set under `paths`; raise one ValidationError with all problems of all files.

    Checks across files: case ids unique, `perturbation_of` names an existing case.
    """
    problems: list[Problem] = []
    casesets: list[CaseSet] = []
    cache: dict = {}
    for f in discover(paths):
        loaded = None
        if f.suffix in (".yaml", ".yml"):
            try:
                loaded = load_yaml(f)  # parsed once: a resource or a case set
            except ValidationError as exc:
                problems.extend(exc.problems)
                continue
            if _is_resource(loaded[0]):
                try:
                    _load_resource(f, problems, cache, loaded)
                except ValidationError as exc:
                    problems.extend(exc.problems)
                continue
        try:
            casesets.append(load_caseset(f, cache, loaded))
        except ValidationError as exc:
            problems.extend(exc.problems)
    seen: dict[str, Case] = {}
    for cs in casesets:
        for c in cs.cases:
            if c.id in seen:
                first = seen[c.id]
                problems.append(Problem(c.source, c.line, c.id, "id", f"duplicate case id (first defined at {first.source}:{first.line})"))
            else:
                seen[c.id] = c
    for cs in casesets:
        for c in cs.cases:
            if c.perturbation_of and c.perturbation_of not in seen:
                problems.append(Problem(c.source, c.line, c.id, "perturbation_of", f"unknown case id {c.perturbation_of!r}"))
    if problems:
        raise ValidationError(problems)
    return casesets


def all_cases(casesets: Iterable[CaseSet]) -> list[Case]:
    return [c for cs in casesets for c in cs.cases]
