"""Context trimming as a variant kind (evalsuite/run/trimming.py): which documents a `trim:` drops,
how the suite parses and fingerprints it, and that the dropped documents are recorded with each
generation, survive a rerun, and show in the report's case view and the review item."""

from __future__ import annotations

import pytest

from evalsuite.cases.caseset import load_caseset
from evalsuite.cases.options import ContextTrim
from evalsuite.cases.suite import load_suite
from evalsuite.errors import ValidationError
from evalsuite.run.prompting import build_requests
from evalsuite.run.runner import RunOptions
from evalsuite.run.trimming import estimate_tokens, trim_case
from evalsuite.scoring.pipeline import run_suite

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en, user_role: employee}
documents:
  - {id: d-vpn, title: VPN, text: "A VPN session lasts 12 hours before you must sign in again."}
  - {id: d-wifi, title: Guest Wi-Fi, text: "Guest Wi-Fi passwords change every Monday morning at nine."}
  - {id: d-print, title: Printers, text: "Printers on floor three release jobs only after a badge tap."}
cases:
  - {id: early, prompt: How long does a VPN session last?, context: [d-vpn, d-wifi, d-print], expect: {citations: [d-vpn], required_terms: [12 hours]}}
  - {id: late, prompt: How long does a VPN session last?, context: [d-wifi, d-print, d-vpn], expect: {citations: [d-vpn], required_terms: [12 hours]}}
"""

RUBRIC = """
schema_version: 1
name: trim-test
rules:
  - {name: kb-citations, scenario: kb_qa, metric: citations.recall, max_flips: 0}
"""


def cite_what_it_sees(req) -> str:
    """A fake model that answers from the VPN document only when its prompt shows it."""
    system = dict(req.messages).get("system", "")
    return "A VPN session lasts 12 hours [d-vpn]." if "[d-vpn]" in system else "I don't know based on the provided documents."


def _words(text: str) -> int:
    return len(text.split())


@pytest.fixture
def cases(write):
    return {c.id: c for c in load_caseset(write("sets/cases.yaml", CASES)).cases}


@pytest.mark.parametrize(
    "case, trim, dropped",
    [
        ("late", ContextTrim(top_k=1), ("d-print", "d-vpn")),  # the retriever's first document only
        ("early", ContextTrim(top_k=1), ("d-wifi", "d-print")),
        ("late", ContextTrim(top_k=1, order="overlap"), ("d-wifi", "d-print")),  # the question's words rank the VPN document first
        ("late", ContextTrim(top_k=3), ()),
        ("late", ContextTrim(budget_tokens=29), ("d-vpn",)),  # 14 + 15 words fit, the third (16) does not
        ("late", ContextTrim(budget_tokens=13), ("d-wifi", "d-print", "d-vpn")),  # the first does not fit: the list is cut there
        ("early", ContextTrim(budget_tokens=40, top_k=2), ("d-print",)),
        ("late", ContextTrim(budget_tokens=16, order="overlap"), ("d-wifi", "d-print")),
    ],
)
def test_the_right_documents_are_dropped(cases, case, trim, dropped):
    t = trim_case(cases[case], trim, _words)
    assert t.dropped == dropped
    assert [d.id for d in t.case.context] == [d.id for d in cases[case].context if d.id not in dropped]  # kept in retrieved order
    assert t.kept_tokens <= (trim.budget_tokens or 10**9) and t.total_tokens == sum(_words(f"[{d.id}] {d.title} (access: public)\n{d.text}") for d in cases[case].context)


def test_the_estimate_counts_cjk_characters_apart():
    assert estimate_tokens("a" * 40) == 10
    assert estimate_tokens("审计日志") == 6


SUITE = """
schema_version: 1
name: trim
casesets: [sets]
generation: {{max_new_tokens: 16, batch_size: 2}}
output_dir: out
cache: out/cache.sqlite
rubric: rubric.yaml
variants:
  - name: base
    baseline: true
    backend: fake
    options: {{function: "{fn}"}}
{variants}
"""
TRIMMED = """
  - name: top1
    trim: {top_k: 1}
  - name: budget
    trim: {budget_tokens: 30, tokenizer: estimate}
