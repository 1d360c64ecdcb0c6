"""The faults part of the stability report (issue 31, item 5): per served variant, each fault's
recorded outcome in the HTML report, the markdown summary and the terminal verdict."""

from __future__ import annotations

import shutil

import pytest
from rich.console import Console

from evalsuite.run.faults import FaultResult, record_fault
from evalsuite.states import CANNOT_JUDGE_WORD, FAILED, REJECTED_AS_DESIGNED, SURVIVED

RESULTS = [
    FaultResult(variant="clean", kind="overlong_input", outcome=FAILED, evidence="no answer within 25s (a hang)", timings={"probe_s": 26.0}),
    FaultResult(variant="clean", kind="burst", outcome=SURVIVED, evidence="all 6 requests were answered", timings={"queue_wait_max_s": 1.5}),
    FaultResult(variant="clean", kind="load_failure", outcome=REJECTED_AS_DESIGNED, evidence="ValueError: <model_type> unknown | x", timings={}),
    FaultResult(variant="nocite", kind="load_failure", outcome=CANNOT_JUDGE_WORD, evidence="its model did not load", timings={}),
]


@pytest.fixture(scope="module")
def probed_report(report_run, tmp_path_factory):
    """The report of a copy of the shared run, with fault outcomes recorded for two variants."""
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report
    from evalsuite.run.store import RunStore

    store, rubric = report_run
    copy = RunStore(shutil.copytree(store.dir, tmp_path_factory.mktemp("faulted") / store.dir.name))
    for res in RESULTS:
        record_fault(copy, res)
    judgment = judge_run(copy, rubric, "production")
    return judgment, write_report(judgment, out_dir=tmp_path_factory.mktemp("faultreport"))


def test_the_rows_follow_the_probe_order_per_variant(probed_report):
    from evalsuite.report.faults import fault_rows

    judgment, _ = probed_report
    rows = fault_rows(judgment.store)
    assert [(r["variant"], r["kind"], r["css"]) for r in rows] == [
        ("clean", "burst", "ok"),
        ("clean", "overlong_input", "fail"),
        ("clean", "load_failure", "ok"),
        ("nocite", "load_failure", "warn"),
    ]
    assert rows[0]["timings"] == "queue_wait_max_s 1.50"


def test_the_html_report_has_a_faults_section(probed_report):
    _, report = probed_report
    html = report.html.read_text("utf-8")
    section = html[html.index('<section id="stability-faults">') : html.index("</section>", html.index('id="stability-faults"'))]
    assert section.count('data-fault="') == 4
    assert '<span class="badge fail">failed</span>' in section and "no answer within 25s (a hang)" in section
    assert "&lt;model_type&gt;" in section  # evidence is escaped


def test_the_markdown_summary_lists_each_faults_outcome(probed_report):
    _, report = probed_report
    md = report.markdown.read_text("utf-8").splitlines()
    start = md.index("### Stability: faults")
    rows = [ln for ln in md[start:] if ln.startswith("| `")]
    assert rows[1] == "| `clean` | over-long input | ❌ failed | no answer within 25s (a hang) |"
    assert rows[2].endswith("ValueError: <model_type> unknown \\| x |")  # a pipe in evidence cannot split the row
    assert rows[3].startswith("| `nocite` | model fails to load | ❔ cannot judge |")


def test_the_terminal_verdict_shows_the_faults(probed_report):
    from evalsuite.report.terminal import judgment_view

    judgment, _ = probed_report
    console = Console(width=200, record=True, color_system=None)
    console.print(judgment_view(judgment))
    text = console.export_text()
    assert "stability: faults" in text
    line = next(ln for ln in text.splitlines() if "over-long input" in ln)
    assert "clean" in line and "failed" in line


def test_a_run_without_probes_has_no_faults_section(report):
    assert 'id="stability-faults"' not in report.html.read_text("utf-8")
    assert "Stability: faults" not in report.markdown.read_text("utf-8")


def test_a_variant_whose_model_did_not_load_makes_the_verdict_cannot_judge_naming_it(probed_report, report):
    judgment, written = probed_report
    assert judgment.verdict.status == CANNOT_JUDGE_WORD
    assert [p for p in judgment.verdict.problems if "nocite" in p] == ["variant 'nocite': cannot judge: its model did not load"]
    assert written.markdown.read_text("utf-8").startswith("## evalsuite: ❔ **CANNOT JUDGE**")
    # the other variants are judged as before: the same rule results as the run without faults
    before = {(r.variant, r.rule, r.status) for r in report.data.verdict.results if r.variant != "nocite"}
    assert {(r.variant, r.rule, r.status) for r in judgment.verdict.results if r.variant != "nocite"} == before
