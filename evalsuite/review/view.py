"""What a reviewer sees of an item, as HTML fragments (pure functions of the item; no widgets here).

The desk (evalsuite.review.desk) places these fragments in a panel whose styles live in a shadow
root, so JupyterLab's own CSS (fixed table layout, right-aligned cells) never reaches them; the
same fragments make the static cards of `render_item`.

- `diff_html`: both outputs side by side, line by line, changed words highlighted, whitespace and
  indentation kept (pre-wrap), long lines wrapped inside their column.
- `reasons_html`: why the item was flagged, in words (`reason_words`).
- `context_tabs`: what was asked and what a good answer does, the KB documents with the passages
  each side cites marked (restricted documents labelled), the JSON key by key, glossary terms kept or
  dropped, unit tests of both sides, the scores (only metrics with a value on both sides, rounded)
  and the item's history with earlier reviewers' notes.
- Blind pairwise (`blind=True`): the sides are "A" (left) and "B" (right) in the item's seeded order,
  nothing names the baseline or the variant, reasons are neutral and scores and history are hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .diff import diff_html, esc, indented_json

CSS = (Path(__file__).with_name("static") / "desk.css").read_text("utf-8")


def fmt(x: object) -> str:
    """A score value for a person: rounded to 3 significant digits; booleans as pass/fail; None as a dash."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "pass" if x else "fail"
    if isinstance(x, float):
        return f"{x:.3g}"
    return esc(x)


# ---------------------------------------------------------------------------------------------
# sides


def sides(item: Mapping[str, Any], blind: bool) -> list[tuple[str, str | None, str]]:
    """[(label, text, role)] for the left and right columns: baseline then variant, or in a blind
    review the item's seeded order under the labels A and B."""
    name = item.get("baseline")
    b = ("baseline" + (f" ({name})" if name and name != "baseline" else ""), item.get("baseline_output"), "baseline")
    v = (f"variant {item.get('variant')}", item.get("variant_output"), "variant")
    if not blind:
        return [b, v]
    order = [v, b] if _left(item) == "variant" else [b, v]
    return [("A (left)", order[0][1], order[0][2]), ("B (right)", order[1][1], order[1][2])]


def _left(item: Mapping[str, Any]) -> str:
    from .policy import blind_left

    return item.get("left_side") or blind_left(item.get("item_key") or str(item.get("id")))


def side_label(item: Mapping[str, Any], role: str, blind: bool) -> str:
    """How a side is named in the text around the diff: baseline / variant, or A / B when blind."""
    if not blind:
        return "baseline" if role == "baseline" else "variant"
    return "A" if _left(item) == role else "B"


def item_diff(item: Mapping[str, Any], blind: bool = False) -> str:
    """The item's two outputs as `diff_html`, in the order and under the names of the review mode
    (JSON documents indented, and said so)."""
    (la, ta, _), (lb, tb, _) = sides(item, blind)
    ta, tb, indented = indented_json(ta, tb)
    note = '<p class="muted">both outputs are JSON: shown indented, key by key</p>' if indented else ""
    return note + diff_html(ta, tb, (la, lb))


# ---------------------------------------------------------------------------------------------
# reasons in words


def _ids(xs: Iterable[object] | None) -> str:
    return ", ".join(str(x) for x in xs) if xs else "nothing"


def _json_words(det: Mapping[str, Any]) -> str:
    names = {"missing_keys": "missing", "extra_keys": "added", "type_changes": "type changed", "enum_changes": "value outside its enum"}
    parts = [f"{names.get(k, k.replace('_', ' '))}: {', '.join(map(str, v[:4]))}" for k, v in det.items() if isinstance(v, list) and v and k != "counts"]
    return "; ".join(parts)


