"""Terminology scorers (brand, kb_qa): required terms kept, forbidden variants avoided, terms dropped
against the baseline.

A required term counts when the term or any accepted synonym occurs (its own synonyms and the
glossary's synonyms for it). Forbidden variants come from `expect.forbidden_terms` and from the
glossary terms of the case's language (the same terms the prompt shows the model). Matching is
normalised (see `textnorm`) and case-insensitive, with one exception: a forbidden variant that
differs from a preferred term only by case ("Lumora cloud" vs "Lumora Cloud") is matched
case-sensitively, otherwise the correct spelling would be flagged.
"""

from __future__ import annotations

from ..cases.caseset import Case, GlossaryTerm
from .base import Score, ScoreInput, scorer
from .textnorm import find_term, normalize

SCENARIOS = ("brand", "kb_qa")


def _glossary_terms(case: Case) -> list[GlossaryTerm]:
    """The case's glossary terms for its language (terms without a language apply to all)."""
    g = case.glossary
    if g is None:
        return []
    return [t for t in g.terms if t.lang is None or t.lang == case.lang]


def accepted_forms(case: Case) -> dict[str, tuple[str, ...]]:
    """Each required term with every form that counts for it (term, synonyms, glossary synonyms)."""
    out: dict[str, tuple[str, ...]] = {}
    for t in case.expect.required_terms:
        forms = [t.term, *t.synonyms]
        if case.glossary is not None:
            g = case.glossary.lookup(t.term)
            if g is not None and (g.lang is None or g.lang == case.lang):
                forms.extend(g.synonyms)
        out[t.term] = tuple(dict.fromkeys(forms))
    return out


def tracked_terms(case: Case) -> dict[str, tuple[str, ...]]:
    """Terms whose loss against the baseline is drift: required terms and the glossary's preferred
    terms for the case's language, each with its accepted forms."""
    out = accepted_forms(case)
    for g in _glossary_terms(case):
        if not any(g.term.casefold() == k.casefold() for k in out):
            out[g.term] = tuple(dict.fromkeys((g.term, *g.synonyms)))
    return out


def terms_found(case: Case, text: str, terms: dict[str, tuple[str, ...]] | None = None) -> dict[str, str | None]:
    """For each term, the first accepted form found in `text` (None when absent)."""
    terms = accepted_forms(case) if terms is None else terms
    norm = normalize(text)
    found: dict[str, str | None] = {}
    for term, forms in terms.items():
        found[term] = next((f for f in forms if find_term(norm, normalize(f))), None)
    return found


def _preferred_forms(case: Case) -> list[str]:
    """Every correct spelling the case knows: required terms, their synonyms, all glossary terms and synonyms."""
    forms: list[str] = []
    for t in case.expect.required_terms:
        forms += [t.term, *t.synonyms]
    if case.glossary is not None:
        for g in case.glossary.terms:
            forms += [g.term, *g.synonyms]
    return list(dict.fromkeys(f for f in forms if f.strip()))


def forbidden_variants(case: Case) -> list[str]:
    """Forbidden variants for the case: `expect.forbidden_terms`, then the glossary's for its language."""
    out = list(case.expect.forbidden_terms)
    for g in _glossary_terms(case):
        out.extend(g.forbidden)
    return list(dict.fromkeys(out))


def find_forbidden(case: Case, text: str) -> dict[str, int]:
    """Occurrences of each forbidden variant found in `text` (variants not found are left out)."""
    preferred = _preferred_forms(case)
    pref_folded = {normalize(p) for p in preferred}
    # correct spellings (exact case) are masked first, so a forbidden variant that is a part of a
    # preferred term ("Lumora" in "Lumora Cloud") is not found inside it
    masked = normalize(text, casefold=False)
    for p in sorted(preferred, key=len, reverse=True):
        for s, e in reversed(find_term(masked, normalize(p, casefold=False))):
            masked = masked[:s] + " \x00 " + masked[e:]
    masked_folded = masked.casefold()
    hits: dict[str, int] = {}
    for f in forbidden_variants(case):
        if normalize(f) in pref_folded:
            if normalize(f, casefold=False) in {normalize(p, casefold=False) for p in preferred}:
                continue  # the variant *is* a preferred spelling; never flag it
            n = len(find_term(masked, normalize(f, casefold=False)))
        else:
            n = len(find_term(masked_folded, normalize(f)))
        if n:
            hits[f] = n
    return hits


@scorer("terminology.retention", scenarios=SCENARIOS)
def retention(inp: ScoreInput) -> list[Score]:
    """Share of the required terms present (any accepted form); None when the case requires none."""
    forms = accepted_forms(inp.case)
    if not forms:
        return [Score("terminology.retention", None, details={"reason": "no required terms"})]
    found = terms_found(inp.case, inp.text, forms)
    missing = [t for t, f in found.items() if f is None]
    value = (len(found) - len(missing)) / len(found)
    return [
        Score(
            "terminology.retention",
            value,
            passed=not missing,
            details={"missing": missing, "found": {t: f for t, f in found.items() if f is not None}, "required": len(found)},
        )
    ]


@scorer("terminology.forbidden", scenarios=SCENARIOS)
def forbidden(inp: ScoreInput) -> list[Score]:
    """Number of distinct forbidden variants present (lower is better); None when none are defined."""
    variants = forbidden_variants(inp.case)
    if not variants:
        return [Score("terminology.forbidden", None, higher_is_better=False, details={"reason": "no forbidden terms"})]
    hits = find_forbidden(inp.case, inp.text)
    return [Score("terminology.forbidden", float(len(hits)), passed=not hits, higher_is_better=False, details={"found": hits, "checked": len(variants)})]


@scorer("terminology.dropped", scenarios=SCENARIOS)
def dropped(inp: ScoreInput) -> list[Score]:
    """Terms the baseline used and this output lost (required terms and the glossary's preferred
    terms); lower is better; None for the baseline itself."""
    if inp.baseline_text is None:
        return [Score("terminology.dropped", None, higher_is_better=False, details={"reason": "no baseline output"})]
    terms = tracked_terms(inp.case)
    if not terms:
        return [Score("terminology.dropped", None, higher_is_better=False, details={"reason": "no tracked terms"})]
    base = terms_found(inp.case, inp.baseline_text, terms)
    mine = terms_found(inp.case, inp.text, terms)
    lost = [t for t in terms if base[t] is not None and mine[t] is None]
    gained = [t for t in terms if base[t] is None and mine[t] is not None]
    return [
        Score(
            "terminology.dropped",
            float(len(lost)),
            passed=not lost,
            higher_is_better=False,
            details={"dropped": lost, "gained": gained, "baseline_kept": sum(v is not None for v in base.values()), "tracked": len(terms)},
        )
    ]
