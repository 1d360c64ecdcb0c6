"""citations.*: marker parsing, validity, precision/recall, support, agreement, robustness."""

import pytest

from evalsuite.cases.caseset import Case, Document, Expect
from evalsuite.scoring.base import ScoreInput
from evalsuite.scoring.citations import (
    agreement,
    citation_robustness,
    cited_ids,
    parse_citations,
    precision,
    recall,
    support,
    valid,
)

VPN = Document("ex-vpn", "Employees connect with the Northwind VPN client. Sessions expire after 12 hours. "
               "Reset a locked VPN token in the IT self-service portal.", title="VPN runbook")
PRICING = Document("ex-pricing", "The Starter plan costs 29 USD per user per month, billed annually, and includes 50 GB of storage.",
                   title="Starter plan pricing")
ZH_VPN = Document("zh-vpn", "员工使用北风VPN客户端连接公司网络。VPN会话在12小时后过期。", lang="zh")
ZH_HR = Document("zh-hr", "年假为每年十五天，需要提前两周申请。", lang="zh")


def kb(context=(VPN, PRICING), gold=("ex-vpn",), lang="en", cid="kb-1", perturbation=None):
    return Case(id=cid, scenario="kb_qa", kind="grounded", lang=lang, prompt="How long does a VPN session last?",
                context=tuple(context), expect=Expect(citations=tuple(gold)), perturbation=perturbation,
                perturbation_of="kb-1" if perturbation else None)


def score(fn, text, baseline=None, c=None):
    (s,) = fn(ScoreInput(c or kb(), text, baseline_text=baseline))
    return s


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Sessions expire after 12 hours [ex-vpn].", [("ex-vpn", "ex-vpn")]),
        ("Sessions expire after 12 hours [1].", [("1", "ex-vpn")]),  # 1-based index into the context
        ("It costs 29 USD [2][1].", [("2", "ex-pricing"), ("1", "ex-vpn")]),
        ("See [ex-vpn, ex-pricing] and [1; 2].", [("ex-vpn", "ex-vpn"), ("ex-pricing", "ex-pricing"), ("1", "ex-vpn"), ("2", "ex-pricing")]),
        ("See [1-2].", [("1", "ex-vpn"), ("2", "ex-pricing")]),
        ("See [1\u20132] and footnote [^2].", [("1", "ex-vpn"), ("2", "ex-pricing"), ("2", "ex-pricing")]),  # en dash range
        ("See [Source 2], [Document 1] and 【文档2】.", [("2", "ex-pricing"), ("1", "ex-vpn"), ("2", "ex-pricing")]),
        ("见［ex-vpn，ex-pricing］与【ex-vpn、ex-pricing】。", [("ex-vpn", "ex-vpn"), ("ex-pricing", "ex-pricing"), ("ex-vpn", "ex-vpn"), ("ex-pricing", "ex-pricing")]),
        ("会话12小时后过期【1】。", [("1", "ex-vpn")]),
        ("会话12小时后过期【ex-vpn】【ex-pricing】。", [("ex-vpn", "ex-vpn"), ("ex-pricing", "ex-pricing")]),
        ("会话12小时后过期［ex-vpn］。", [("ex-vpn", "ex-vpn")]),  # full-width square brackets
        ("会话12小时后过期（来源：ex-vpn）。", [("ex-vpn", "ex-vpn")]),
        ("Sessions expire after 12 hours (source: ex-vpn).", [("ex-vpn", "ex-vpn")]),
        ("Prices vary (sources: ex-pricing and ex-vpn).", [("ex-pricing", "ex-pricing"), ("ex-vpn", "ex-vpn")]),
        ("See [doc: ex-vpn] and [EX-VPN].", [("ex-vpn", "ex-vpn"), ("EX-VPN", "ex-vpn")]),
        ("Made up [ex-hr] and [7].", [("ex-hr", None), ("7", None)]),  # unknown ids are kept, unresolved
        ("See [supply-and-demand].", [("supply-and-demand", None)]),  # "and" inside an id does not split it
        ("A [markdown link](https://x.example) and (parentheses) are not citations.", []),
        ("No citations at all.", []),
    ],
)
def test_parse_citations(text, expected):
    got = [(c.ref, c.doc_id) for c in parse_citations(text, ["ex-vpn", "ex-pricing"])]
    assert got == expected


def test_cited_ids_dedupes_and_marks_unknown():
    assert cited_ids("A [1]. B [ex-vpn]. C [ex-hr]. D [ex-pricing]", kb()) == ["ex-vpn", "?ex-hr", "ex-pricing"]


@pytest.mark.parametrize(
    "text, value, invalid",
    [
        ("Sessions expire after 12 hours [ex-vpn].", 1.0, []),
        ("12 hours [ex-vpn], per the HR wiki [hr-wiki] and [3].", 1 / 3, ["hr-wiki", "3"]),
        ("No citation here.", None, None),
    ],
)
def test_valid(text, value, invalid):
    s = score(valid, text)
    assert s.value == value
    if invalid is not None:
        assert s.details["invalid"] == invalid and s.passed is (not invalid)