def reason_words(r: Mapping[str, Any], item: Mapping[str, Any], blind: bool = False) -> str:
    """One reason in plain words (neutral about the sides in a blind review)."""
    code, det, m = str(r.get("code") or ""), r.get("detail") or {}, r.get("metric") or ""
    if blind:
        return _BLIND.get(code, "the automatic checks flagged a difference") + (f" ({m})" if m and code in ("flip", "similarity") else "")
    if code == "flip":
        why = det.get("reason") or det.get("error") or ""
        return f"the check {m} passed for the baseline and fails for this variant" + (f": {why}" if isinstance(why, str) and why else "")
    if code == "similarity":
        return f"reads differently from the baseline: {m} {fmt(det.get('value'))} of 100"
    if code == "json_drift":
        return "the JSON structure changed" + (f" ({_json_words(det)})" if _json_words(det) else "")
    if code == "citations":
        return f"cites different sources: the baseline alone cites {_ids(det.get('only_baseline'))}, the variant alone {_ids(det.get('only_variant'))}"
    if code == "leak":
        n = len(det.get("overlaps") or [])
        return f"leaks restricted content: canary {_ids(det.get('canaries'))}" + (f", {n} verbatim passage(s)" if n else "")
    if code == "speculative":
        return "speculative decoding changed the text, and it must reproduce the baseline exactly"
    if code == "disagreement":
        return f"the checks disagree: {_ids(det.get('worse'))} got worse while {_ids(det.get('better'))} got better"
    if code == "audit":
        return "not flagged: drawn at random to audit what the automatic flags miss"
    return str(r.get("message") or code)


_BLIND = {
    "flip": "a pass/fail check gives the two sides different results",
    "similarity": "the two answers read differently",
    "json_drift": "the JSON structure differs between the sides",
    "citations": "the two sides cite different sources",
    "leak": "restricted content may have leaked on one side",
    "speculative": "the texts differ where they must be identical",
    "disagreement": "the checks disagree about which side is better",
    "audit": "drawn at random for an audit",
}


def reasons_html(item: Mapping[str, Any], blind: bool = False) -> str:
    rs = item.get("reasons") or []
    seen, lis = set(), []
    for r in rs:
        text = reason_words(r, item, blind)
        if text not in seen:
            seen.add(text)
            lis.append(f'<li class="r-{esc(r.get("code"))}"><b>{esc(r.get("code"))}</b> {esc(text)}</li>')
    return f'<ul class="reasons">{"".join(lis)}</ul>'


# ---------------------------------------------------------------------------------------------
# the header and the context tabs


def header_html(item: Mapping[str, Any], blind: bool = False) -> str:
    """`#12 kb-003 · opt · kb_qa/grounded · substantive · audit · open`: the item in one line."""
    bits = [f"<b>#{item['id']}</b> {esc(item['case_id'])}"]
    if not blind:
        bits.append(f"{esc(item['variant'])} vs {esc(item.get('baseline') or 'baseline')}")
    bits.append(esc("/".join(x for x in (item.get("scenario"), item.get("kind")) if x)))
    if item.get("triage"):
        bits.append(
            f'<span class="tag {esc(item["triage"])}" title="the baseline\'s logit margin at the first divergent token: {fmt(item.get("margin"))} nats">{esc(item["triage"])}</span>'
        )
    if item.get("audit"):
        bits.append('<span class="tag audit">audit sample</span>')
    if (item.get("reviews_needed") or 1) > 1:
        bits.append('<span class="tag">double review</span>')
    state = "open (waiver expired)" if item.get("waiver_expired") else (item.get("verdict") or "open")
    bits.append(f'<span class="state s-{esc(state.split()[0])}">{esc(state)}</span>')
    return " · ".join(bits)


def _marked(text: str, spans: Mapping[str, Sequence[Sequence[int]]], names: Mapping[str, str]) -> str:
    """A document's text with the spans each side cites marked (class b, v or both)."""
    marks = [(s, e, side) for side, ss in spans.items() for s, e in ss]
    if not marks:
        return esc(text)
    cuts = sorted({0, len(text), *[p for s, e, _ in marks for p in (s, e)]})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        who = sorted({side for s, e, side in marks if s <= a and b <= e})
        seg = esc(text[a:b])
        if who:
            cls = "both" if len(who) > 1 else ("cb" if who[0] == "baseline" else "cv")
            out.append(f'<mark class="{cls}" title="cited by {esc(" and ".join(names[w] for w in who))}">{seg}</mark>')
        else:
            out.append(seg)
    return "".join(out)


