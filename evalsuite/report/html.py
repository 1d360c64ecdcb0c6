"""report.html: one self-contained page (inline CSS, script and images; no network resource).

Rendered with Jinja2 (autoescaping on: model outputs are untrusted text) from the templates beside
this module. Side-by-side diffs are difflib opcodes over word and punctuation tokens, with the
whitespace kept, so prose, JSON and code all diff readably.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from .model import ReportData

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
MAX_DIFF_TOKENS = 6000  #: beyond this, texts are shown without token highlighting (difflib is quadratic)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text or "")


def side_by_side(before: str | None, after: str | None) -> tuple[Markup, Markup, int]:
    """(baseline html, variant html, changed tokens): removed tokens in <del>, added ones in <ins>."""
    a, b = tokens(before or ""), tokens(after or "")
    if len(a) + len(b) > 2 * MAX_DIFF_TOKENS:
        return Markup(escape(before or "")), Markup(escape(after or "")), -1
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    left: list[str] = []
    right: list[str] = []
    changed = 0
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            seg = escape("".join(a[i1:i2]))
            left.append(seg)
            right.append(seg)
            continue
        if i2 > i1:
            left.append(Markup("<del>") + escape("".join(a[i1:i2])) + Markup("</del>"))
            changed += sum(1 for t in a[i1:i2] if not t.isspace())
        if j2 > j1:
            right.append(Markup("<ins>") + escape("".join(b[j1:j2])) + Markup("</ins>"))
            changed += sum(1 for t in b[j1:j2] if not t.isspace())
    return Markup("").join(left), Markup("").join(right), changed


# ---------------------------------------------------------------------------------------------
# number formats (Jinja filters)


def _bad(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x)))


def num(x: float | None, spec: str = ".3f") -> str:
    return "-" if _bad(x) else format(x, spec)


def signed(x: float | None, spec: str = "+.3f") -> str:
    return "-" if _bad(x) else format(x, spec)


def pval(x: float | None) -> str:
    if x is None or _bad(x):
        return "-"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def seconds(x: float | None) -> str:
    if x is None or _bad(x):
        return "-"
    if x < 0.001:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s"


def ratio(x: float | None) -> str:
    return "-" if _bad(x) else f"×{x:.2f}"


def env():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    e = Environment(
        loader=PackageLoader("evalsuite.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    e.filters.update(num=num, signed=signed, pval=pval, seconds=seconds, ratio=ratio)
    e.globals.update(side_by_side=side_by_side)
    return e


def render_html(data: ReportData, plots: dict[str, str] | None = None, *, report_md: str | None = None) -> str:
    """The page for a ReportData (plots: name -> data URI, from plots.report_plots)."""
    from .. import __version__
    from ..backends.vllm_metrics import FIGURES
    from .stability import load_rows

    load = getattr(data.comparison, "load", None)
    tpl = env().get_template("report.html.j2")
    return tpl.render(
        load_rows=load_rows(load),
        load_settings=dict(load.settings) if load is not None else {},
        load_failed=dict(load.failed) if load is not None else {},
        d=data,
        v=data.verdict,
        plots=plots or {},
        evalsuite_version=__version__,
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        libraries=sorted((data.signature.get("libraries") or {}).items()),
        hardware=sorted((data.signature.get("hardware") or {}).items()),
        casesets=sorted((data.signature.get("casesets") or {}).items()),
        generation=sorted((data.signature.get("generation") or {}).items()),
        metric_variants=data.variants + data.noise_runs,
        engines={m["name"]: m["engine"] for m in data.models},
        metric_figures=list(FIGURES.items()),
    )


def write_html(data: ReportData, path: str | Path, plots: dict[str, str] | None = None) -> Path:
    from ..yamlio import atomic_write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render_html(data, plots))
    return path
