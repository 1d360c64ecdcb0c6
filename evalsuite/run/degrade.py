"""Planted regressions: a backend wrapper that damages a chosen share of outputs, reproducibly.

A variant with `degrade: {kind: drop_citations, rate: 0.1, seed: 0, scenarios: [kb_qa]}` runs
the wrapped backend and then damages the outputs of about `rate` of the eligible cases. It answers
"would the gate notice?": plant a known regression and check that the gate fails, naming the rule.

Kinds, and what the scorers then see:

- `drop_citations`  `[doc-id]` markers removed                  -> citations.recall / precision
- `corrupt_json`    the JSON truncated mid-object               -> json.valid / json.parsed
- `forbidden_terms` glossary terms swapped for forbidden variants -> terminology.forbidden / retention
- `break_code`      a `raise` inserted at the top of the function -> code.pass
- `leak_canary`     a restricted document's canary appended      -> grounding.leak

Which cases: the eligible cases (those the damage applies to, in `scenarios` if given) are ranked
by a seeded hash of their id, and the first `round(rate * n)` are damaged (every sample of a
damaged case), so the share is exact and the choice reproducible. The wrapper needs the cases for
that, and for the glossary and canaries: `wrap_backend(backend, variant, cases)` (the runner passes
them). Without cases it still works from the requests alone: a case is then damaged when its hashed
id falls under `rate`, and glossary terms and restricted documents are read from the rendered
system prompt.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypedDict

from ..backends.base import Backend, Generation, Request
from ..cases.caseset import Case
from ..cases.suite import Variant
from ..errors import EvalsuiteError, suggest
from ..hashing import sha256_json

KINDS = ("drop_citations", "corrupt_json", "forbidden_terms", "break_code", "leak_canary")
_SPEC_KEYS = {"kind", "rate", "seed", "scenarios"}
_DEFAULT_SCENARIO = {"drop_citations": "kb_qa", "corrupt_json": "brand", "forbidden_terms": "brand", "break_code": "code", "leak_canary": "kb_qa"}


def parse_spec(spec: Mapping | None, where: str = "degrade") -> dict:
    """Validate a `degrade` mapping; return it with defaults filled in."""
    if not isinstance(spec, Mapping):
        raise EvalsuiteError(f"{where}: expected a mapping with kind, rate, seed, scenarios")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise EvalsuiteError(f"{where}: unknown field(s) {sorted(unknown)}; known: {', '.join(sorted(_SPEC_KEYS))}")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise EvalsuiteError(f"{where}.kind: unknown kind {kind!r}{suggest(kind, KINDS)}; known: {', '.join(KINDS)}")
    rate = spec.get("rate", 0.1)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise EvalsuiteError(f"{where}.rate: expected a share between 0 and 1, got {rate!r}")
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EvalsuiteError(f"{where}.seed: expected an integer, got {seed!r}")
    scen = spec.get("scenarios")
    if scen is None:
        scen = [_DEFAULT_SCENARIO[kind]]
    if isinstance(scen, str):
        scen = [scen]
    return {"kind": kind, "rate": float(rate), "seed": seed, "scenarios": list(scen)}


def _unit(seed: int, case_id: str) -> float:
    """A uniform number in [0, 1) from (seed, case id): the damage lottery, reproducible anywhere."""
    h = hashlib.sha256(f"evalsuite-degrade\x1f{seed}\x1f{case_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


# ---------------------------------------------------------------------------------------------
# damage functions: (text, hints) -> damaged text


class Hints(TypedDict, total=False):
    """What a damage function may know about the case (`hints_from_case`); a test may give only some."""

    scenario: str
    term_pairs: list[tuple[str, str]]  #: (a preferred glossary form, the forbidden variant it becomes)
    forbidden: list[str]  #: the case's forbidden terms
    canaries: list[str]  #: canaries of the case and of the documents its user may not read
    restricted_text: str  #: the first line of the first such document
    entry_point: str | None
    has_schema: bool
    has_citations: bool
    has_tests: bool


_CITE = re.compile(r"\s*(?:\[[^\[\]\n]{1,80}\]|【[^【】\n]{1,80}】|\((?:sources?|来源|出处)\s*[:：][^()\n]{1,80}\))")


def drop_citations(text: str, hints: Hints) -> str:
    """Remove citation markers ([doc-id], [1], 【1】, (source: X))."""
    return _CITE.sub("", text)


def corrupt_json(text: str, hints: Hints) -> str:
    """Truncate the output in the middle of its first JSON object, so it no longer parses."""
    start = text.find("{")
    if start < 0:
        return text[: max(1, len(text) // 2)]
    body = text[start:]
    cut = max(2, len(body) // 2)
    broken = body[:cut].rstrip("}] \n")
    return text[:start] + broken + ', "'  # a dangling key: never valid JSON


def forbidden_terms(text: str, hints: Hints) -> str:
    """Swap each preferred glossary term found in the text for one of its forbidden variants."""
    pairs: Sequence[tuple[str, str]] = hints.get("term_pairs", ())
    out, swapped = text, False
    for preferred, forbidden in sorted(pairs, key=lambda p: -len(p[0])):
        if preferred and preferred in out:
            out = out.replace(preferred, forbidden)
            swapped = True
    if swapped:
        return out
    extra = next(iter(hints.get("forbidden", ())), None) or (pairs[0][1] if pairs else None)
    if extra is None:
        return text
    # nothing to swap: put a forbidden variant into the first JSON string value, else append it
    m = re.search(r'(:\s*")', out)
    if m:
        return out[: m.end()] + extra + " " + out[m.end() :]
    return out + " " + extra


_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async\s+)?def\s+(?P<name>\w+)\s*\(.*?\)\s*(?:->[^:]*)?:[ \t]*(?:#.*)?$", re.M | re.S)


def break_code(text: str, hints: Hints) -> str:
    """Insert `raise RuntimeError(...)` as the first statement of the function under test (or of
    every function, when the entry point is unknown), inside the output's code."""
    entry = hints.get("entry_point")
    out = text
    for m in reversed(list(_DEF.finditer(text))):
        if entry and m.group("name") != entry and any(x.group("name") == entry for x in _DEF.finditer(text)):
            continue
        # the body's indentation: that of the next non-empty line, else one level deeper
        rest = text[m.end() :].split("\n")
        body_indent = None
        for line in rest[1:]:
            if line.strip():
                body_indent = line[: len(line) - len(line.lstrip())]
                break
        if body_indent is None or len(body_indent) <= len(m.group("indent")):
            body_indent = m.group("indent") + "    "
        insert = f"\n{body_indent}raise RuntimeError('degraded by evalsuite')"
        out = out[: m.end()] + insert + out[m.end() :]
    if out == text:
        return text + "\n```python\nraise RuntimeError('degraded by evalsuite')\n```\n"
    return out


