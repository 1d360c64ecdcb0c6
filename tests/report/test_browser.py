"""report.html in headless Chromium: it renders, its script runs without console errors, its
filters work, and it requests no network resource. Saves a screenshot in the test's tmp dir (and
copies it to $EVALSUITE_SCREENSHOT_DIR when set, for a person to look at).

Driven by playwright-python with the system's Chromium (Debian's `chromium` package; `.ci/run`
installs it) as its executable: playwright's own browser download is never used. Skips with the
reason when either is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-default-apps", "--disable-extensions"]


def find_chromium() -> str | None:
    """The system Chromium: $EVALSUITE_CHROMIUM, else chromium / chromium-browser / google-chrome on PATH."""
    env = os.environ.get("EVALSUITE_CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def open_in_chromium(html: Path, screenshot: Path, profile: Path, actions=None) -> dict:
    """Load the page from file://, run `actions(page)`, save a full-page screenshot; return the
    console messages, page errors, and every request other than the page itself and data: URIs."""
    from playwright.sync_api import sync_playwright

    exe = find_chromium()
    url = html.resolve().as_uri()
    seen: dict = {"console": [], "errors": [], "requests": [], "failed": []}
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=exe, headless=True, args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            page = ctx.new_page()
            page.on("console", lambda m: seen["console"].append((m.type, m.text)))
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            page.on("request", lambda r: seen["requests"].append(r.url) if r.url != url and not r.url.startswith("data:") else None)
            page.on("requestfailed", lambda r: seen["failed"].append(r.url))
            page.goto(url, wait_until="load")
            page.wait_for_timeout(200)
            if actions is not None:
                seen["actions"] = actions(page)
            page.screenshot(path=str(screenshot), full_page=False)
        finally:
            ctx.close()
    return seen


def _skip_reason() -> str | None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright-python is not installed (pip install 'evalsuite[dev]')"
    if find_chromium() is None:
        return "no Chromium found (apt-get install chromium, or set EVALSUITE_CHROMIUM)"
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_report_in_headless_chromium(report, tmp_path):
    shot = tmp_path / "report.png"

    def actions(page):
        out = {"cards": page.locator("details.case").count()}
        out["title"] = page.title()
        # the filters work without a server: one variant, then flagged only
        page.select_option("#f-variant", "badjson")
        out["visible_cards_badjson"] = page.locator("details.case:visible").count()
        out["visible_metric_blocks"] = page.locator(".metric-block:visible").count()
        page.select_option("#f-variant", "")
        page.select_option("#f-scenario", "kb_qa")
        out["visible_cards_kb"] = page.locator("details.case:visible").count()
        page.select_option("#f-scenario", "")
        page.check("#f-flagged")
        out["visible_metric_rows_flagged"] = page.locator("table.metrics tbody tr:visible").count()
        out["counter"] = page.locator("#flagged-visible").inner_text()
        page.uncheck("#f-flagged")
        out["images_loaded"] = page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        return out

    seen = open_in_chromium(report.html, shot, tmp_path / "profile", actions)
    keep = os.environ.get("EVALSUITE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")
    assert shot.is_file() and shot.stat().st_size > 10_000, "a screenshot was saved"
    errors = [m for m in seen["console"] if m[0] in ("error", "warning")]
    assert not errors and not seen["errors"], (errors, seen["errors"])
    assert not seen["requests"] and not seen["failed"], f"network requests from a self-contained page: {seen['requests'] + seen['failed']}"
    a = seen["actions"]
    d = report.data
    assert a["cards"] == len(d.flagged) and "evalsuite report" in a["title"]
    assert a["visible_cards_badjson"] == sum(1 for f in d.flagged if f.variant == "badjson") > 0
    assert a["visible_metric_blocks"] == 1
    assert a["visible_cards_kb"] == sum(1 for f in d.flagged if f.scenario == "kb_qa") > 0
    assert a["visible_metric_rows_flagged"] == sum(1 for r in d.metric_rows if r["flagged"]) > 0
    assert a["counter"] == str(len(d.flagged))
    assert a["images_loaded"]


#: in the page: each plot's label, title and legend boxes (PNG pixels, from data-boxes) scaled to the
#: image as the browser lays it out, and every pair of labels (or a legend and a title) that overlaps
BOXES_JS = """() => Array.from(document.querySelectorAll('img.plot')).map(img => {
  const r = img.getBoundingClientRect(), k = r.width / img.naturalWidth;
  const boxes = JSON.parse(img.dataset.boxes || '[]').map(b => ({kind: b.kind, text: b.text,
    left: r.left + k * b.box[0], top: r.top + k * b.box[1], right: r.left + k * b.box[2], bottom: r.top + k * b.box[3]}));
  const clash = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const pairs = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
    const kinds = [a.kind, b.kind].sort().join('+');
    if ((kinds === 'label+label' || kinds === 'legend+title') && clash(a, b)) pairs.push([a.text, b.text]);
  }));
  const inside = boxes.every(b => b.left >= r.left - 1 && b.right <= r.right + 1 && b.top >= r.top - 1 && b.bottom <= r.bottom + 1);
  return {id: img.id, labels: boxes.filter(b => b.kind === 'label').map(b => b.text), kinds: boxes.map(b => b.kind), overlaps: pairs, inside: inside};
})"""

#: variants at the same spot (the demo's served and speculative ones), long names, and enough of them
#: for a two-row legend: the labels must be moved apart, the legend must clear the first title
CROWDED = [("served-continuous-batching", "pass", 0.0, 1.0, None), ("speculative-prompt-lookup", "pass", 0.0, 1.0, 1.0),
           ("speculative-draft", "pass", 0.0, 1.0, 1.0), ("bnb-int8", "warn", -0.02, 0.6, 0.5), ("bnb-nf4", "fail", -0.1, 0.8, 0.35),
           ("gptq-4bit", "fail", -0.1, 0.8, 0.35), ("gguf-q4_1-llamacpp", "fail", -0.1, 0.8, 0.35)]


def _crowded_page(report, path: Path) -> Path:
    from evalsuite.report.html import render_html
    from evalsuite.report.plots import deltas_png, tradeoff_png

    names = [n for n, *_ in CROWDED]
    pts = [{"variant": n, "status": st, "quality": q, "worst": q - 0.05, "speedup": sp, "memory_ratio": m} for n, st, q, sp, m in CROWDED]
    rows = [{"variant": v, "scenario": s, "metric": m, "delta": -0.1, "ci_low": -0.3, "ci_high": 0.1, "pass_fail": True, "n": 3, "noise_run": False, "status": "ok"}
            for v in names for s, m in (("brand", "json.valid"), ("code", "code.pass"), ("kb_qa", "citations.recall"))]
    tb, db = [], []
    plots = {"tradeoff": tradeoff_png(pts, tb), "deltas": deltas_png(rows, names, ["brand", "code", "kb_qa"], db)}
    plots.update(tradeoff_boxes=json.dumps(tb), deltas_boxes=json.dumps(db))
    path.write_text(render_html(report.data, plots), "utf-8")
    return path


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
@pytest.mark.parametrize("page", ["report", "crowded"])
def test_plot_labels_do_not_overlap(report, tmp_path, page):
    """Laid out by the browser: no two variant labels of a plot overlap (variants at the same spot
    included), none leaves its image, and the deltas plot's legend clears every panel title."""
    html = report.html if page == "report" else _crowded_page(report, tmp_path / "crowded.html")
    seen = open_in_chromium(html, tmp_path / "plots.png", tmp_path / "profile", lambda p: p.evaluate(BOXES_JS))
    plots = {p["id"]: p for p in seen["actions"]}
    assert set(plots) == {"plot-tradeoff", "plot-deltas"}, plots
    for p in plots.values():
        assert not p["overlaps"], (p["id"], p["overlaps"])
        assert p["inside"], p["id"]
    assert {"legend", "title"} <= set(plots["plot-deltas"]["kinds"])
    labels = plots["plot-tradeoff"]["labels"]
    if page == "crowded":
        # every variant labelled in the speed panel, and again in the memory panel where it has a figure
        assert sorted(labels) == sorted([n for n, *_ in CROWDED] + [n for n, _, _, _, m in CROWDED if m is not None])
    else:
        assert labels and set(labels) <= set(report.data.variants)
