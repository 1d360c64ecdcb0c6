"""Similarity to the baseline's output (every scenario): chrF, BLEU, exact match, first divergence,
and `exactness.identical` for greedy decoding.

All of them compare an output with the baseline's output for the same case and sample, and are None
for the baseline itself. chrF and BLEU are sentence-level sacreBLEU scores on sacreBLEU's 0-100
scale; the sacreBLEU signature goes into the details so a run records exactly what was computed.
"""

from __future__ import annotations

from functools import cache

from .base import Score, ScoreInput, scorer
from .textnorm import is_cjk

CONTEXT_CHARS = 30  #: characters of context shown each side of a divergence


@cache
def _chrf():
    from sacrebleu.metrics import CHRF

    return CHRF()


@cache
def _bleu(tokenize: str):
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=tokenize, effective_order=True)


def _no_baseline(metric: str, higher_is_better: bool = True) -> list[Score]:
    return [Score(metric, None, higher_is_better=higher_is_better, details={"reason": "no baseline output"})]


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first character where `a` and `b` differ (the shorter length when one is a
    prefix of the other); None when they are identical."""
    if a == b:
        return None
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def word_at(text: str, i: int) -> str:
    """The word containing character `i`, or the next word when `i` is whitespace (a CJK character
    is its own word; "" past the end)."""
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        return ""
    if is_cjk(text[i]):
        return text[i]
    s = e = i
    while s > 0 and not text[s - 1].isspace() and not is_cjk(text[s - 1]):
        s -= 1
    while e < len(text) and not text[e].isspace() and not is_cjk(text[e]):
        e += 1
    return text[s:e]


def divergence_details(baseline: str, text: str) -> dict:
    """Where and how two texts first differ: index, line and column, a window around it in each,
    and the word at the divergence in each."""
    i = first_divergence(baseline, text)
    if i is None:
        return {"identical": True}
    lo = max(0, i - CONTEXT_CHARS)
    line = baseline[:i].count("\n") + 1
    col = i - (baseline.rfind("\n", 0, i) + 1)
    return {
        "identical": False,
        "index": i,
        "line": line,
        "column": col,
        "baseline": baseline[lo : i + CONTEXT_CHARS],
        "variant": text[lo : i + CONTEXT_CHARS],
        "baseline_word": word_at(baseline, i),
        "variant_word": word_at(text, i),
    }


def _sentence_score(name: str, metric, inp: ScoreInput) -> list[Score]:
    """A sacreBLEU sentence score of the output against the baseline's (None for the baseline)."""
    if inp.baseline_text is None:
        return _no_baseline(name)
    value = metric.sentence_score(inp.text, [inp.baseline_text]).score
    if inp.text == inp.baseline_text:
        value = 100.0  # sacreBLEU scores two empty strings 0
    return [Score(name, value, details={"signature": str(metric.get_signature())})]


@scorer("similarity.chrf")
def chrf(inp: ScoreInput) -> list[Score]:
    """Sentence chrF (0-100) of the output against the baseline's."""
    return _sentence_score("similarity.chrf", _chrf(), inp)


@scorer("similarity.bleu")
def bleu(inp: ScoreInput) -> list[Score]:
    """Sentence BLEU (0-100, effective order) against the baseline's output; Chinese tokenised by character."""
    return _sentence_score("similarity.bleu", _bleu("zh" if inp.case.lang == "zh" else "13a"), inp)


@scorer("similarity.exact")
def exact(inp: ScoreInput) -> list[Score]:
    """1 when the output is character-for-character the baseline's."""
    if inp.baseline_text is None:
        return _no_baseline("similarity.exact")
    same = inp.text == inp.baseline_text
    return [Score("similarity.exact", 1.0 if same else 0.0, passed=same)]


@scorer("similarity.first_divergence")
def divergence(inp: ScoreInput) -> list[Score]:
    """Character index where the output first differs from the baseline's (later is better); None
    when identical."""
    if inp.baseline_text is None:
        return _no_baseline("similarity.first_divergence")
    details = divergence_details(inp.baseline_text, inp.text)
    index = details.get("index")
    return [Score("similarity.first_divergence", None if index is None else float(index), details=details)]


@scorer("exactness.identical")
def identical(inp: ScoreInput) -> list[Score]:
    """1 when the output is identical to the baseline's. Meant for greedy decoding, where an exact
    optimization must reproduce the baseline; the details say where and at which word it diverged."""
    if inp.baseline_text is None:
        return _no_baseline("exactness.identical")
    same = inp.text == inp.baseline_text
    details = divergence_details(inp.baseline_text, inp.text)
    if inp.tokens is not None and inp.baseline_tokens is not None:
        details.update(first_divergent_token(inp.baseline_tokens, inp.tokens))
    return [Score("exactness.identical", 1.0 if same else 0.0, passed=same, details=details)]


def first_divergent_token(baseline: tuple[int, ...], variant: tuple[int, ...]) -> dict:
    """Index and ids of the first generated token where the variant leaves the baseline (None: none)."""
    n = min(len(baseline), len(variant))
    i = next((k for k in range(n) if baseline[k] != variant[k]), n if len(baseline) != len(variant) else None)
    if i is None:
        return {"token_index": None}
    return {"token_index": i, "baseline_token": baseline[i] if i < len(baseline) else None, "variant_token": variant[i] if i < len(variant) else None}
