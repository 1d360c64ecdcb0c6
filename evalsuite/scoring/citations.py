"""Citation scorers (kb_qa): which documents an answer cites, and whether the citations are real,
right, complete, supported by the cited text, stable against the baseline and under perturbation.

Markers understood (full-width forms and dashes are folded first): `[1]` or `[^1]` (1-based
index into the case's context list), `[doc-id]`, `[a, b]` / `[a; b]` / `[a、b]`, `[1-3]`, `【1】` / `【doc-id】`,
`(source: X)` / `(sources: X, Y)` / `(来源：X)`, and prefixed ids such as `[doc: X]`. An id that is
not in the context is kept as an invalid citation, so a hallucinated source counts against
`citations.valid` instead of disappearing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cases.caseset import Case
from .base import Score, ScoreInput, scorer
from .textnorm import fold, is_cjk, normalize, units

SCENARIOS = ("kb_qa",)
SUPPORT_MIN_OVERLAP = 0.3  #: share of a sentence's content units that must occur in a cited passage

_ITEM = r"[A-Za-z0-9][\w.:#/-]*"
_LIST = rf"{_ITEM}(?:(?:\s*[,;、和与]\s*|\s+and\s+){_ITEM})*"
_PREFIX = r"(?:(?:doc(?:ument)?s?|sources?|refs?|references?|citations?|来源|出处|文档|参考)\s*[:#]?\s*)"
_MARKERS = re.compile(
    rf"\[\s*\^?(?P<sqall>{_PREFIX}?(?P<sq>{_LIST}))\s*\](?!\()"  # [1], [doc-id], [a, b]; not a markdown link
    rf"|【\s*(?P<lentall>{_PREFIX}?(?P<lent>{_LIST}))\s*】"  # 【1】, 【doc-id】
    rf"|\(\s*(?P<srcall>(?:sources?|来源|出处|参考)\s*:\s*(?P<src>{_LIST}))\s*\)",  # (source: X), (来源：X)
    re.IGNORECASE,
)
_SPLIT = re.compile(r"\s*[,;、和与]\s*|\s+and\s+", re.IGNORECASE)
_PREFIX_RE = re.compile(rf"^{_PREFIX}", re.IGNORECASE)
_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


@dataclass(frozen=True)
class Citation:
    """One cited reference in an output."""

    ref: str  #: the reference as written ("1", "ex-vpn")
    doc_id: str | None  #: the context document it resolves to; None when it resolves to none
    start: int  #: offset of the marker in the folded output (`textnorm.fold`)
    end: int

    @property
    def key(self) -> str:
        """What identifies the cited source: the document id, or the unresolved reference."""
        return self.doc_id if self.doc_id is not None else f"?{self.ref}"


def _prep(text: str) -> str:
    return fold(text)


def _resolve(ref: str, context_ids: Sequence[str]) -> str | None:
    by_fold = {normalize(c): c for c in context_ids}
    if normalize(ref) in by_fold:
        return by_fold[normalize(ref)]
    stripped = _PREFIX_RE.sub("", ref).strip().lstrip("#")
    if normalize(stripped) in by_fold:
        return by_fold[normalize(stripped)]
    if stripped.isdigit():
        n = int(stripped)
        if 1 <= n <= len(context_ids):
            return context_ids[n - 1]
    return None


def parse_citations(text: str, context_ids: Sequence[str] = ()) -> list[Citation]:
    """Every citation in `text`, in order, resolved against the context ids (numbers are 1-based indexes)."""
    out: list[Citation] = []
    norm = _prep(text)
    for m in _MARKERS.finditer(norm):
        name = next(n for n in ("sq", "lent", "src") if m.group(n) is not None)
        whole, body = m.group(name + "all").strip(), m.group(name)
        if normalize(whole) in {normalize(c) for c in context_ids}:
            body = whole  # an id that merely looks prefixed ("docs1")
        for ref in _SPLIT.split(body):
            ref = ref.strip().rstrip(".")
            if not ref:
                continue
            rng = _RANGE.match(ref)
            if rng and normalize(ref) not in {normalize(c) for c in context_ids}:
                lo, hi = int(rng.group(1)), int(rng.group(2))
                if 0 < lo <= hi and hi - lo < 50:
                    for n in range(lo, hi + 1):
                        out.append(Citation(str(n), _resolve(str(n), context_ids), m.start(), m.end()))
                    continue
            out.append(Citation(ref, _resolve(ref, context_ids), m.start(), m.end()))
    return out


def cited_ids(text: str, case: Case) -> list[str]:
    """The distinct sources an output cites, in order of first citation (unresolved ones as "?ref")."""
    return list(dict.fromkeys(c.key for c in parse_citations(text, [d.id for d in case.context])))


# ---------------------------------------------------------------------------------------------
# sentences and support

_SENT_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？!?])|\n+")
_STOP_EN = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that these those "
    "there their they them he she his her we our you your i me my do does did not no yes can could will would should may "
    "might must shall than then so such also about into over under after before per via which who whom what when where why how "
    "according document documents source sources based provided".split()
)
_STOP_ZH = frozenset("的了是在和与及或也都就而并被把对从向为以之其这那有个中上下文档根据提供")


def content_units(text: str) -> set[str]:
    """Content-bearing units: Latin words that are not stopwords (numbers kept), CJK characters that
    are not function characters."""
    return set(_content_units(text))


@functools.lru_cache(maxsize=4096)
def _content_units(text: str) -> frozenset[str]:
    """`content_units`, remembered: a case's passages are the same for every output scored on it."""
    out = set()
    for u in units(text):
        if is_cjk(u[0]):
            if u not in _STOP_ZH:
                out.add(u)
        elif u.isdigit() or (len(u) > 1 and u not in _STOP_EN):
            out.add(u)
    return frozenset(out)


