"""The verdict line as the judge reads it (issue 40): only a positive count of tests passes."""

from __future__ import annotations

import pytest

from evalsuite.sandbox.judge import split_verdict

TOKEN = "EVALSUITE-VERDICT-" + "ab" * 16

LINES = [
    ("3", (True, 3, None)),
    ("12", (True, 12, None)),
    ("0", (False, None, "the verdict line is not a count of tests: '0'")),
    ("FAIL", (False, None, "the harness's FAIL line gave no reason")),
    ("FAIL ", (False, None, "the harness's FAIL line gave no reason")),
    ("FAIL  ", (False, None, "the harness's FAIL line gave no reason")),
    ("FAIL no test ran", (False, None, "no test ran")),
    ("", (False, None, "the verdict line is not a count of tests: ''")),
    (" ", (False, None, "the verdict line is not a count of tests: ' '")),
    ("3 ", (False, None, "the verdict line is not a count of tests: '3 '")),
    ("+3", (False, None, "the verdict line is not a count of tests: '+3'")),
    ("٣", (False, None, "the verdict line is not a count of tests: '٣'")),
    ("PASS", (False, None, "the verdict line is not a count of tests: 'PASS'")),
]


@pytest.mark.parametrize(("rest", "expected"), LINES, ids=[repr(r) for r, _ in LINES])
def test_only_a_positive_count_passes(rest, expected):
    _, v = split_verdict(f"out\n{TOKEN} {rest}\n".encode(), TOKEN)
    assert (v.seen, v.tests_run, v.failure) == expected


def test_the_token_on_two_lines_fails():
    _, v = split_verdict(f"{TOKEN} 3\nout\n{TOKEN} 3\n".encode(), TOKEN)
    assert not v.seen and v.failure == "the verdict token appears 2 times in stdout (the harness writes it once)"


def test_the_token_not_last_is_not_a_verdict():
    _, v = split_verdict(f"{TOKEN} 3\nmore\n".encode(), TOKEN)
    assert (v.seen, v.failure) == (False, None)
