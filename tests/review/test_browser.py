"""notebooks/review.ipynb in a real JupyterLab, in headless Chromium at 1366x768, as a reviewer uses it.

JupyterLab runs on loopback (a free port, a token, a temporary root holding a copy of the notebook
and a small queue flagged from the fake run); Playwright drives the system's Chromium: it opens the
notebook, runs every cell through JupyterLab's menu, checks that the panel's item line, reasons,
diff and buttons fit one 1366x768 screen and that JupyterLab's CSS does not reach the diff, then
reviews by keyboard and by button (acceptable, regression, skip, undo, a note with Enter, back) and
checks each action's rows in the SQLite queue. It fails on any console error, page error or "Error
displaying widget", checks that no key reached JupyterLab (no cell was added or removed), reloads
the page and finds the panel again, and saves screenshots ($EVALSUITE_SCREENSHOT_DIR keeps copies).
The time from opening the notebook to the first verdict is printed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from evalsuite.review import api
from jupyterlab_harness import VIEWPORT, chromium_page, keep, lab_server, open_and_run, skip_reason, wait_kernel_idle, widget_errors

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))

REVIEWER = "browser-reviewer"


def rows(db_path: Path) -> list[tuple]:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT id, item_id, verdict, reviewer, note, role, retracts FROM verdicts ORDER BY id").fetchall()


def wait_rows(db_path: Path, n: int, timeout_s: float = 30.0) -> list[tuple]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = rows(db_path)
        if len(r) >= n:
            return r
        time.sleep(0.1)
    raise AssertionError(f"expected {n} verdict rows, found {rows(db_path)}")


def shown_item(page) -> int:
    text = page.locator(".evs-desk .header").inner_text()
    return int(text.split("#", 1)[1].split()[0])


def wait_item_change(page, old: int, timeout_ms: int = 30_000) -> int:
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        now = shown_item(page)
        if now != old:
            return now
        page.wait_for_timeout(100)
    raise AssertionError(f"the panel still shows item #{old}")


@pytest.fixture
def lab_root(review_run, tmp_path, repo):
    """A root directory with the notebook and a queue: 5 flagged items and an audit share of 2."""
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(repo / "notebooks" / "review.ipynb", root / "review.ipynb")
    rubric = tmp_path / "audit.yaml"
    rubric.write_text(review_run["rubric"].read_text().replace("review:\n", "review:\n  audit_rate: 0.4\n"), "utf-8")
    q = root / "review.sqlite"
    res = api.flag_run(review_run["store"], queue=q, rubric=rubric)
    assert (res.flagged, res.audited) == (5, 2)
    return root, q


def layout(page) -> dict:
    """Boxes of the panel's parts, and the diff's computed styles (JupyterLab's CSS must not reach them)."""
    return page.evaluate(
        """() => {
        const host = Array.from(document.querySelectorAll('.jp-OutputArea-output *')).find(e => e.shadowRoot && e.shadowRoot.querySelector('.evs-desk'));
        const root = host.shadowRoot;
        const box = s => { const r = root.querySelector(s).getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width}; };
        const tx = Array.from(root.querySelectorAll('table.sbs td.tx'));
        const cs = getComputedStyle(tx[0]);
        return {header: box('.header'), reasons: box('.reasons-box'), diff: box('.diff'), buttons: box('.btns'), note: box('.note'), panel: box('.evs-desk'),
                table: box('table.sbs'), tx0: tx[0].getBoundingClientRect().width, tx1: tx[1].getBoundingClientRect().width,
                textAlign: cs.textAlign, whiteSpace: cs.whiteSpace, tableLayout: getComputedStyle(root.querySelector('table.sbs')).tableLayout,
                viewport: {width: innerWidth, height: innerHeight}};
    }"""
    )


def test_review_notebook_in_jupyterlab_by_keyboard_and_by_button(lab_root, tmp_path, repo, capsys):
    root, q = lab_root
    env = {"EVALSUITE_REVIEW_QUEUE": str(q), "EVALSUITE_REVIEWER": REVIEWER, "PYTHONPATH": str(repo)}
    shots: list[Path] = []
    timings: dict[str, float] = {}
    with lab_server(root, env) as lab, chromium_page(tmp_path / "profile") as (page, seen):
        t0 = open_and_run(page, lab, "review.ipynb")
        page.wait_for_selector(".evs-desk .header b", timeout=60_000)
        timings["open_to_panel_s"] = time.monotonic() - t0
        n_cells = page.locator(".jp-Notebook .jp-Cell").count()

        # one screen: the item line, reasons, diff and buttons at once, at 1366x768
        page.locator(".evs-desk").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        box = layout(page)
        assert box["viewport"] == VIEWPORT
        for part in ("header", "reasons", "diff", "buttons", "note"):
            assert 0 <= box[part]["top"] < box[part]["bottom"] <= VIEWPORT["height"], (part, box)
        assert box["panel"]["bottom"] - box["panel"]["top"] <= 620
        # the diff's own styles, not JupyterLab's: left-aligned, wrapped in place, two equal text columns
        assert (box["textAlign"], box["whiteSpace"], box["tableLayout"]) == ("left", "pre-wrap", "fixed")
        assert abs(box["tx0"] - box["tx1"]) < 2 and box["tx0"] > 0.4 * box["table"]["width"]
        shots.append(tmp_path / "review-panel-1366x768.png")
        page.screenshot(path=str(shots[-1]))

        # by keyboard: a = acceptable
        first = shown_item(page)
        page.locator(".evs-desk .header").click()
        page.keyboard.press("a")
        r = wait_rows(q, 1)
        timings["open_to_first_verdict_s"] = time.monotonic() - t0
        assert r[-1][1:6] == (first, "acceptable", REVIEWER, "", "review")
        second = wait_item_change(page, first)

        # by button: regression
        page.locator(".evs-desk button.regression").click()
        r = wait_rows(q, 2)
        assert r[-1][1:3] == (second, "regression")
        third = wait_item_change(page, second)

        # skip by key, then by button: each item goes behind the others and another one comes
        page.keyboard.press("s")
        fourth = wait_item_change(page, third)
        page.locator(".evs-desk button.skip").click()
        fifth = wait_item_change(page, fourth)
        with sqlite3.connect(q) as db:
            assert {x[0] for x in db.execute("SELECT item_id FROM skips WHERE reviewer=?", (REVIEWER,))} == {third, fourth}
        assert len({first, second, third, fourth, fifth}) == 5 and len(rows(q)) == 2

        # a note by keyboard: n, type, Enter keeps it, then the verdict key records both
        page.keyboard.press("n")
        page.keyboard.type("same meaning, and a b z s typed here are text")
        page.keyboard.press("Enter")
        page.keyboard.press("a")
        r = wait_rows(q, 3)
        assert r[-1][1:5] == (fifth, "acceptable", REVIEWER, "same meaning, and a b z s typed here are text")
        sixth = wait_item_change(page, fifth)

        # undo by key: the last verdict is retracted (a row appended) and its item comes back
        page.keyboard.press("z")
        r = wait_rows(q, 4)
        assert r[-1][2:] == ("retracted", REVIEWER, "", "retraction", r[2][0])
        assert wait_item_change(page, sixth) == fifth
        # undo by button: the verdict before it (the regression) is retracted too
        page.locator(".evs-desk button.undo").click()
        r = wait_rows(q, 5)
        assert r[-1][5:] == ("retraction", r[1][0])
        assert wait_item_change(page, fifth) == second

        # Shift+verdict key chooses the verdict and opens the note; Enter records it
        page.keyboard.press("Shift+R")
        page.keyboard.type("drops the citation")
        page.keyboard.press("Enter")
        r = wait_rows(q, 6)
        assert r[-1][1:5] == (second, "regression", REVIEWER, "drops the citation")
        now = wait_item_change(page, second)

        # back (key b): the item answered last, again
        page.keyboard.press("b")
        assert wait_item_change(page, now) == second
        shots.append(tmp_path / "review-panel-after-back.png")
        page.screenshot(path=str(shots[-1]))

        # nothing reached JupyterLab: no cell added, cut or deleted by the letters typed over the panel
        assert page.locator(".jp-Notebook .jp-Cell").count() == n_cells
        # the views above refreshed: the overview counts the verdicts given
        wait_kernel_idle(page)
        assert widget_errors(page) == []

        # a reload finds the panel again (the notebook saved with its widget views; the kernel holds the state)
        page.keyboard.press("Escape")
        page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        page.wait_for_timeout(1000)
        page.reload()
        page.wait_for_selector(".evs-desk .header b", timeout=90_000)
        assert shown_item(page) == second
        shots.append(tmp_path / "review-after-reload.png")
        page.screenshot(path=str(shots[-1]))
        assert widget_errors(page) == []
        assert seen.problems() == [], seen.problems()

    hist = rows(q)
    assert [x[2] for x in hist] == ["acceptable", "regression", "acceptable", "retracted", "retracted", "regression"]
    with sqlite3.connect(q) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    keep(shots)
    (tmp_path / "timings.json").write_text(json.dumps(timings), "utf-8")
    keep([tmp_path / "timings.json"])
    with capsys.disabled():
        print(f"\nreview.ipynb in JupyterLab: panel shown {timings['open_to_panel_s']:.1f}s after opening, first verdict {timings['open_to_first_verdict_s']:.1f}s after opening")