def leak_canary(text: str, hints: Hints) -> str:
    """Append a restricted document's canary (and a line of its text) to the answer."""
    canaries = list(hints.get("canaries", ()))
    snippet = hints.get("restricted_text", "")
    if not canaries and not snippet:
        return text
    line = " ".join(canaries)
    if snippet:
        line = (snippet[:200] + " " + line).strip()
    return f"{text}\n\n(For reference: {line})"


DAMAGE: dict[str, Callable[[str, Hints], str]] = {
    "drop_citations": drop_citations,
    "corrupt_json": corrupt_json,
    "forbidden_terms": forbidden_terms,
    "break_code": break_code,
    "leak_canary": leak_canary,
}


# ---------------------------------------------------------------------------------------------
# hints: what a damage function needs to know about the case


def hints_from_case(case: Case) -> Hints:
    """The facts about a case the damage functions use (glossary pairs, canaries, entry point)."""
    pairs: list[tuple[str, str]] = []
    if case.glossary is not None:
        for t in case.glossary.terms:
            if (t.lang is None or t.lang == case.lang) and t.forbidden:
                # prefer a forbidden variant the case lists, so terminology.forbidden sees it either way
                listed = [f for f in t.forbidden if f in case.expect.forbidden_terms]
                bad = (listed or list(t.forbidden))[0]
                for form in (t.term, *t.synonyms):
                    if form.casefold() != bad.casefold() or form != bad:
                        pairs.append((form, bad))
    hidden = [d for d in case.context if not d.readable_by(case.user_role)]
    canaries = list(case.expect.canaries) + [c for d in hidden for c in d.canaries]
    return {
        "scenario": case.scenario,
        "term_pairs": pairs,
        "forbidden": list(case.expect.forbidden_terms),
        "canaries": list(dict.fromkeys(canaries)),
        "restricted_text": hidden[0].text.strip().split("\n")[0] if hidden else "",
        "entry_point": case.expect.entry_point,
        "has_schema": case.json_schema is not None or bool(case.expect.schema),
        "has_citations": bool(case.expect.citations),
        "has_tests": bool(case.expect.tests),
    }


