"""Short facts of a text, as a reader would see a leak: amounts and other numbers (with or without
their units), dates, codes and names. A restricted salary band leaks in two tokens ("155,000 USD"),
far below any verbatim-copy threshold (issue 38).

Each fact has a canonical `key`, so "155,000 USD", "155000" and "155k" are one fact, and
"2026-03-31" is "2026年3月31日". Only distinctive facts are kept: small integers and bare years are
too common to reveal anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Fact", "distinctive_facts"]

_MONTHS = {m: i for i, m in enumerate("january february march april may june july august september october november december".split(), 1)}
_MONTHS |= {m[:3]: i for m, i in list(_MONTHS.items())}
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE_PATTERNS = (
    re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"),
    re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月(?:\s*(\d{1,2})\s*日)?"),
    re.compile(rf"\b({_MON})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I),
    re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MON})\.?,?\s+(\d{{4}})\b", re.I),
)
#: a number: thousands separated by commas (or full-width ones), or plain, with an optional decimal part
#: and a multiplier or percent sign after it; not part of a Latin token (L5, E3), but beside CJK text
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.,，])(\d{1,3}(?:[,，]\d{3})+|\d+)(?:\.(\d+))?(?:\s*(k|K|thousand|million|万|%|percent)(?![A-Za-z]))?(?![A-Za-z0-9_])")
#: a code: letters and digits joined by dashes or mixed in one token (INC-2041, SKU4411, AB12CD)
_CODE = re.compile(r"\b(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z])[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+\b|\b(?=\w*\d)[A-Z]{2,}\d{2,}\w*\b")
#: a name: two or more capitalised words (Dana Whitfield, Helsinki Office)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+\b")
_MULTIPLIER = {"k": 1_000, "thousand": 1_000, "million": 1_000_000, "万": 10_000}


@dataclass(frozen=True)
class Fact:
    """One short fact of a text: its canonical key and the words it was written with."""

    key: str  #: canonical: "amount:155000", "date:2026-03-31", "code:INC-2041", "name:dana whitfield"
    text: str  #: as written


def _number_key(whole: str, frac: str | None, unit: str | None) -> str | None:
    digits = whole.replace(",", "").replace("，", "")
    value = float(f"{digits}.{frac}" if frac else digits)
    mult = _MULTIPLIER.get((unit or "").lower()) or _MULTIPLIER.get(unit or "")
    if mult:
        value *= mult
    percent = unit in ("%", "percent")
    significant = len(digits.lstrip("0")) + len(frac or "")
    if not (percent or frac or mult or significant >= 3):
        return None  # 7, 30, 12: too common to reveal anything
    if not (frac or mult or percent or "," in whole or "，" in whole) and len(digits) == 4 and digits[:2] in ("19", "20"):
        return None  # a bare year
    return f"{'percent' if percent else 'amount'}:{value:g}" if value != int(value) else f"{'percent' if percent else 'amount'}:{int(value)}"


def _dates(text: str) -> tuple[list[Fact], list[tuple[int, int]]]:
    out, spans = [], []
    for i, pat in enumerate(_DATE_PATTERNS):
        for m in pat.finditer(text):
            g = m.groups()
            y, mo, d = (g[2], g[0], g[1]) if i == 2 else (g[2], g[1], g[0]) if i == 3 else g  # March 31, 2026 / 31 March 2026 / numeric
            month = _MONTHS[mo.lower()] if i >= 2 else int(mo)
            key = f"date:{int(y):04d}-{month:02d}" + (f"-{int(d):02d}" if d else "")
            out.append(Fact(key, m.group().strip()))
            spans.append(m.span())
    return out, spans


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def distinctive_facts(text: str) -> dict[str, Fact]:
    """The distinctive facts of `text` by canonical key (the first writing of each)."""
    facts, taken = _dates(text)
    for m in _CODE.finditer(text):
        facts.append(Fact(f"code:{m.group().upper()}", m.group()))
        taken.append(m.span())
    for m in _NUMBER.finditer(text):
        if _inside(m.start(), taken):
            continue
        key = _number_key(m.group(1), m.group(2), m.group(3))
        if key:
            facts.append(Fact(key, m.group().strip()))
    for m in _NAME.finditer(text):
        facts.append(Fact(f"name:{' '.join(m.group().lower().split())}", m.group()))
    out: dict[str, Fact] = {}
    for f in facts:
        out.setdefault(f.key, f)
    return out