def _split_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`, split at sentence ends and line breaks."""
    bounds: list[tuple[int, int]] = []
    pos = 0
    for m in _SENT_END.finditer(text):
        if m.end() > pos:
            bounds.append((pos, m.start() if m.start() > pos else m.end()))
            pos = m.end()
    if pos < len(text):
        bounds.append((pos, len(text)))
    return bounds


def citing_sentences(text: str, context_ids: Sequence[str]) -> list[tuple[str, list[Citation]]]:
    """Sentences that carry citations, each with its citations (markers removed from the sentence).

    A marker standing alone after a sentence ("... 12 hours. [ex-vpn]") belongs to that sentence.
    """
    norm = _prep(text)
    cits = parse_citations(norm, context_ids)
    sentences: list[tuple[str, list[Citation]]] = []
    for s, e in _split_bounds(norm):
        own = [c for c in cits if s <= c.start < e]
        stripped = norm[s:e]
        for c in sorted(own, key=lambda c: c.start, reverse=True):
            stripped = stripped[: c.start - s] + " " + stripped[c.end - s :]
        if not content_units(stripped) and own and sentences:
            prev_text, prev_cits = sentences[-1]
            sentences[-1] = (prev_text, prev_cits + own)
            continue
        sentences.append((stripped.strip(), own))
    return [(t, cs) for t, cs in sentences if cs]


def _passage_units(case: Case) -> dict[str, frozenset[str]]:
    return {d.id: _content_units(f"{d.title} {d.text}") for d in case.context}


def sentence_support(case: Case, text: str, min_overlap: float = SUPPORT_MIN_OVERLAP) -> list[dict]:
    """For each citing sentence: its cited sources, the best overlap with a cited passage, supported or not."""
    passages = _passage_units(case)
    out = []
    for sent, cits in citing_sentences(text, [d.id for d in case.context]):
        su = content_units(sent)
        best = 0.0
        for c in cits:
            if c.doc_id is not None and su:
                best = max(best, len(su & passages[c.doc_id]) / len(su))
        out.append(
            {
                "sentence": sent[:200],
                "cited": list(dict.fromkeys(c.key for c in cits)),
                "overlap": round(best, 3),
                "supported": bool(su) and best >= min_overlap,
            }
        )
    return out


def _sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text` (offsets into `text` itself), surrounding space left out."""
    out = []
    for s, e in _split_bounds(text):
        seg = text[s:e]
        lead = len(seg) - len(seg.lstrip())
        out.append((s + lead, s + len(seg.rstrip())))
    return [(s, e) for s, e in out if e > s]


def cited_spans(case: Case, text: str) -> dict[str, list[tuple[int, int]]]:
    """Where in each cited document an output's claims come from: document id -> character spans.

    For every citing sentence of the output and every document it cites, the document's sentence
    sharing the most content units with it (none when they share none), so a reviewer sees which
    passage each side rests on rather than only which document it names.
    """
    docs = {d.id: d for d in case.context}
    out: dict[str, list[tuple[int, int]]] = {}
    for sent, cits in citing_sentences(text, list(docs)):
        su = content_units(sent)
        for c in cits:
            doc = docs.get(c.doc_id) if c.doc_id is not None else None
            if doc is None or not su:
                continue
            scored = [(len(su & content_units(doc.text[s:e])), -(e - s), (s, e)) for s, e in _sentence_bounds(doc.text)]
            best = max(scored, default=None)
            if best is not None and best[0] > 0 and best[2] not in out.get(doc.id, []):
                out.setdefault(doc.id, []).append(best[2])
    return {k: sorted(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# scorers


@scorer("citations.valid", scenarios=SCENARIOS)
def valid(inp: ScoreInput) -> list[Score]:
    """Share of distinct cited sources that exist in the context; None when nothing is cited."""
    cited = cited_ids(inp.text, inp.case)
    if not cited:
        return [Score("citations.valid", None, details={"reason": "no citations", "cited": []})]
    invalid = [c[1:] for c in cited if c.startswith("?")]
    value = (len(cited) - len(invalid)) / len(cited)
    return [Score("citations.valid", value, passed=not invalid, details={"cited": cited, "invalid": invalid})]


def _gold(case: Case) -> list[str]:
    return list(dict.fromkeys(case.expect.citations))


@scorer("citations.precision", scenarios=SCENARIOS)
def precision(inp: ScoreInput) -> list[Score]:
    """Share of cited sources that are gold; 0 when gold exists and nothing is cited; None without gold."""
    gold = _gold(inp.case)
    if not gold:
        return [Score("citations.precision", None, details={"reason": "no gold citations"})]
    cited = cited_ids(inp.text, inp.case)
    wrong = [c for c in cited if c not in gold]
    value = (len(cited) - len(wrong)) / len(cited) if cited else 0.0
    return [Score("citations.precision", value, passed=bool(cited) and not wrong, details={"cited": cited, "gold": gold, "not_gold": wrong})]


@scorer("citations.recall", scenarios=SCENARIOS)
def recall(inp: ScoreInput) -> list[Score]:
    """Share of gold sources cited; None without gold."""
    gold = _gold(inp.case)
    if not gold:
        return [Score("citations.recall", None, details={"reason": "no gold citations"})]
    cited = set(cited_ids(inp.text, inp.case))
    missing = [g for g in gold if g not in cited]
    return [Score("citations.recall", (len(gold) - len(missing)) / len(gold), passed=not missing, details={"gold": gold, "missing": missing})]


@scorer("citations.support", scenarios=SCENARIOS, min_overlap=SUPPORT_MIN_OVERLAP)
def support(inp: ScoreInput, min_overlap: float = SUPPORT_MIN_OVERLAP) -> list[Score]:
    """Share of citing sentences whose cited passage shares at least `min_overlap` of the sentence's
    content words (CJK: characters); None when no sentence cites."""
    rows = sentence_support(inp.case, inp.text, min_overlap)
    if not rows:
        return [Score("citations.support", None, details={"reason": "no citing sentences"})]
    unsupported = [r for r in rows if not r["supported"]]
    value = (len(rows) - len(unsupported)) / len(rows)
    return [Score("citations.support", value, passed=not unsupported, details={"sentences": len(rows), "unsupported": unsupported, "min_overlap": min_overlap})]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity; two empty sets agree fully."""
    sa, sb = set(a), set(b)
    return 1.0 if not sa and not sb else len(sa & sb) / len(sa | sb)