def documents_html(item: Mapping[str, Any], blind: bool = False) -> str:
    ev = (item.get("context") or {}).get("documents")
    if not ev:
        return ""
    names = {r: side_label(item, r, blind) for r in ("baseline", "variant")}
    cards = []
    for d in ev["docs"]:
        flags = []
        if d.get("access") not in (None, "public"):
            flags.append(
                f'<span class="tag restricted">{esc(d["access"])}' + (f" ({esc(', '.join(d.get('roles') or []))})" if d.get("roles") else "") + "</span>"
            )
        if d.get("gold") and not blind:
            flags.append('<span class="tag">gold</span>')
        if d.get("dropped"):  # left out of the variant's prompt by its context trimming
            flags.append(f'<span class="tag restricted">not shown to {esc(names["variant"])}: dropped by context trimming</span>')
        for role in ("baseline", "variant"):
            if d.get(role):
                flags.append(f'<span class="tag c{role[0]}">cited by {esc(names[role])}</span>')
        text = _marked(d["text"], d.get("spans") or {}, names)
        cards.append(
            f'<div class="doc"><div class="dh"><code>{esc(d["id"])}</code> {esc(d.get("title"))} {" ".join(flags)}</div><div class="dt">{text}</div></div>'
        )
    legend = f'<p class="muted"><mark class="cb">cited by {esc(names["baseline"])}</mark> <mark class="cv">cited by {esc(names["variant"])}</mark> <mark class="both">by both</mark></p>'
    return legend + "".join(cards)


def asked_html(item: Mapping[str, Any]) -> str:
    ctx = item.get("context") or {}
    brief = ctx.get("brief")
    if not brief:
        return '<p class="muted">No context stored with this item (flagged before queue schema 3): flag its run again to add it.</p>'
    parts = []
    if brief.get("system"):
        parts.append(f'<div class="msg system"><span class="role">system</span><pre>{esc(brief["system"])}</pre></div>')
    for m in brief.get("messages") or []:
        parts.append(f'<div class="msg"><span class="role">{esc(m["role"])}</span><pre>{esc(m["text"])}</pre></div>')
    if brief.get("user_role"):
        parts.append(f'<p class="muted">asked by a user with the role <b>{esc(brief["user_role"])}</b></p>')
    exp = brief.get("expected") or {}
    if exp:
        rows = "".join(f"<tr><th>{esc(k.replace('_', ' '))}</th><td>{_val(v)}</td></tr>" for k, v in exp.items())
        parts.append(f'<h5>a good answer</h5><table class="kv">{rows}</table>')
    return "".join(parts)


def _val(v: object) -> str:
    if isinstance(v, list):
        return esc(", ".join(map(str, v)))
    if isinstance(v, str) and "\n" in v:
        return f"<pre>{esc(v)}</pre>"
    return esc(v)


def _json_html(j: Mapping[str, Any] | None, schema: str | None, names: Mapping[str, str]) -> str:
    if not j and not schema:
        return ""
    parts = ["<h5>JSON, key by key</h5>"]
    if j:
        for role in ("baseline", "variant"):
            if j.get(f"{role}_error"):
                parts.append(f'<p class="warn">{esc(names[role])}: {esc(j[f"{role}_error"])}</p>')
        rows = "".join(
            f'<tr class="{esc(r["change"])}"><td><code>{esc(r["path"])}</code></td><td>{esc(r["baseline"])}</td><td>{esc(r["variant"])}</td><td class="st">{esc(r["change"])}</td></tr>'
            for r in j["rows"]
        )
        parts.append(f'<table class="grid"><tr><th>key</th><th>{esc(names["baseline"])}</th><th>{esc(names["variant"])}</th><th></th></tr>{rows}</table>')
    if schema:
        parts.append(f"<details><summary>schema</summary><pre>{esc(schema)}</pre></details>")
    return "".join(parts)


def _terms_html(t: Mapping[str, Any] | None, names: Mapping[str, str]) -> str:
    if not t:
        return ""
    rows = "".join(
        f'<tr class="{esc(r["status"])}"><td>{esc(r["term"])}</td><td>{esc(r["baseline"] or "–")}</td><td>{esc(r["variant"] or "–")}</td><td class="st">{esc(r["status"])}</td></tr>'
        for r in t["rows"]
    )
    forb = t.get("forbidden") or {}
    bad = "".join(f'<p class="warn">{esc(names[s])} writes forbidden {esc(", ".join(forb[s]))}</p>' for s in ("baseline", "variant") if forb.get(s))
    return f'<h5>glossary terms</h5><table class="grid"><tr><th>term</th><th>{esc(names["baseline"])}</th><th>{esc(names["variant"])}</th><th></th></tr>{rows}</table>{bad}'


