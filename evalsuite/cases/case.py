"""A case and what it is made of (its expectations, context documents, glossary, terms), a case set,
and their content digests; loading and validating them is evalsuite.cases.caseset's."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..hashing import sha256_json
from .tools import Tool, ToolUse, build_tool_use

LONG_TAG = "long"  #: the tag of long-context cases; each also names its size with one `ctx-<N>k` tag
SIZE_TAG = re.compile(r"ctx-(\d+)k")


@dataclass(frozen=True)
class Term:
    """A required term or concept; any synonym counts as the term."""

    term: str
    synonyms: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> Term:
        if isinstance(raw, str):
            return cls(raw)
        return cls(raw["term"], tuple(raw.get("synonyms", ())))

    def to_raw(self) -> str | dict[str, str | list[str]]:
        return {"term": self.term, "synonyms": list(self.synonyms)} if self.synonyms else self.term


@dataclass(frozen=True)
class Document:
    """A context document as a retriever would return it."""

    id: str
    text: str
    title: str = ""
    access: str = "public"
    roles: tuple[str, ...] = ()
    canaries: tuple[str, ...] = ()
    lang: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: dict) -> Document:
        return cls(
            id=raw["id"],
            text=raw["text"],
            title=raw.get("title", ""),
            access=raw.get("access", "public"),
            roles=tuple(raw.get("roles", ())),
            canaries=tuple(raw.get("canaries", ())),
            lang=raw.get("lang"),
            tags=tuple(raw.get("tags", ())),
        )

    def to_raw(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "title": self.title, "text": self.text, "access": self.access}
        if self.roles:
            out["roles"] = list(self.roles)
        if self.canaries:
            out["canaries"] = list(self.canaries)
        if self.lang:
            out["lang"] = self.lang
        if self.tags:
            out["tags"] = list(self.tags)
        return out

    def readable_by(self, role: str | None) -> bool:
        """Whether a user with `role` may see this document."""
        if self.access != "restricted":
            return True
        return role is not None and role in self.roles


@dataclass(frozen=True)
class GlossaryTerm:
    """A brand term: its preferred form, accepted synonyms and forbidden variants."""

    term: str
    lang: str | None = None
    synonyms: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Glossary:
    """A brand glossary (preferred terms, forbidden variants, tone words)."""

    name: str
    terms: tuple[GlossaryTerm, ...]
    tone_preferred: tuple[str, ...] = ()
    tone_avoid: tuple[str, ...] = ()
    company: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, raw: dict, digest: str = "") -> Glossary:
        tone = raw.get("tone", {})
        return cls(
            name=raw.get("name", ""),
            terms=tuple(
                GlossaryTerm(t["term"], t.get("lang"), tuple(t.get("synonyms", ())), tuple(t.get("forbidden", ())), t.get("note", "")) for t in raw["terms"]
            ),
            tone_preferred=tuple(tone.get("preferred", ())),
            tone_avoid=tuple(tone.get("avoid", ())),
            company=raw.get("company", ""),
            digest=digest,
        )

    def lookup(self, term: str) -> GlossaryTerm | None:
        for t in self.terms:
            if t.term.casefold() == term.casefold():
                return t
        return None


@dataclass(frozen=True)
class Expect:
    """What a good output does; each scorer reads the fields it knows."""

    required_terms: tuple[Term, ...] = ()
    forbidden_terms: tuple[str, ...] = ()
    schema: str | None = None
    citations: tuple[str, ...] = ()
    must_abstain: bool = False
    must_refuse: bool = False
    canaries: tuple[str, ...] = ()
    answer_keywords: tuple[str, ...] = ()
    entry_point: str | None = None
    isolation: str = "process"  #: "process" (the program in its own interpreter) or "shared" (forgeable; docs/security.md)
    tests: str | None = None
    reference: str | None = None
    mutants: tuple[str, ...] = ()
    concepts: tuple[Term, ...] = ()
    ast_check: dict | None = None
    consistent_with: tuple[str, ...] = ()
    reference_answer: str | None = None

    @classmethod
    def parse(cls, raw: dict) -> Expect:
        return cls(
            required_terms=tuple(Term.parse(t) for t in raw.get("required_terms", ())),
            forbidden_terms=tuple(raw.get("forbidden_terms", ())),
            schema=raw.get("schema"),
            citations=tuple(raw.get("citations", ())),
            must_abstain=bool(raw.get("must_abstain", False)),
            must_refuse=bool(raw.get("must_refuse", False)),
            canaries=tuple(raw.get("canaries", ())),
            answer_keywords=tuple(raw.get("answer_keywords", ())),
            entry_point=raw.get("entry_point"),
            isolation=raw.get("isolation", "process"),
            tests=raw.get("tests"),
            reference=raw.get("reference"),
            mutants=tuple(raw.get("mutants", ())),
            concepts=tuple(Term.parse(t) for t in raw.get("concepts", ())),
            ast_check=raw.get("ast_check"),
            consistent_with=tuple(raw.get("consistent_with", ())),
            reference_answer=raw.get("reference_answer"),
        )


@dataclass(frozen=True, eq=False)
class Case:
    """One fixed test case; resolved (documents inlined, schema and glossary loaded) at load time."""

    id: str
    scenario: str
    kind: str
    lang: str = "en"
    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] = ()
    system: str | None = None
    context: tuple[Document, ...] = ()
    user_role: str | None = None
    expect: Expect = field(default_factory=Expect)
    tags: tuple[str, ...] = ()
    title: str = ""
    perturbation_of: str | None = None
    perturbation: str | None = None
    json_schema: dict | None = None  #: the loaded `expect.schema`, so scorers read no files
    glossary: Glossary | None = None  #: the case set's glossary (brand), if any
    source: str = ""  #: file the case came from
    line: int | None = None  #: line of the case in that file
    raw: dict = field(default_factory=dict)  #: the case as written (after defaults), for lossless export
    tool_use: ToolUse | None = None  #: tools, earlier calls and tool expectations (scenario tool_use)

    @classmethod
    def build(
        cls,
        raw: dict,
        *,
        context: tuple[Document, ...],
        json_schema: dict | None,
        glossary: Glossary | None,
        source: str,
        line: int | None,
        tool_use: ToolUse | None = None,
    ) -> Case:
        """A case from its written fields (`raw`, defaults applied) and its resolved parts (its tool
        use, when not given, from inline tools: how an exported case comes back)."""
        if tool_use is None and raw.get("scenario") == "tool_use":
            tool_use = build_tool_use(raw, {}, lambda *_: None)
        return cls(
            id=raw["id"],
            scenario=raw["scenario"],
            kind=raw["kind"],
            lang=raw.get("lang", "en"),
            prompt=raw.get("prompt"),
            messages=tuple((m["role"], m.get("content") or "") for m in raw.get("messages", ())),
            system=raw.get("system"),
            context=context,
            user_role=raw.get("user_role"),
            expect=Expect.parse(raw.get("expect", {})),
            tags=tuple(raw.get("tags", ())),
            title=raw.get("title", ""),
            perturbation_of=raw.get("perturbation_of"),
            perturbation=raw.get("perturbation"),
            json_schema=json_schema,
            glossary=glossary,
            source=source,
            line=line,
            raw=raw,
            tool_use=tool_use,
        )

    @property
    def draft(self) -> bool:
        """Inferred and not yet confirmed (`status: draft`): it runs and the report marks it, but it cannot fail a production gate."""
        return self.raw.get("status") == "draft"

    @property
    def origin(self) -> str | None:
        """Where the case came from (`traffic` or `review`), None for a case written by hand."""
        got = self.raw.get("origin")
        return got.get("kind") if isinstance(got, dict) else None

    def to_dict(self) -> dict:
        """The resolved case as plain data: context documents inlined, schema embedded."""
        out = dict(self.raw)
        out["scenario"], out["kind"], out["lang"] = self.scenario, self.kind, self.lang
        if self.context:
            out["context"] = [d.to_raw() for d in self.context]
        if self.json_schema is not None:
            out["expect"] = dict(out.get("expect", {}))
            out["expect"]["schema_inline"] = self.json_schema
        if self.user_role:
            out["user_role"] = self.user_role
        if self.tool_use is not None:  # inline, so a changed library tool changes the digest
            out["tools"] = [_tool_raw(t) for t in self.tool_use.tools]
        return out

    def digest(self) -> str:
        """Content hash of everything that can change what the case asks or how it is scored
        (computed once per case: a run asks for it per case, per variant and per score pass)."""
        known = self.__dict__.get("_digest")
        if known is None:
            payload = self.to_dict()
            if self.glossary is not None:
                payload = dict(payload, _glossary=self.glossary.digest)
            known = sha256_json(payload)
            object.__setattr__(self, "_digest", known)  # a frozen dataclass's memo, outside its fields
        return known


def _tool_raw(tool: Tool) -> dict:
    out = tool.to_openai()
    if tool.roles:
        out["roles"] = list(tool.roles)
    return out


@dataclass(frozen=True, eq=False)
class CaseSet:
    """The cases of one file."""

    path: str
    name: str
    cases: tuple[Case, ...]
    version: str | None = None

    def digest(self) -> str:
        return sha256_json([c.digest() for c in self.cases])


def context_size(case: Case) -> str | None:
    """The size bucket of a long-context case (`"7k"` from its `ctx-7k` tag); None for other cases."""
    if LONG_TAG not in case.tags:
        return None
    sizes = [t[4:] for t in case.tags if SIZE_TAG.fullmatch(t)]
    return sizes[0] if len(sizes) == 1 else None


def long_case_counts(cases: Iterable[Case]) -> dict[tuple[str, str, str], int]:
    """Long-context cases per (scenario, kind, size), sizes in token order (`evalsuite validate` prints them)."""
    counts: Counter = Counter((c.scenario, c.kind, context_size(c)) for c in cases if LONG_TAG in c.tags)
    order = sorted(counts, key=lambda k: (k[0], k[1], int(k[2][:-1]) if k[2] else 0))
    return {(s, k, z or "?"): counts[(s, k, z)] for s, k, z in order}


def suite_digest(cases: Iterable[Case]) -> str:
    """Digest of a set of cases, independent of file order."""
    return sha256_json(sorted((c.id, c.digest()) for c in cases))