def eligible(kind: str, hints: Hints) -> bool:
    """Whether the damage of `kind` can show on a case (so the rate counts only those)."""
    if kind == "drop_citations":
        return bool(hints.get("has_citations"))
    if kind == "corrupt_json":
        return bool(hints.get("has_schema"))
    if kind == "forbidden_terms":
        return bool(hints.get("term_pairs") or hints.get("forbidden"))
    if kind == "break_code":
        return bool(hints.get("has_tests"))
    if kind == "leak_canary":
        return bool(hints.get("canaries"))
    return False


def choose_cases(cases: Sequence[Case], spec: Mapping) -> set[str]:
    """The ids to damage: the first round(rate * n) eligible cases by seeded hash (exact share)."""
    spec = parse_spec(spec)
    pool = [c for c in cases if (not spec["scenarios"] or c.scenario in spec["scenarios"]) and eligible(spec["kind"], hints_from_case(c))]
    pool.sort(key=lambda c: (_unit(spec["seed"], c.id), c.id))
    k = int(round(spec["rate"] * len(pool)))
    return {c.id for c in pool[:k]}


# ---------------------------------------------------------------------------------------------
# the wrapper


class DegradedBackend(Backend):
    """Delegates to a backend (every capability of `Backend`), then damages the outputs of the chosen cases."""

    def __init__(self, inner: Backend, variant: Variant, cases: Sequence[Case]):
        self.inner = inner
        self.variant = variant
        self.spec = parse_spec(variant.degrade, f"variant {variant.name}: degrade")
        self.name = f"degraded:{inner.name}"
        self.damage = DAMAGE[self.spec["kind"]]
        # the cases say what can be damaged (glossary, canaries, tests) and fix the exact share
        self._cases = {c.id: c for c in cases}
        self.chosen: set[str] = choose_cases(list(cases), self.spec)
        self.damaged: set[str] = set()  #: case ids damaged so far (every sample)

    def fingerprint(self) -> str:
        return sha256_json({"inner": self.inner.fingerprint(), "degrade": self.spec})

    def _hints(self, req: Request) -> Hints:
        return hints_from_case(self._cases[req.case_id])

    def selected(self, req: Request) -> bool:
        return req.case_id in self.chosen

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        gens = self.inner.generate(requests)
        out = []
        for req, g in zip(requests, gens):
            if g.ok and self.selected(req):
                text = self.damage(g.text, self._hints(req))
                if text != g.text:
                    self.damaged.add(req.case_id)
                    g = replace(g, text=text, extra={**(g.extra or {}), "degraded": self.spec["kind"]})
            out.append(g)
        return out

    def close(self) -> None:
        self.inner.close()

    # -- the inner backend's capabilities, as they are ----------------------------------------------
    @property  # type: ignore[override]  # the inner backend's, read-only here
    def load_error(self) -> str | None:  # type: ignore[override]
        return self.inner.load_error

    def deadline_s(self) -> float | None:
        return self.inner.deadline_s()

    def weights_identity(self) -> dict | None:
        return self.inner.weights_identity()

    def engine_identity(self) -> dict | None:
        return self.inner.engine_identity()

    def environment(self) -> dict:
        return self.inner.environment()

    def load(self) -> object:
        return self.inner.load()

    def compile_s(self) -> float | None:
        return self.inner.compile_s()

    def peak_memory_mb(self) -> float | None:
        return self.inner.peak_memory_mb()

    def model_memory_mb(self) -> float | None:
        return self.inner.model_memory_mb()

    def engine_metrics(self) -> dict | None:
        return self.inner.engine_metrics()

    def restart(self) -> str:
        return self.inner.restart()


def wrap_backend(backend: Backend, variant: Variant, cases: Sequence[Case]) -> DegradedBackend:
    """The backend of a variant with `degrade`: delegates to `backend`, damages the chosen outputs."""
    return DegradedBackend(backend, variant, cases)
