"""What the review notebook shows and the buttons it offers, built here so the notebook holds no logic.

`render_item(item)` is one item as HTML: the reasons, a side-by-side diff of the two outputs with the
changes highlighted (difflib.HtmlDiff), the JSON drift and the citations as tables, and the scores.
`ReviewPanel` is the ipywidgets panel: it claims the next item (`api.next_item`) and records the
verdict of a button through `api.annotate`, the same call as `evalsuite review annotate`.
"""

from __future__ import annotations

import difflib
import html
import json
import textwrap
from typing import Any

from . import api

WRAP = 72

_CSS = """<style>
.evs-review table.diff {font-family: monospace; font-size: 12px; border-collapse: collapse; width: 100%}
.evs-review .diff_header {background: #eee; color: #666; padding: 0 4px}
.evs-review td {vertical-align: top; padding: 0 4px}
.evs-review .diff_add {background: #c8f0c8} .evs-review .diff_chg {background: #fff2a8} .evs-review .diff_sub {background: #f8c8c8}
.evs-review table.kv {border-collapse: collapse; font-size: 12px} .evs-review table.kv td, .evs-review table.kv th {border: 1px solid #ddd; padding: 2px 6px}
.evs-review .changed {background: #fff2a8}
</style>"""


def _lines(text: str | None) -> list[str]:
    if text is None:
        return ["(output not stored)"]
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out.extend(textwrap.wrap(para, WRAP, replace_whitespace=False, drop_whitespace=False) or [""])
    return out


