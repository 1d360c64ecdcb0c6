"""Two outputs side by side as HTML (evalsuite.review.view shows them in a review): aligned line by
line, the words that changed marked, whitespace and indentation kept; JSON documents indented first
so the diff aligns key by key."""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Sequence

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def esc(x: object) -> str:
    """Text made safe for HTML; None as an empty string."""
    return html.escape("" if x is None else str(x))


def _words(a: str, b: str) -> tuple[str, str]:
    """Two lines as HTML with the words that differ marked (<del> on the left, <ins> on the right)."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    sm = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
    left, right = [], []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        sa, sb = esc("".join(ta[i1:i2])), esc("".join(tb[j1:j2]))
        if op == "equal":
            left.append(sa)
            right.append(sb)
            continue
        if sa:
            left.append(f"<del>{sa}</del>")
        if sb:
            right.append(f"<ins>{sb}</ins>")
    return "".join(left), "".join(right)


def _rows(a: list[str], b: list[str]) -> list[tuple[int | None, str, int | None, str, str]]:
    """(left line no, left html, right line no, right html, kind) aligned line by line."""
    rows: list[tuple[int | None, str, int | None, str, str]] = []
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            rows += [(i + 1, esc(a[i]), j + 1, esc(b[j]), "same") for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            i, j = i1 + k, j1 + k
            la, lb = (a[i] if i < i2 else None), (b[j] if j < j2 else None)
            if la is not None and lb is not None:
                ha, hb = _words(la, lb)
                rows.append((i + 1, ha, j + 1, hb, "chg"))
            elif la is not None:
                rows.append((i + 1, f"<del>{esc(la)}</del>", None, "", "sub"))
            else:
                rows.append((None, "", j + 1, f"<ins>{esc(lb)}</ins>", "add"))
    return rows


def diff_html(left: str | None, right: str | None, labels: Sequence[str] = ("baseline", "variant")) -> str:
    """Both outputs side by side, aligned by line, changed words marked; a missing output says so."""
    if left is None or right is None:
        missing = labels[0] if left is None else labels[1]
        note = f'<p class="warn">the {esc(missing)} output was not stored</p>'
    else:
        note = '<p class="muted">the two outputs are identical</p>' if left == right else ""
    a, b = (left or "").splitlines() or [""], (right or "").splitlines() or [""]
    body = "".join(
        f'<tr class="{kind}"><td class="ln">{"" if i is None else i}</td><td class="tx">{ha}</td><td class="ln">{"" if j is None else j}</td><td class="tx">{hb}</td></tr>'
        for i, ha, j, hb, kind in _rows(a, b)
    )
    head = f'<thead><tr><th class="ln"></th><th>{esc(labels[0])}</th><th class="ln"></th><th>{esc(labels[1])}</th></tr></thead>'
    cols = '<colgroup><col class="ln"><col class="tx"><col class="ln"><col class="tx"></colgroup>'
    return f'{note}<table class="sbs">{cols}{head}<tbody>{body}</tbody></table>'


def indented_json(a: str | None, b: str | None) -> tuple[str | None, str | None, bool]:
    """Both outputs pretty-printed when each is a JSON document as a whole (so the diff aligns key by
    key); else unchanged."""
    try:
        ja, jb = json.loads(a or ""), json.loads(b or "")
    except ValueError:
        return a, b, False
    if not isinstance(ja, (dict, list)) or not isinstance(jb, (dict, list)):
        return a, b, False
    return json.dumps(ja, indent=2, ensure_ascii=False), json.dumps(jb, indent=2, ensure_ascii=False), True
