"""`evalsuite cases from-traffic`: logged requests -> a deduplicated, stratified, scrubbed draft case set."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .infer import infer
from .readers import read_traffic
from .records import ReadResult, Skipped
from .sample import Candidate, candidate_text, dedup, exact_key, stratified
from .scrub import Scrubber
from .write import Draft, draft_case, write_casesets


@dataclass(frozen=True, kw_only=True)
class TrafficSettings:
    """How to turn traffic into cases."""

    out: Path  #: directory of the case sets written (one file per scenario)
    per_stratum: int = 25  #: cases sampled per (scenario, language, prompt length)
    seed: int = 0  #: the sample's seed: the same traffic and seed give the same cases
    scrub: bool = True  #: replace personal data and secrets before writing (off: `--no-scrub`, said in the header)
    glossary: Path | None = None  #: a glossary file: the terms an answer uses become its required terms
    near_threshold: float = 0.8  #: MinHash Jaccard estimate above which two requests are one
    overwrite: bool = False  #: replace case sets already in `out` (`--force`)


@dataclass(frozen=True, kw_only=True)
class TrafficReport:
    """What the import read, collapsed, sampled, left out and replaced."""

    files: tuple[str, ...]
    read: int  #: requests read
    skipped: tuple[Skipped, ...]  #: malformed lines, each named by file, line and field
    set_aside: dict[str, int]  #: requests read but not cases, by reason
    exact_duplicates: int
    near_duplicates: int
    strata: dict[str, tuple[int, int]]  #: "scenario/lang/length" -> (distinct requests, cases taken)
    written: tuple[str, ...]  #: case-set files written
    cases: int
    scrubbed: bool
    replacements: dict[str, int] = field(default_factory=dict)  #: placeholders written, by type

    @property
    def duplicate_ratio(self) -> float:
        """Share of the requests that became cases or candidates which were exact or near copies."""
        candidates = self.read - len(self.skipped) - sum(self.set_aside.values())
        return (self.exact_duplicates + self.near_duplicates) / candidates if candidates > 0 else 0.0

    @property
    def left_out(self) -> dict[str, int]:
        """Everything read that is not a case, by why."""
        sampled_out = sum(a - t for a, t in self.strata.values())
        out = {"malformed lines": len(self.skipped), "exact duplicates": self.exact_duplicates, "near duplicates": self.near_duplicates}
        out.update(self.set_aside)
        out["over the per-stratum sample"] = sampled_out
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "read": self.read,
            "cases": self.cases,
            "written": list(self.written),
            "scrubbed": self.scrubbed,
            "replacements": self.replacements,
            "duplicate_ratio": round(self.duplicate_ratio, 4),
            "strata": {k: {"distinct": a, "taken": t} for k, (a, t) in self.strata.items()},
            "left_out": self.left_out,
            "skipped": [str(s) for s in self.skipped],
        }


def glossary_terms(path: Path | None) -> tuple[str, ...]:
    """The preferred terms of a glossary file (its synonyms count as the term when scored)."""
    if path is None:
        return ()
    from ...yamlio import load_yaml
    from ..caseset import Glossary

    data, _ = load_yaml(path)
    return tuple(t.term for t in Glossary.parse(data).terms)


def from_traffic(paths: Iterable[str | Path], settings: TrafficSettings, *, progress: Callable[[str], None] | None = None) -> TrafficReport:
    """Read, infer, collapse, sample, scrub and write; the report of each step."""
    say = progress or (lambda _msg: None)
    read = read_traffic(paths)
    say(f"read {len(read.requests)} requests ({len(read.skipped)} malformed lines skipped)")
    candidates, set_aside = _candidates(read, glossary_terms(settings.glossary))
    deduped = dedup(candidates, threshold=settings.near_threshold)
    say(f"{len(deduped.kept)} distinct of {len(candidates)} ({deduped.exact} exact, {deduped.near} near duplicates)")
    sample, strata = stratified(deduped.kept, per_stratum=settings.per_stratum, seed=settings.seed)
    scrubber = Scrubber()
    drafts = [_draft(c, scrubber if settings.scrub else None) for c in sample]
    written = write_casesets(drafts, settings.out, scrubbed=settings.scrub, glossary=settings.glossary, sources=read.files, overwrite=settings.overwrite)
    return TrafficReport(
        files=read.files,
        read=len(read.requests) + len(read.skipped),
        skipped=read.skipped,
        set_aside=dict(set_aside),
        exact_duplicates=deduped.exact,
        near_duplicates=deduped.near,
        strata={"/".join(k): v for k, v in strata.items()},
        written=tuple(map(str, written)),
        cases=len(drafts),
        scrubbed=settings.scrub,
        replacements=dict(scrubber.counts),
    )


def _candidates(read: ReadResult, terms: tuple[str, ...]) -> tuple[list[Candidate], Counter]:
    candidates: list[Candidate] = []
    set_aside: Counter = Counter()
    for req in read.requests:
        got = infer(req, terms)
        if isinstance(got, str):
            set_aside[got] += 1
        else:
            candidates.append(Candidate(request=req, inferred=got, text=candidate_text(req)))
    return candidates, set_aside


def _draft(c: Candidate, scrubber: Scrubber | None) -> Draft:
    inf = c.inferred
    fields = scrubber.data(inf.fields) if scrubber is not None else inf.fields
    case = draft_case(c.request, scenario=inf.scenario, kind=inf.kind, lang=inf.lang, key=exact_key(c.text), fields=fields)
    return Draft(scenario=inf.scenario, case=case, schema=inf.schema)