def side_by_side(item: dict) -> str:
    """The baseline's and the variant's outputs side by side, changed words highlighted (HTML table)."""
    return difflib.HtmlDiff(tabsize=4, wrapcolumn=WRAP + 8).make_table(
        _lines(item.get("baseline_output")),
        _lines(item.get("variant_output")),
        f"baseline ({item.get('baseline') or 'baseline'})",
        f"{item.get('variant')}",
        context=False,
    )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix or "$": {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out or {prefix or "$": []}
    return {prefix or "$": value}


def json_table(item: dict) -> list[dict] | None:
    """Both outputs' JSON flattened to paths: [{path, baseline, variant, changed}]; None unless both parse."""
    from ..scoring.jsonformat import extract_json

    b, v = extract_json(item.get("baseline_output") or ""), extract_json(item.get("variant_output") or "")
    if not (b.ok and v.ok):
        return None
    fb, fv = _flatten(b.value), _flatten(v.value)
    rows = []
    for path in list(dict.fromkeys(list(fb) + list(fv))):
        bv, vv = fb.get(path, "(absent)"), fv.get(path, "(absent)")
        rows.append({"path": path, "baseline": bv, "variant": vv, "changed": bv != vv})
    return rows


def citations(item: dict) -> dict | None:
    """The cited sources on each side, from the `citations` reason (None when they did not change)."""
    for r in item.get("reasons") or []:
        if r.get("code") == "citations":
            d = r.get("detail") or {}
            return {
                "baseline": d.get("baseline_cited", []),
                "variant": d.get("cited", []),
                "only_baseline": d.get("only_baseline", []),
                "only_variant": d.get("only_variant", []),
            }
    return None


def scores_table(item: dict) -> list[dict]:
    """Per metric: the baseline's and the variant's value and pass, and whether they differ."""
    b, v = item.get("baseline_scores") or {}, item.get("variant_scores") or {}
    rows = []
    for m in sorted(set(b) | set(v)):
        bb, vv = b.get(m, {}), v.get(m, {})
        rows.append(
            {
                "metric": m,
                "baseline": bb.get("value"),
                "baseline_pass": bb.get("passed"),
                "variant": vv.get("value"),
                "variant_pass": vv.get("passed"),
                "changed": (bb.get("value"), bb.get("passed")) != (vv.get("value"), vv.get("passed")),
            }
        )
    return rows


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cls = ' class="changed"' if r.get("changed") else ""
        body.append(
            f"<tr{cls}>"
            + "".join(f"<td>{html.escape(json.dumps(r.get(c), ensure_ascii=False) if not isinstance(r.get(c), str) else r.get(c))}</td>" for c in cols)
            + "</tr>"
        )
    return f'<table class="kv"><tr>{head}</tr>{"".join(body)}</table>'


def render_item(item: dict) -> str:
    """One item as HTML: header, reasons, side-by-side diff, JSON drift and citations tables, scores."""
    verdict = item.get("verdict") or "open"
    parts = [
        _CSS,
        '<div class="evs-review">',
        f"<h4>item #{item['id']}: {html.escape(item['case_id'])} on {html.escape(item['variant'])} ({html.escape(item.get('scenario') or '')}) - {verdict}</h4>",
        f"<p>first flagged in run {html.escape(item['run_id'])}; seen in {item.get('n_runs', 1)} run(s); {item.get('n_verdicts', 0)} verdict(s)</p>",
        "<ul>" + "".join(f"<li><b>{html.escape(r['code'])}</b>: {html.escape(r['message'])}</li>" for r in item.get("reasons") or []) + "</ul>",
        side_by_side(item),
    ]
    jt = json_table(item)
    if jt is not None and any(r["changed"] for r in jt):
        parts += ["<h5>JSON, path by path</h5>", _table(jt, ["path", "baseline", "variant"])]
    for r in item.get("reasons") or []:
        if r.get("code") == "json_drift":
            det = {k: v for k, v in (r.get("detail") or {}).items() if k != "counts" and v}
            parts += ["<h5>JSON drift</h5>", _table([{"kind": k, "changes": v} for k, v in det.items()], ["kind", "changes"])]
    cit = citations(item)
    if cit is not None:
        parts += [
            "<h5>citations</h5>",
            _table([{"side": k, "sources": v, "changed": k.startswith("only") and bool(v)} for k, v in cit.items()], ["side", "sources"]),
        ]
    parts += ["<h5>scores</h5>", _table(scores_table(item), ["metric", "baseline", "baseline_pass", "variant", "variant_pass"]), "</div>"]
    return "\n".join(parts)


class ReviewPanel:
    """ipywidgets panel: the claimed item, a note box, and one button per verdict (each calls api.annotate)."""

    def __init__(self, queue: Any = None, reviewer: str | None = None, lease_s: float = 30 * 60.0):
        import ipywidgets as w

        self.queue, self.reviewer, self.lease_s = queue, reviewer or api.default_reviewer(), lease_s
        self.item: dict | None = None
        self.recorded: list[dict] = []  #: verdict rows written by this panel
        self.out = w.HTML()
        self.note = w.Text(placeholder="note (why)", layout=w.Layout(width="60%"))
        self.status = w.HTML()
        self.buttons = {v: w.Button(description=v, button_style=s) for v, s in (("acceptable", "success"), ("regression", "danger"), ("unsure", "warning"))}
        for verdict, b in self.buttons.items():
            b.on_click(lambda _b, verdict=verdict: self.record(verdict))
        self.skip = w.Button(description="skip")
        self.skip.on_click(lambda _b: self.next(release=True))
        self.widget = w.VBox([self.status, self.out, w.HBox([self.note, *self.buttons.values(), self.skip])])
        self.next()

    def next(self, release: bool = False) -> dict | None:
        """Claim the next open item (optionally giving the current one back) and show it."""
        if release and self.item is not None:
            api.release(self.item["id"], self.reviewer, queue=self.queue)
        self.item = api.next_item(self.reviewer, lease_s=self.lease_s, queue=self.queue)
        self.note.value = ""
        if self.item is None:
            self.out.value = "<p>nothing left to review</p>"
        else:
            self.out.value = render_item(self.item)
        self.status.value = f"<b>{html.escape(self.reviewer)}</b>: {api.stats(self.queue)['open']} open item(s)"
        return self.item

    def record(self, verdict: str) -> dict | None:
        """The buttons' callback: annotate the shown item, then move on."""
        if self.item is None:
            return None
        row = api.annotate(self.item["id"], verdict, note=self.note.value, reviewer=self.reviewer, queue=self.queue)
        self.recorded.append(row)
        self.next()
        return row

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