def _code_html(c: Mapping[str, Any] | None, tests: str | None, names: Mapping[str, str]) -> str:
    if not c:
        return ""
    rows = []
    for role in ("baseline", "variant"):
        s = c.get(role) or {}
        status = "pass" if s.get("passed") else ("fail" if s.get("passed") is False else (s.get("status") or "–"))
        rows.append(
            f'<tr class="{"same" if s.get("passed") else "changed"}"><td>{esc(names[role])}</td><td>{esc(status)}</td><td>{esc(s.get("reason"))}<pre>{esc(s.get("stderr"))}</pre></td></tr>'
        )
    test_text = tests or c.get("tests")
    shown = f"<details open><summary>tests</summary><pre>{esc(test_text)}</pre></details>" if test_text else ""
    return f'<h5>unit tests</h5><table class="grid"><tr><th>side</th><th>result</th><th>why</th></tr>{"".join(rows)}</table>{shown}'


def checks_html(item: Mapping[str, Any], blind: bool = False) -> str:
    """JSON by key with the schema, glossary terms kept or dropped, unit tests, failed checks per side."""
    ctx = item.get("context") or {}
    names = {r: side_label(item, r, blind) for r in ("baseline", "variant")}
    brief = ctx.get("brief") or {}
    parts = [
        _json_html(ctx.get("json"), brief.get("schema"), names),
        _terms_html(ctx.get("terms"), names),
        _code_html(ctx.get("code"), brief.get("tests"), names),
    ]
    failed = ctx.get("checks") or {}
    if not blind and any(failed.values()):
        lis = "".join(
            f"<li><b>{esc(names[s])}</b> fails {esc(f['metric'])}{': ' + esc(f['why']) if f['why'] else ''}</li>"
            for s in ("baseline", "variant")
            for f in failed.get(s) or []
        )
        parts.append(f"<h5>failed checks</h5><ul>{lis}</ul>")
    return "".join(p for p in parts if p)


def scores_rows(item: Mapping[str, Any]) -> list[dict]:
    """Metrics with a value on both sides (a drift metric the baseline has no value for is left out),
    values rounded, and whether they differ."""
    b, v = item.get("baseline_scores") or {}, item.get("variant_scores") or {}
    rows = []
    for m in sorted(set(b) & set(v)):
        bb, vv = b[m], v[m]
        if bb.get("value") is None and bb.get("passed") is None or vv.get("value") is None and vv.get("passed") is None:
            continue
        bp, vp = bb.get("passed"), vv.get("passed")
        bx, vx = bb.get("value"), vv.get("value")
        changed = (bp is not None and vp is not None and bp != vp) or (bx is not None and vx is not None and abs(bx - vx) > 1e-9)
        rows.append(
            {"metric": m, "baseline": bx, "baseline_pass": bp, "variant": vx, "variant_pass": vp, "changed": changed, "worse": bool(bp) and vp is False}
        )
    return rows


def scores_html(item: Mapping[str, Any]) -> str:
    rows = scores_rows(item)
    if not rows:
        return '<p class="muted">no metric has a value on both sides</p>'
    body = "".join(
        f'<tr class="{"worse" if r["worse"] else "changed" if r["changed"] else "same"}"><td><code>{esc(r["metric"])}</code></td>'
        f"<td>{fmt(r['baseline'])} {fmt(r['baseline_pass']) if r['baseline_pass'] is not None else ''}</td>"
        f"<td>{fmt(r['variant'])} {fmt(r['variant_pass']) if r['variant_pass'] is not None else ''}</td></tr>"
        for r in rows
    )
    return f'<table class="grid num"><tr><th>metric</th><th>baseline</th><th>variant</th></tr>{body}</table>'


def history_html(history: Sequence[Mapping[str, Any]], *, hidden: bool = False, blind: bool = False) -> str:
    """The item's verdicts with their notes, oldest first; retracted ones struck through."""
    if hidden:
        return '<p class="muted">Independent review: earlier verdicts are hidden until you have given yours.</p>'
    if not history:
        return '<p class="muted">no verdict yet</p>'
    lis = []
    for h in history:
        if h["role"] == "retraction":
            what = f"undid verdict #{h['retracts']}"
        else:
            what = ("adjudicated " if h["role"] == "adjudication" else "") + h["verdict"]
            if h.get("answer") and not blind:
                what += f" (blind: {h['answer'].replace('_', ' ')}, left was the {h.get('left_side')})"
            if h.get("expires"):
                what += f", waiver until {h['expires'][:10]}"
            elif h.get("expires_rubric"):
                what += ", waiver until the rubric changes"
        cls = ' class="gone"' if h.get("retracted") else ""
        note = f' <span class="note">"{esc(h["note"])}"</span>' if h.get("note") else ""
        lis.append(f'<li{cls}><span class="muted">{esc(h["created"][:16].replace("T", " "))}</span> <b>{esc(h["reviewer"])}</b>: {esc(what)}{note}</li>')
    return f'<ol class="history">{"".join(lis)}</ol>'


