"""report.html parsed: the sections, the verdict grid, the flagged cases with their evidence, the
filters, and nothing that reaches the network."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup

from evalsuite.report.html import side_by_side


@pytest.fixture(scope="module")
def soup(report):
    return BeautifulSoup(report.html.read_text("utf-8"), "html.parser")


def test_every_section_is_there(soup):
    ids = {s.get("id") for s in soup.find_all("section")}
    assert {"verdict", "rules", "metrics", "flagged", "performance", "plots", "signature"} <= ids
    nav = [a["href"] for a in soup.select("nav#nav a")]
    assert all(h.lstrip("#") in ids for h in nav)


def test_self_contained_no_network_resource(soup, report):
    text = report.html.read_text("utf-8")
    assert not soup.find_all("link"), "no external stylesheet"
    assert all(not s.get("src") for s in soup.find_all("script")), "scripts are inline"
    for tag in soup.find_all(src=True):
        assert tag["src"].startswith("data:"), tag["src"][:80]
    for tag in soup.find_all(href=True):
        assert tag["href"].startswith("#"), tag["href"]
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text), "no CSS url() to the network"
    assert "@import" not in text


def test_verdict_grid_per_variant_and_scenario(soup, report):
    rows = soup.select("#verdict-grid tbody tr")
    got = {r["data-variant"]: [td.get_text(strip=True) for td in r.find_all("td")] for r in rows}
    heads = [th.get_text(strip=True) for th in soup.select("#verdict-grid thead th")]
    assert heads == ["variant", "verdict", "brand", "code", "kb_qa", "run-level"]
    assert set(got) == {"clean", "nocite", "badjson", "badcode"}  # the noise run is not judged
    assert got["clean"][1:] == ["pass", "ok", "ok", "ok", "ok"]
    assert got["nocite"][1] == "REGRESSION" and got["nocite"][4] == "FAIL (kb-citations)"
    assert got["badjson"][2] == "FAIL (brand-json)"
    assert got["badcode"][1] == "pass, warnings" and got["badcode"][3] == "warn (code-tests)"
    assert soup.select_one("#overall").get_text(strip=True) == "REGRESSION"


def test_flagged_cases_are_the_violations_and_the_flips(soup, report):
    cmp = report.data.comparison
    expected = set()
    for d in cmp.deltas:
        if d.variant in cmp.variants:
            expected |= {(d.variant, c) for c in d.pass_to_fail}
    for v in report.data.verdict.violations + report.data.verdict.warnings:
        expected |= {(v.variant, c) for c in v.cases}
    cards = soup.select("details.case")
    got = {(c["data-variant"], c["data-case"]) for c in cards}
    assert got == expected and len(cards) == len(expected)
    assert {v for v, _ in got} == {"nocite", "badjson", "badcode"}
    assert soup.select_one("#flagged h2").get_text(" ", strip=True).startswith(f"Flagged cases: {len(expected)} shown of {len(expected)}")
    # the rule list links its top cases to their cards
    ids = {c["id"] for c in cards}
    links = [a["href"].lstrip("#") for a in soup.select("#rules a")]
    assert links and set(links) <= ids


def _card(soup, variant, scenario):
    return next(c for c in soup.select("details.case") if c["data-variant"] == variant and c["data-scenario"] == scenario)


def test_side_by_side_diff_highlights_the_change(soup):
    card = _card(soup, "nocite", "kb_qa")
    base, var = card.select(".diff .baseline pre")[0], card.select(".diff .variant pre")[0]
    removed = " ".join(d.get_text() for d in base.find_all("del"))
    assert re.search(r"\[doc-\d+\]", removed), removed  # the dropped citation is marked on the baseline side
    assert not var.find_all("ins") or all("doc-" not in i.get_text() for i in var.find_all("ins"))


def test_citations_against_the_context(soup):
    card = _card(soup, "nocite", "kb_qa")
    rows = card.select(".citations tbody tr")
    assert rows
    cells = [td.get_text(strip=True) for td in rows[0].find_all("td")]
    assert cells[1] == "gold" and cells[2] == "cited" and cells[3] == "MISSING"


def test_json_drift_by_key(soup):
    card = _card(soup, "badjson", "brand")
    drift = card.select_one(".json-drift")
    assert drift is not None and "variant JSON:" in drift.get_text()
    paths = [td.get_text(strip=True) for td in drift.select("tbody tr td:first-child")]
    assert "$.product" in paths and "$.features[0]" in paths


def test_code_cases_show_the_test_results(soup):
    card = _card(soup, "badcode", "code")
    rows = {tr.find_all("td")[0].get_text(strip=True): tr.find_all("td")[1].get_text(strip=True) for tr in card.select(".code table:first-of-type tbody tr")}
    assert rows["baseline"] == "passed" and rows["variant"] == "failed", rows
    assert "RuntimeError" in card.select_one(".code").get_text()
    assert card.select(".code pre") and "assert add_" in card.select_one(".code pre").get_text()
    assert "code.pass@1" in card.get_text()


def test_metric_tables_have_every_comparison(soup, report):
    rows = soup.select("table.metrics tbody tr[data-scenario]")
    assert len(rows) == len(report.data.comparison.deltas)
    heads = [th.get_text(strip=True) for th in soup.select("table.metrics thead th")][:13]
    assert heads == ["scenario", "metric", "stat", "n", "baseline", "variant", "delta", "95% CI", "p", "p worse", "flips −/+", "noise floor", "rule"]
    block = next(b for b in soup.select(".metric-block") if b["data-variant"] == "nocite")
    recall = next(r for r in block.select("tbody tr") if "citations.recall" in r.get_text())
    cells = [td.get_text(strip=True) for td in recall.find_all("td")]
    d = next(x for x in report.data.comparison.deltas if x.variant == "nocite" and x.metric == "citations.recall")
    assert cells[3] == str(d.n) and cells[10] == f"{len(d.pass_to_fail)}/{len(d.fail_to_pass)}" and cells[11] == "0 / 0.000"
    assert "kb-citations" in cells[12] and recall["data-flagged"] == "1"


def test_performance_and_plots_and_signature(soup, report):
    perf = {tr["data-variant"]: [td.get_text(strip=True) for td in tr.find_all("td")] for tr in soup.select("#perf tbody tr")}
    assert set(perf) == {"baseline", "rerun", "clean", "nocite", "badjson", "badcode"}
    heads = [th.get_text(strip=True) for th in soup.select("#perf thead th")]
    for h in ("latency p50", "latency p95", "TTFT p50", "tokens/s", "peak memory MB", "errors", "timeouts"):
        assert h in heads
    col = heads.index("peak memory MB")
    assert perf["badcode"][col] == "200" and perf["badcode"][heads.index("memory")] == "×0.33"
    for pid in ("plot-tradeoff", "plot-deltas"):
        img = soup.find(id=pid)
        assert img is not None and img["src"].startswith("data:image/png;base64,") and len(img["src"]) > 5000
    sig = report.data.signature
    assert soup.select_one("#case-digest").get_text(strip=True) == sig["case_digest"]
    models = soup.select_one("#models").get_text()
    assert "baseline" in models and "prompt_lookup" in models and sig["variants"]["nocite"][:16] in models


def test_filters_list_variants_and_scenarios(soup, report):
    assert [o["value"] for o in soup.select("#f-variant option")] == ["", "clean", "nocite", "badjson", "badcode", "rerun"]
    assert [o["value"] for o in soup.select("#f-scenario option")] == ["", "brand", "code", "kb_qa"]
    assert soup.select_one("#f-flagged")["type"] == "checkbox"
    for el in soup.select("[data-filter]"):
        assert el.has_attr("data-variant") or el.has_attr("data-scenario") or el.has_attr("data-flagged")


def test_model_output_is_escaped(report):
    text = report.html.read_text("utf-8")
    assert ("nocite", "kb-013") in {(f.variant, f.case_id) for f in report.data.flagged}  # its output holds a <script> tag
    assert "<script>alert(" not in text and "&lt;script&gt;alert(" in text


@pytest.mark.parametrize(
    "before, after, dels, inss",
    [
        ("a b c", "a b c", [], []),
        ("keeps edition 1 safe", "keeps, safe", ["edition 1"], [","]),
        ("x <b>y</b>", "x <i>y</i>", ["b", "b"], ["i", "i"]),
        ("", "new text", [], ["new text"]),
    ],
)
def test_side_by_side_tokens(before, after, dels, inss):
    left, right, changed = side_by_side(before, after)
    got_del = re.findall(r"<del>(.*?)</del>", str(left))
    got_ins = re.findall(r"<ins>(.*?)</ins>", str(right))
    assert [g.strip() for g in got_del] == dels and [g.strip() for g in got_ins] == inss
    assert "<b>" not in str(left) and "<i>" not in str(right)  # escaped
    assert (changed == 0) == (not dels and not inss)


def test_flagged_items_are_named_outputs_as_the_review_queue_names_them(soup, report):
    """The nav, the section and report.md count flagged outputs (one variant's output for one case),
    the unit the demo's review-queue line uses ("N output(s) await review")."""
    n = report.data.flagged_total
    assert soup.select_one('nav#nav a[href="#flagged"]').get_text(strip=True) == f"Flagged outputs ({n})"
    assert soup.select_one("#flagged h2").get_text(" ", strip=True).endswith(f"shown of {n} outputs")
    assert f"{n} flagged output(s)" in report.markdown.read_text("utf-8")


def test_report_files_get_the_mode_the_umask_gives(report):
    """Written atomically, yet readable like any other file the user writes (not mkstemp's 0600)."""
    import stat

    from evalsuite.yamlio import file_mode

    for path in (report.html, report.markdown):
        assert stat.S_IMODE(path.stat().st_mode) == file_mode()
