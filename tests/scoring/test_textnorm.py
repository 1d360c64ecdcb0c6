"""textnorm: normalisation and term matching shared by the text scorers."""

import pytest

from evalsuite.scoring.textnorm import contains_term, count_term, first_term, fold, normalize, units


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Lumora  Cloud\n\tnow", "lumora cloud now"),
        ("ＬＵＭＯＲＡ　Ｃｌｏｕｄ", "lumora cloud"),  # full-width letters and ideographic space
        ("  １２ hours ", "12 hours"),
        ("I don\u2019t know", "i don't know"),  # curly apostrophe
        ("CANARY\u20117Q2X", "canary-7q2x"),  # non-breaking hyphen
        ("露莫拉云（托管）", "露莫拉云(托管)"),  # full-width parentheses
        ("Stra\u00dfe", "strasse"),  # casefold, not lower
        ("zero\u200bwidth", "zerowidth"),
        ("", ""),
    ],
)
def test_normalize(text, expected):
    assert normalize(text) == expected


def test_fold_keeps_case_and_spacing():
    assert fold("ＡＢ\u2013Ｃ  ［1］\u200b") == "AB-C  [1]"


def test_normalize_keeps_case_when_asked():
    assert normalize("Ｌｕｍｏｒａ  Cloud", casefold=False) == "Lumora Cloud"


@pytest.mark.parametrize(
    "text, term, expected",
    [
        ("Try Lumora Cloud today", "Lumora Cloud", True),
        ("try LUMORA CLOUD today", "Lumora Cloud", True),
        ("Try Lumora\n  Cloud today", "Lumora Cloud", True),  # whitespace-insensitive
        ("Try ＬｕｍｏｒａＣｌｏｕｄ", "LumoraCloud", True),  # full-width output
        ("Try LumoraCloud today", "Lumora Cloud", False),  # a missing space is a different spelling
        ("Lumora Clouds are here", "Lumora Cloud", False),  # word boundary at the end
        ("the backups ran", "backup", False),
        ("(Lumora Cloud)", "Lumora Cloud", True),  # punctuation is a boundary
        ("sessions last 12 hours.", "12 hours", True),
        ("sessions last 112 hours.", "12 hours", False),  # boundary at the start
        ("Lumora Inc. ships", "Lumora Inc.", True),
        ("欢迎使用露莫拉云存储", "露莫拉云", True),  # CJK: plain substring
        ("欢迎使用露莫拉 云存储", "露莫拉云", True),  # stray space inside Chinese
        ("欢迎使用露莫拉雲", "露莫拉云", False),  # traditional 雲 is another character
        ("使用Lumora Cloud备份", "Lumora Cloud", True),  # Latin term between CJK characters
        ("使用 Lumora Cloud 备份", "Lumora Cloud", True),
        ("anything", "", False),
    ],
)
def test_contains_term(text, term, expected):
    assert contains_term(text, term) is expected


@pytest.mark.parametrize(
    "text, term, expected",
    [
        ("Lumora cloud", "Lumora cloud", True),
        ("Lumora Cloud", "Lumora cloud", False),
        ("ＬＵＭＯＲＡ cloud", "LUMORA cloud", True),
    ],
)
def test_contains_term_case_sensitive(text, term, expected):
    assert contains_term(text, term, case_sensitive=True) is expected


def test_count_and_first_term():
    assert count_term("Lumora Cloud, lumora cloud and Lumora Clouds", "Lumora Cloud") == 2
    assert count_term("云云云", "云") == 3
    assert first_term("twelve hours later", ["12 hours", "twelve hours"]) == "twelve hours"
    assert first_term("nothing here", ["12 hours"]) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The VPN gateway is vpn.northwind.example!", ["the", "vpn", "gateway", "is", "vpn", "northwind", "example"]),
        ("会话12小时后过期", ["会", "话", "12", "小", "时", "后", "过", "期"]),
        ("Ｅ３ band，240,000", ["e3", "band", "240", "000"]),
    ],
)
def test_units(text, expected):
    assert units(text) == expected