@scorer("citations.agreement", scenarios=SCENARIOS)
def agreement(inp: ScoreInput) -> list[Score]:
    """Jaccard of this output's cited sources and the baseline's (1 when neither cites); None for the baseline."""
    if inp.baseline_text is None:
        return [Score("citations.agreement", None, details={"reason": "no baseline output"})]
    mine, base = cited_ids(inp.text, inp.case), cited_ids(inp.baseline_text, inp.case)
    return [
        Score(
            "citations.agreement",
            jaccard(mine, base),
            details={
                "cited": mine,
                "baseline_cited": base,
                "only_variant": [c for c in mine if c not in base],
                "only_baseline": [c for c in base if c not in mine],
            },
        )
    ]


def citation_robustness(original_case: Case, original_cited: Iterable[str] | str, perturbed: Sequence[tuple[Case, Iterable[str] | str]]) -> Score:
    """`citations.robustness`: share of perturbed versions of a case whose answer cites the same
    gold-relevant sources as the answer to the original.

    `cited` may be the cited document ids or the output text itself (a `str` is parsed against its
    own case's context, so a reordered context maps `[1]` to the right document). Only gold sources
    are compared when the original case has gold citations (a distractor cited in addition is
    `citations.precision`'s business); without gold the whole cited sets are compared.
    """

    def ids(case: Case, cited: Iterable[str] | str) -> set[str]:
        return set(cited_ids(cited, case)) if isinstance(cited, str) else set(cited)

    gold = set(original_case.expect.citations)
    restrict = (lambda s: s & gold) if gold else (lambda s: s)
    ref = restrict(ids(original_case, original_cited))
    if not perturbed:
        return Score("citations.robustness", None, details={"reason": "no perturbed cases"})
    rows = []
    for case, cited in perturbed:
        got = restrict(ids(case, cited))
        rows.append({"case": case.id, "perturbation": case.perturbation, "relevant": sorted(got), "same": got == ref})
    same = sum(r["same"] for r in rows)
    return Score(
        "citations.robustness",
        same / len(rows),
        passed=same == len(rows),
        details={"original": sorted(ref), "compared": "gold" if gold else "all", "perturbed": rows},
    )
