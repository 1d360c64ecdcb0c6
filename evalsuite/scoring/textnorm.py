"""Shared text normalisation and term matching for the text scorers.

Model outputs are messy: full-width letters and digits, curly quotes, non-breaking hyphens, odd
spacing, Chinese text without word boundaries. Every scorer that looks for a string in an output
goes through `normalize` and `contains_term`, so "Ｌｕｍｏｒａ  Cloud" and "Lumora Cloud" are the
same term everywhere, and "cloud" is not found inside "clouds" but "云" is found inside "露莫拉云".
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Ranges of scripts written without spaces between words (CJK ideographs, kana, Hangul syllables are
# included because they behave the same for matching purposes).
_CJK_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3100, 0x312F),  # bopomofo
    (0x31A0, 0x31FF),  # bopomofo ext, katakana ext
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK ext B..F, compatibility supplement
)

# Typographic variants NFKC leaves alone but that a model emits interchangeably.
_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2212": "-",
        "\u00ad": None,
        "\u200b": None,
        "\u200c": None,
        "\u200d": None,
        "\u2060": None,
        "\ufeff": None,
    }
)
_WS = re.compile(r"\s+")


#: one character class for the ranges: scorers test every character of every output (hot loop)
_CJK_CHAR = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES) + "]")


def is_cjk(ch: str) -> bool:
    """Whether `ch` belongs to a script written without word boundaries."""
    return _CJK_CHAR.match(ch) is not None


def has_cjk(text: str) -> bool:
    """Whether `text` contains any CJK character."""
    return _CJK_CHAR.search(text) is not None


def is_word_char(ch: str) -> bool:
    """A character that continues a Latin-style word (letters, digits, underscore; not CJK)."""
    return (ch.isalnum() or ch == "_") and not is_cjk(ch)


def fold(text: str) -> str:
    """NFKC (full-width to half-width) with typographic quotes and hyphens folded to ASCII and
    zero-width characters dropped; case and whitespace are kept."""
    return unicodedata.normalize("NFKC", text or "").translate(_FOLD)


@lru_cache(maxsize=16384)
def normalize(text: str, *, casefold: bool = True) -> str:
    """`fold`, whitespace collapsed, casefolded unless `casefold=False`. Remembered: the terminology
    scorers normalise the same output once per glossary term, and the same terms for every output."""
    text = fold(text)
    text = _WS.sub(" ", text).strip()
    return text.casefold() if casefold else text


@lru_cache(maxsize=4096)
def _term_pattern(norm_term: str) -> re.Pattern:
    """Regex for an already normalised term: a space in the term matches any whitespace run (the
    text is collapsed, so one space); next to a CJK character whitespace is optional, since models
    put stray spaces into Chinese."""
    parts: list[str] = []
    chars = list(norm_term)
    for i, ch in enumerate(chars):
        if ch == " ":
            prev, nxt = chars[i - 1] if i else "", chars[i + 1] if i + 1 < len(chars) else ""
            parts.append(r"\s?" if (prev and is_cjk(prev)) or (nxt and is_cjk(nxt)) else r"\s")
            continue
        if i and chars[i - 1] != " " and (is_cjk(ch) or is_cjk(chars[i - 1])):
            parts.append(r"\s?")
        parts.append(re.escape(ch))
    return re.compile("".join(parts))


def find_term(text_norm: str, term_norm: str) -> list[tuple[int, int]]:
    """Spans of `term_norm` in `text_norm` (both already normalised the same way).

    Latin-script ends of the term must sit on word boundaries ("cloud" is not in "clouds"); a CJK
    end needs no boundary, since Chinese has none.
    """
    if not term_norm:
        return []
    pat = _term_pattern(term_norm)
    need_start = is_word_char(term_norm[0])
    need_end = is_word_char(term_norm[-1])
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = pat.search(text_norm, pos)
        if m is None:
            return spans
        s, e = m.span()
        ok = not (need_start and s > 0 and is_word_char(text_norm[s - 1]))
        ok = ok and not (need_end and e < len(text_norm) and is_word_char(text_norm[e]))
        if ok:
            spans.append((s, e))
            pos = e
        else:
            pos = s + 1


def contains_term(text: str, term: str, *, case_sensitive: bool = False) -> bool:
    """Whether `term` occurs in `text` after normalisation (word boundaries for Latin, substring for CJK)."""
    return count_term(text, term, case_sensitive=case_sensitive) > 0


def count_term(text: str, term: str, *, case_sensitive: bool = False) -> int:
    """Number of non-overlapping occurrences of `term` in `text` after normalisation."""
    cf = not case_sensitive
    return len(find_term(normalize(text, casefold=cf), normalize(term, casefold=cf)))


def first_term(text: str, terms: list[str] | tuple[str, ...], *, case_sensitive: bool = False) -> str | None:
    """The first of `terms` (in the order given) that occurs in `text`, or None."""
    cf = not case_sensitive
    norm = normalize(text, casefold=cf)
    for t in terms:
        if find_term(norm, normalize(t, casefold=cf)):
            return t
    return None


_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def units(text: str) -> list[str]:
    """The normalised text as a sequence of units: each CJK character is one unit, each Latin word or
    number is one unit; punctuation and whitespace are dropped."""
    out: list[str] = []
    for m in _TOKEN.finditer(normalize(text)):
        word = m.group()
        if not has_cjk(word):  # the common case: a Latin word or a number is one unit
            out.append(word)
            continue
        buf = ""
        for ch in word:
            if is_cjk(ch):
                if buf:
                    out.append(buf)
                    buf = ""
                out.append(ch)
            else:
                buf += ch
        if buf:
            out.append(buf)
    return out
