"""similarity.* and exactness.identical: closeness of an output to the baseline's."""

import pytest

from evalsuite.cases.caseset import Case
from evalsuite.scoring.base import SCORERS, ScoreInput
from evalsuite.scoring.similarity import bleu, chrf, divergence, exact, first_divergence, identical, word_at


def case(lang="en", scenario="kb_qa", kind="grounded"):
    return Case(id="c", scenario=scenario, kind=kind, lang=lang, prompt="q")


def score(fn, text, baseline, lang="en"):
    (s,) = fn(ScoreInput(case(lang), text, baseline_text=baseline))
    return s


@pytest.mark.parametrize("fn", [chrf, bleu, exact, divergence, identical])
def test_none_for_the_baseline_itself(fn):
    s = score(fn, "anything", None)
    assert s.value is None and s.details["reason"] == "no baseline output"


@pytest.mark.parametrize(
    "text, baseline, lang, value",
    [
        ("Sessions expire after 12 hours.", "Sessions expire after 12 hours.", "en", 100.0),
        ("", "", "en", 100.0),  # identical empty outputs are identical, whatever sacreBLEU says
        ("the cat sat on the mat", "the cat sat on a mat", "en", 53.7284965911771),
        ("completely different", "Sessions expire after 12 hours.", "en", 0.0),
        # zh: character tokenisation; without it the unsegmented sentence is one token and scores 0
        ("会话在十二小时后过期", "会话在十二小时以后过期", "zh", 71.0866788975034),
        ("会话在十二小时后过期", "会话在十二小时以后过期", "en", 0.0),
    ],
)
def test_bleu(text, baseline, lang, value):
    s = score(bleu, text, baseline, lang)
    assert s.value == pytest.approx(value)
    assert s.higher_is_better is True
    assert ("tok:zh" in s.details["signature"]) is (lang == "zh")


@pytest.mark.parametrize(
    "text, baseline, value",
    [
        ("Sessions expire after 12 hours.", "Sessions expire after 12 hours.", 100.0),
        ("hello wurld foo", "hello world foo", 62.96879046879047),
        ("会话在十二小时后过期", "会话在十二小时以后过期", 62.05487293841695),
        ("123", "Sessions expire.", 0.0),
    ],
)
def test_chrf(text, baseline, value):
    s = score(chrf, text, baseline)
    assert s.value == pytest.approx(value)
    assert s.details["signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")


@pytest.mark.parametrize(
    "text, baseline, value",
    [
        ("Same text.", "Same text.", 1.0),
        ("Same text. ", "Same text.", 0.0),  # trailing whitespace counts: exact means exact
        ("ＡＢＣ", "ABC", 0.0),  # full-width is a different output
    ],
)
def test_exact(text, baseline, value):
    s = score(exact, text, baseline)
    assert s.value == value and s.passed is (value == 1.0)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("abc", "abc", None),
        ("abc", "abd", 2),
        ("abc", "abcdef", 3),  # one is a prefix of the other
        ("", "x", 0),
        ("会话在十二小时后过期", "会话在十二小时以后过期", 7),
    ],
)
def test_first_divergence(a, b, expected):
    assert first_divergence(a, b) == expected


def test_first_divergence_scorer_details():
    baseline = "line one\nSessions expire after 12 hours [ex-vpn]."
    text = "line one\nSessions expire after twelve hours [ex-vpn]."
    s = score(divergence, text, baseline)
    assert s.value == 31.0 and s.higher_is_better is True
    d = s.details
    assert (d["line"], d["column"]) == (2, 22)
    assert d["baseline"] == "ine one\nSessions expire after 12 hours [ex-vpn]."
    assert d["variant"] == "ine one\nSessions expire after twelve hours [ex-vpn]."
    assert (d["baseline_word"], d["variant_word"]) == ("12", "twelve")
    assert score(divergence, baseline, baseline).value is None


@pytest.mark.parametrize(
    "text, i, word",
    [
        ("hello world foo", 7, "world"),
        ("会话在十二小时", 3, "十"),
        ("abc", 5, ""),
        ("a  b", 1, "b"),  # at whitespace: the next word
        ("a ", 1, ""),
    ],
)
def test_word_at(text, i, word):
    assert word_at(text, i) == word


@pytest.mark.parametrize(
    "text, baseline, value, words",
    [
        ("def f(x):\n    return x + 1\n", "def f(x):\n    return x + 1\n", 1.0, None),
        ("def f(x):\n    return x+1\n", "def f(x):\n    return x + 1\n", 0.0, ("+", "x+1")),
        ("会话在十二小时后过期", "会话在十二小时以后过期", 0.0, ("以", "后")),
    ],
)
def test_identical(text, baseline, value, words):
    s = score(identical, text, baseline)
    assert s.value == value and s.passed is (value == 1.0)
    if words is None:
        assert s.details == {"identical": True}
    else:
        assert (s.details["baseline_word"], s.details["variant_word"]) == words


def test_registered_for_every_scenario():
    for name in ("similarity.chrf", "similarity.bleu", "similarity.exact", "similarity.first_divergence", "exactness.identical"):
        spec = SCORERS.get(name)
        assert spec.scenarios == () and spec.kinds == ()
        assert spec.applies(case(scenario="code", kind="completion"))


@pytest.mark.parametrize(
    "tokens, baseline_tokens, expected",
    [
        ((1, 2, 3), (1, 2, 3), {"token_index": None}),
        ((1, 2, 9, 4), (1, 2, 3, 4), {"token_index": 2, "baseline_token": 3, "variant_token": 9}),
        ((1, 2), (1, 2, 3), {"token_index": 2, "baseline_token": 3, "variant_token": None}),  # stopped early
        ((5,), (1,), {"token_index": 0, "baseline_token": 1, "variant_token": 5}),
    ],
)
def test_identical_names_the_first_divergent_token(tokens, baseline_tokens, expected):
    from evalsuite.scoring.base import ScoreInput

    c = case(scenario="code", kind="completion")
    (s,) = identical(ScoreInput(c, "same text", baseline_text="same text" if tokens == baseline_tokens else "other", tokens=tokens, baseline_tokens=baseline_tokens))
    assert {k: s.details[k] for k in expected} == expected