def context_tabs(item: Mapping[str, Any], history: Sequence[Mapping[str, Any]] = (), *, blind: bool = False, hide_history: bool = False) -> list[dict]:
    """[{id, title, html}] for the panel's side tabs, in order, empty ones left out."""
    tabs = [
        {"id": "asked", "title": "Asked", "html": asked_html(item)},
        {"id": "docs", "title": "Documents", "html": documents_html(item, blind)},
        {"id": "checks", "title": "Checks", "html": checks_html(item, blind)},
        {"id": "scores", "title": "Scores", "html": "" if blind else scores_html(item)},
        {
            "id": "history",
            "title": f"History ({sum(1 for h in history if h['role'] != 'retraction')})",
            "html": history_html(history, hidden=hide_history, blind=blind),
        },
    ]
    return [t for t in tabs if t["html"]]


def first_tab(item: Mapping[str, Any]) -> str:
    """The tab that holds the evidence for the item's main reason."""
    codes = set(item.get("reason_codes") or [])
    ctx = item.get("context") or {}
    if codes & {"citations", "leak"} and ctx.get("documents"):
        return "docs"
    if (codes & {"json_drift"} or ctx.get("code")) and (ctx.get("json") or ctx.get("code")):
        return "checks"
    return "asked"


# ---------------------------------------------------------------------------------------------
# static cards


def render_item(item: Mapping[str, Any], *, blind: bool = False) -> str:
    """One item as a static card: header, reasons, the diff, then every context section."""
    tabs = context_tabs(item, item.get("history") or (), blind=blind)
    sections = "".join(
        f"<details{' open' if t['id'] in ('asked', first_tab(item)) else ''}><summary>{esc(t['title'])}</summary>{t['html']}</details>" for t in tabs
    )
    return f'<div class="evs card"><div class="hd">{header_html(item, blind)}</div>{reasons_html(item, blind)}{item_diff(item, blind)}{sections}</div>'


def page(body: str) -> str:
    """A fragment with the review styles, for a shadow root or a standalone page."""
    return f"<style>{CSS}</style>{body}"


def queue_table(rows: Sequence[Mapping[str, Any]], limit: int = 200) -> str:
    """The queue as a table (id, variant, case, reasons, triage, state, reviewer, note), highest impact first."""
    order = sorted(
        rows, key=lambda r: (r.get("verdict") not in (None, "unsure", "pending", "disputed") and not r.get("waiver_expired"), -r.get("priority", 0), r["id"])
    )
    body = "".join(
        f"<tr><td>{r['id']}</td><td>{esc(r['variant'])}</td><td>{esc(r['case_id'])}</td><td>{esc(', '.join(r['reason_codes']))}</td>"
        f'<td>{esc(r.get("triage") or "")}</td><td class="s-{esc((r.get("verdict") or "open").split()[0])}">{esc("open (waiver expired)" if r.get("waiver_expired") else r.get("verdict") or "open")}</td>'
        f"<td>{esc(r.get('reviewer') or '')}</td><td>{esc(r.get('note') or '')}</td></tr>"
        for r in order[:limit]
    )
    more = f'<p class="muted">{len(order) - limit} more not shown</p>' if len(order) > limit else ""
    head = "<tr><th>id</th><th>variant</th><th>case</th><th>reasons</th><th>triage</th><th>state</th><th>reviewer</th><th>note</th></tr>"
    return f'<table class="grid">{head}{body}</table>{more}'


def counts_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Items per variant and state (open counts waivers that expired)."""
    states = ["open", "pending", "disputed", "unsure", "acceptable", "regression"]
    tally: dict[str, dict[str, int]] = {}
    for r in rows:
        st = "open" if (r.get("verdict") is None or r.get("waiver_expired")) else r["verdict"]
        tally.setdefault(r["variant"], {}).setdefault(st, 0)
        tally[r["variant"]][st] += 1
    used = [s for s in states if any(s in t for t in tally.values())] or ["open"]
    head = "<tr><th>variant</th>" + "".join(f"<th>{s}</th>" for s in used) + "</tr>"
    body = "".join(f"<tr><td>{esc(v)}</td>" + "".join(f"<td>{t.get(s, 0)}</td>" for s in used) + "</tr>" for v, t in sorted(tally.items()))
    return f'<table class="grid num">{head}{body}</table>'