"""


def _suite(write, variants: str = TRIMMED):
    write("sets/cases.yaml", CASES)
    write("rubric.yaml", RUBRIC)
    return write("suite.yaml", SUITE.format(fn=f"{__name__}:cite_what_it_sees", variants=variants))


def test_a_trim_is_a_context_change_with_its_own_fingerprint(write):
    suite = load_suite(_suite(write))
    base, top1, budget = suite.variants
    assert base.trim is None and "trim" not in base.spec(), "a variant without trimming keeps its old fingerprint"
    assert top1.trim == ContextTrim(top_k=1) and budget.trim == ContextTrim(budget_tokens=30)
    assert top1.changes == ("context",) and budget.changes == ("context",)
    assert len({v.fingerprint() for v in suite.variants}) == 3
    assert top1.to_dict()["trim"] == {"top_k": 1, "order": "retrieved", "tokenizer": "estimate"}
    cases = suite.load_cases()
    late = {r.case_id: r for r in build_requests(cases, top1)}["late"]
    assert "[d-vpn]" not in late.messages[0][1] and "[d-wifi]" in late.messages[0][1]


@pytest.mark.parametrize(
    "block, field, message",
    [
        ("{top_k: 0}", "variants[1].trim.top_k", "at least 1"),
        ("{order: best, top_k: 2}", "variants[1].trim.order", "retrieved, overlap"),
        ("{colour: red, top_k: 2}", "variants[1].trim.colour", "unknown setting"),
        ("{order: overlap}", "variants[1].trim", "give `budget_tokens`, `top_k` or both"),
        ("3", "variants[1].trim", "expected a mapping"),
    ],
)
def test_a_bad_trim_block_is_named_with_its_file_line_and_variant(write, block, field, message):
    path = _suite(write, f"  - name: cut\n    trim: {block}\n")
    with pytest.raises(ValidationError) as info:
        load_suite(path)
    (p,) = info.value.problems
    assert (p.field, p.case_id, p.line) == (field, "cut", 14) and message in p.message


@pytest.fixture
def trimmed_run(write, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = load_suite(_suite(write))
    return suite, run_suite(suite, RunOptions(progress=False)).store


def _drops(store) -> dict:
    return {(g.variant, g.case_id): (g.extra.get("context_trim") or {}).get("dropped") for g in store.generations()}


def test_the_dropped_documents_are_recorded_and_survive_a_rerun(trimmed_run):
    suite, store = trimmed_run
    drops = _drops(store)
    assert drops[("top1", "late")] == ["d-print", "d-vpn"] and drops[("top1", "early")] == ["d-wifi", "d-print"]
    assert drops[("base", "late")] is None
    assert drops[("budget", "late")] is not None and "d-vpn" in drops[("budget", "late")]
    again = run_suite(suite, RunOptions(progress=False)).store  # a new run: every output from the cache
    assert again.run_id != store.run_id and all(g.cached for g in again.generations())
    assert _drops(again) == drops
    resumed = run_suite(suite, RunOptions(progress=False, resume=store.run_id)).store
    assert _drops(resumed) == drops


def test_the_report_case_view_and_the_review_item_show_the_dropped_documents(trimmed_run, tmp_path):
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report
    from evalsuite.review import api, view

    suite, store = trimmed_run
    report = write_report(judge_run(store, suite.rubric, "production"), out_dir=tmp_path / "report")
    html = report.html.read_text("utf-8")
    assert "dropped from the variant's prompt by its context trimming: d-print, d-vpn" in html
    assert html.count("dropped by trimming") == 4  # d-print and d-vpn of `late`, for top1 and for budget
    q = tmp_path / "q.sqlite"
    api.flag_run(store, queue=q)
    items = {(it["variant"], it["case_id"]): it for it in api.list_items(q, status="all")}
    item = api.show(items[("top1", "late")]["id"], q)
    docs = item["context"]["documents"]
    assert docs["dropped"] == ["d-print", "d-vpn"] and [d["id"] for d in docs["docs"] if d.get("dropped")] == ["d-print", "d-vpn"]
    assert "dropped by context trimming" in view.documents_html(item)
    assert ("top1", "early") not in items, "nothing was lost where the gold document was kept"


def test_a_trimmed_output_is_scored_against_the_documents_it_was_shown(cases):
    from evalsuite.backends.base import Generation
    from evalsuite.scoring.run import as_shown, score_generations

    late = cases["late"]
    kept_vpn = {"context_trim": {"dropped": ["d-wifi", "d-print"], "kept": 1}}  # `top_k: 1, order: overlap` showed d-vpn alone
    gens = [
        Generation(case_id="late", variant="base", sample=0, text="A VPN session lasts 12 hours [3]."),
        Generation(case_id="late", variant="cut", sample=0, text="A VPN session lasts 12 hours [1].", extra=kept_vpn),
        Generation(case_id="late", variant="cut-wrong", sample=0, text="A VPN session lasts 12 hours [1].", extra={}),
    ]
    assert [d.id for d in as_shown(late, gens[1:2]).context] == ["d-vpn"] and as_shown(late, gens[:1]) is late
    recall = {r.variant: r.passed for r in score_generations([late], gens, "base") if r.metric == "citations.recall"}
    assert recall == {"base": True, "cut": True, "cut-wrong": False}  # [1] of the full context is d-wifi
