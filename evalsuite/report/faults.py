"""The faults part of the stability report: per served variant, each fault probe's recorded outcome
(evalsuite.run.faults), as rows for the HTML partial `faults.html.j2`, lines for the markdown
summary and a table for the terminal verdict. Nothing here prints or probes: it reads faults.json.
"""

from __future__ import annotations

from rich import box
from rich.markup import escape
from rich.table import Table

from ..cases.fault_options import FAULT_KINDS, FAULTS
from ..run.faults import read_faults
from ..run.store import RunStore
from ..states import CANNOT_JUDGE_WORD, FAILED, REJECTED_AS_DESIGNED, SURVIVED

#: how each fault is named for people (the table of fault kinds says)
FAULT_TITLES = {f.name: f.title for f in FAULTS}
#: the CSS class (and terminal colour) of each outcome
OUTCOME_CLASS = {REJECTED_AS_DESIGNED: "ok", SURVIVED: "ok", FAILED: "fail", CANNOT_JUDGE_WORD: "warn"}
_COLOUR = {"ok": "green", "fail": "red", "warn": "yellow"}
_MARK = {"ok": "✅", "fail": "❌", "warn": "❔"}


def fault_rows(store: RunStore) -> list[dict]:
    """One row per (served variant, fault) the run recorded, in FAULT_KINDS order: variant, kind,
    title, outcome, its class, evidence and the timings as `name value` text."""
    rows = []
    for variant, kinds in sorted(read_faults(store).items()):
        for kind in sorted(kinds, key=lambda k: FAULT_KINDS.index(k) if k in FAULT_KINDS else len(FAULT_KINDS)):
            res = kinds[kind]
            rows.append(
                {
                    "variant": variant,
                    "kind": kind,
                    "title": FAULT_TITLES.get(kind, kind),
                    "outcome": res.outcome,
                    "css": OUTCOME_CLASS.get(res.outcome, "warn"),
                    "evidence": res.evidence,
                    "timings": ", ".join(f"{k} {v:.2f}" for k, v in res.timings.items()),
                }
            )
    return rows


def fault_markdown_lines(rows: list[dict]) -> list[str]:
    """The markdown subsection (empty when no fault was probed)."""
    if not rows:
        return []
    lines = ["", "### Stability: faults", "", "| variant | fault | outcome | evidence |", "|---|---|---|---|"]
    for r in rows:
        evidence = r["evidence"].replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| `{r['variant']}` | {r['title']} | {_MARK[r['css']]} {r['outcome']} | {evidence} |")
    return lines


def faults_table(rows: list[dict]) -> Table | None:
    """The terminal table (None when no fault was probed): one row per variant and fault."""
    if not rows:
        return None
    t = Table(title="stability: faults", box=box.SIMPLE, title_justify="left")
    for col in ("variant", "fault", "outcome", "evidence"):
        t.add_column(col, overflow="fold")
    for r in rows:
        colour = _COLOUR[r["css"]]
        t.add_row(escape(r["variant"]), r["title"], f"[{colour}]{r['outcome']}[/{colour}]", escape(_short(r["evidence"])))
    return t


def _short(text: object, limit: int = 160) -> str:
    text = str(text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