@pytest.mark.parametrize(
    "text, gold, p, r",
    [
        ("12 hours [ex-vpn].", ("ex-vpn",), 1.0, 1.0),
        ("12 hours【1】，价格【2】。", ("ex-vpn",), 0.5, 1.0),
        ("12 hours [ex-pricing].", ("ex-vpn",), 0.0, 0.0),
        ("12 hours, 29 USD [1, 2].", ("ex-vpn", "ex-pricing"), 1.0, 1.0),
        ("12 hours [ex-vpn].", ("ex-vpn", "ex-pricing"), 1.0, 0.5),
        ("12 hours, no citation.", ("ex-vpn",), 0.0, 0.0),
        ("12 hours [ex-vpn].", (), None, None),  # no gold: not applicable
    ],
)
def test_precision_recall(text, gold, p, r):
    c = kb(gold=gold)
    sp, sr = score(precision, text, c=c), score(recall, text, c=c)
    assert (sp.value, sr.value) == (p, r)
    if gold:
        assert sr.passed is (r == 1.0)


@pytest.mark.parametrize(
    "case, text, value, unsupported",
    [
        (kb(), "VPN sessions expire after 12 hours. [ex-vpn]", 1.0, 0),  # marker after the full stop
        (kb(), "VPN sessions expire after 12 hours [ex-pricing].", 0.0, 1),  # wrong passage
        (kb(), "VPN sessions expire after 12 hours [1]. The Starter plan costs 29 USD per user [2]. Have a nice day.", 1.0, 0),
        (kb(), "Sessions expire after 12 hours [ex-vpn]. The moon is made of cheese [ex-vpn].", 0.5, 1),
        (kb(), "Sessions expire after 12 hours [nowhere].", 0.0, 1),  # a citation to nothing supports nothing
        (kb(), "Nothing cited.", None, None),
        (kb(context=(ZH_VPN, ZH_HR), gold=("zh-vpn",), lang="zh"), "VPN会话在12小时后过期【1】。年假需要提前两周申请【zh-hr】。", 1.0, 0),
        (kb(context=(ZH_VPN, ZH_HR), gold=("zh-vpn",), lang="zh"), "ＶＰＮ会话在１２小时后过期【2】。", 0.0, 1),
    ],
)
def test_support(case, text, value, unsupported):
    s = score(support, text, c=case)
    assert s.value == value
    if unsupported is not None:
        assert len(s.details["unsupported"]) == unsupported


@pytest.mark.parametrize(
    "baseline, text, value",
    [
        (None, "[ex-vpn]", None),
        ("12 hours [ex-vpn].", "Twelve hours [1].", 1.0),  # same document, different marker form
        ("12 hours [ex-vpn], 29 USD [ex-pricing].", "12 hours [ex-vpn].", 0.5),
        ("12 hours [ex-vpn].", "12 hours [ex-pricing].", 0.0),
        ("No citations.", "None here either.", 1.0),
    ],
)
def test_agreement(baseline, text, value):
    assert score(agreement, text, baseline).value == value


def test_robustness():
    original = kb()
    reordered = kb(context=(PRICING, VPN), cid="kb-1-r", perturbation="reordered")
    distract = kb(context=(VPN, PRICING, Document("ex-noise", "Unrelated.")), cid="kb-1-d", perturbation="distractors")
    s = citation_robustness(
        original,
        "12 hours [1].",
        [
            (reordered, "12 hours [2]."),  # [2] is ex-vpn in the reordered context: same
            (distract, ["ex-vpn", "ex-noise"]),  # an extra distractor citation: same gold-relevant set
            (reordered, "12 hours [1]."),  # [1] is now ex-pricing: lost the gold citation
        ],
    )
    assert s.metric == "citations.robustness"
    assert s.value == 2 / 3 and s.passed is False
    assert s.details["original"] == ["ex-vpn"]
    assert [r["same"] for r in s.details["perturbed"]] == [True, True, False]


def test_robustness_without_gold_compares_whole_sets_and_empty_is_none():
    c = kb(gold=())
    s = citation_robustness(c, ["ex-vpn"], [(c, ["ex-vpn", "ex-pricing"]), (c, ["ex-vpn"])])
    assert s.value == 0.5 and s.details["compared"] == "all"
    assert citation_robustness(c, [], []).value is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Sessions expire after 12 hours [ex-vpn].", {"ex-vpn": ["Sessions expire after 12 hours."]}),
        ("Reset a locked token in the portal [ex-vpn]. Starter costs 29 USD [ex-pricing].",
         {"ex-vpn": ["Reset a locked VPN token in the IT self-service portal."], "ex-pricing": [PRICING.text]}),
        ("It is cheap [ex-pricing].", {}),  # shares no content word with the passage: no span, though the document is cited
        ("Sessions expire after 12 hours.", {}),  # nothing cited
    ],
)
def test_cited_spans_mark_the_passage_each_citing_sentence_rests_on(text, expected):
    from evalsuite.scoring.citations import cited_spans

    c = kb()
    docs = {d.id: d.text for d in c.context}
    got = {doc: [docs[doc][s:e] for s, e in spans] for doc, spans in cited_spans(c, text).items()}
    assert got == expected
