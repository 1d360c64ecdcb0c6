"""The report shows each variant's release history (stages cleared, when, on which run) and each
stage's rollback target: in report.md, in report.html, and in headless Chromium as a person sees it."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from evalsuite.judge import judge_run
from evalsuite.report.api import write_report
from evalsuite.review import api as review

from .conftest import TWEAK_CASE
from .test_promotion import gate, to_production


@pytest.fixture
def released(release_run, paths, tmp_path):
    """good-a then good-b promoted to production; tweak cleared for dev, then judged a regression by a reviewer."""
    gate(release_run, "dev", paths, flag=True)
    for v in ("good-a", "good-b"):
        to_production(release_run, v, paths)
    review.annotate(next(i["id"] for i in review.list_items(paths["queue"], status="all") if i["variant"] == "tweak"), "regression", reviewer="rita", queue=paths["queue"])
    judgment = judge_run(release_run["store"], None, "production", paths["queue"])
    return write_report(judgment, out_dir=tmp_path / "report", ledger=paths["ledger"], plots=False)


def test_report_data_holds_the_history_and_the_rollback_target(released, release_run):
    r = released.data.releases
    rows = {v["variant"]: v for v in r.variants}
    assert list(rows) == ["good-a", "good-b", "tweak", "bad"]
    run_id = release_run["store"].run_id
    assert all(rows["good-b"]["stages"][s]["cleared"] and rows["good-b"]["stages"][s]["run_id"] == run_id for s in ("dev", "pilot", "production"))
    assert rows["tweak"]["stages"]["dev"]["cleared"] is False and "a regression" in rows["tweak"]["stages"]["dev"]["reason"]
    assert rows["tweak"]["stages"]["pilot"]["status"] is None  # never judged there
    assert [d["kind"] for d in rows["good-b"]["decisions"]] == ["promote", "promote", "gate"]  # newest first
    (prod,) = [s for s in r.stages if s["stage"] == "production"]
    assert (prod["current"]["variant"], prod["target"]["variant"]) == ("good-b", "good-a")


def test_report_md_lists_the_releases(released):
    md = released.markdown.read_text("utf-8")
    section = md[md.index("### Releases") :]
    assert "| `good-a` `" in section and "✅ since " in section and "❌ a reviewer judged 1 of its output(s) a regression" in section
    assert "- **production** runs `good-b` (`" in section and "rollback target: `good-a` (`" in section


def test_report_html_shows_the_releases_section(released):
    soup = BeautifulSoup(released.html.read_text("utf-8"), "html.parser")
    assert soup.select_one('nav a[href="#releases"]') is not None
    rows = soup.select("#release-history tbody tr")
    cells = {(tr["data-variant"], td["data-stage"]): td for tr in rows for td in tr.select("td[data-stage]")}
    assert "pass" in cells[("good-a", "production")]["class"] and cells[("good-a", "production")].get_text().startswith("cleared since ")
    assert "fail" in cells[("tweak", "dev")]["class"] and f"({TWEAK_CASE}, rita)" in cells[("tweak", "dev")].get_text()
    target = soup.select_one('#releases p.rollback[data-stage="production"] .rollback-target')
    assert target.get_text() == "good-a"


def test_report_without_a_ledger_says_how_to_get_one(release_run, tmp_path):
    judgment = judge_run(release_run["store"], None, "dev", tmp_path / "none.sqlite")
    res = write_report(judgment, out_dir=tmp_path / "report", ledger=tmp_path / "none.sqlite", plots=False)
    assert res.data.releases is None and "### Releases" not in res.markdown.read_text("utf-8")
    assert "No release ledger beside this run" in BeautifulSoup(res.html.read_text("utf-8"), "html.parser").select_one("#releases").get_text()


def _browser_skip() -> str | None:
    from report.test_browser import _skip_reason

    return _skip_reason()


@pytest.mark.skipif(_browser_skip() is not None, reason=str(_browser_skip()))
def test_the_releases_section_in_headless_chromium(released, tmp_path):
    from report.test_browser import open_in_chromium

    def actions(page):
        page.click('nav a[href="#releases"]')
        page.wait_for_timeout(100)
        out = {"in_view": page.locator("#releases h2").is_visible(), "target": page.locator('#releases p.rollback[data-stage="production"] .rollback-target').inner_text()}
        out["rows"] = page.locator("#release-history tbody tr:visible").count()
        page.select_option("#f-variant", "tweak")
        out["rows_tweak"] = page.locator("#release-history tbody tr:visible").count()
        out["tweak_dev"] = page.locator('#release-history tr[data-variant="tweak"] td[data-stage="dev"]').inner_text()
        return out

    seen = open_in_chromium(released.html, tmp_path / "releases.png", tmp_path / "profile", actions)
    assert seen["errors"] == [] and [m for m in seen["console"] if m[0] == "error"] == [] and seen["requests"] == []
    out = seen["actions"]
    assert out["in_view"] and out["target"] == "good-a" and out["rows"] == 4 and out["rows_tweak"] == 1
    assert out["tweak_dev"].startswith("not cleared: a reviewer judged 1 of its output(s) a regression")
