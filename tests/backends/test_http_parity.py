"""Served vs offline greedy outputs: identical, or each difference named with its setting."""

from __future__ import annotations

import pytest

from evalsuite.backends.base import Generation
from evalsuite.backends.http_parity import explain, parity


def gen(text="Paris is the capital.", *, prompt=30, finish="stop", new=6, error=None, **extra) -> Generation:
    return Generation(
        "c1",
        "v",
        0,
        text=text if error is None else "",
        prompt_tokens=prompt,
        new_tokens=new,
        finish_reason=finish if error is None else "error",
        error=error,
        extra=extra,
    )


@pytest.mark.parametrize(
    "served, identical, setting",
    [
        (gen(), True, None),
        (gen(error="HTTP 500: boom"), False, "error"),
        (gen("Lyon is the capital.", prompt=33), False, "prompt rendering (chat template / special tokens)"),
        (
            gen("Lyon is the capital.", settings_check={"setting": "temperature=0 (greedy)", "status": "ignored", "evidence": "seeds differ"}),
            False,
            "temperature=0 (greedy)",
        ),
        (gen("Lyon is the capital.", settings_not_sent=["seed"]), False, "seed"),
        (gen("Paris is the capital. And", settings_ignored=["max_tokens"]), False, "max_tokens"),
        (gen("Paris is the capital. And more", finish="length", new=8), False, "max_tokens / stop handling"),
        (
            gen("Paris is a capital.", settings_check={"setting": "temperature=0 (greedy)", "status": "verified"}),
            False,
            "numerics (server kernels, dtype or batching)",
        ),
        # llama.cpp's server reports no prompt count on a stream: rendering cannot be ruled out
        (gen("Paris is a capital.", prompt=None), False, "numerics or prompt rendering (no prompt token count to compare)"),
    ],
)
def test_explain(served, identical, setting):
    row = explain(gen(), served)
    assert (row.identical, row.setting) == (identical, setting)
    if not identical:
        assert row.detail
    if setting and setting.startswith("numerics"):
        assert row.first_difference == 9 and "'the capital.'" in row.detail and "'a capital.'" in row.detail


def test_parity_pairs_by_case_and_sample():
    offline = [Generation("a", "base", 0, text="x"), Generation("b", "base", 0, text="y"), Generation("c", "base", 0, text="z")]
    served = [Generation("b", "srv", 0, text="y"), Generation("a", "srv", 0, text="X")]
    rows = parity(offline, served)
    assert [(r.case_id, r.identical) for r in rows] == [("a", False), ("b", True)]
    assert rows[0].to_dict()["first_difference"] == 0
