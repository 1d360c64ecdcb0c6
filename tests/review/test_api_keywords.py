"""The review API's options are explicit keyword-only parameters: a misspelt one fails at the call."""

from __future__ import annotations

import inspect

import pytest

from evalsuite.review import api


@pytest.mark.parametrize(
    "fn, names",
    [
        (api.annotate, {"note", "reviewer", "queue", "expires", "role", "blind"}),
        (api.decisions, {"now", "rubric_digest"}),
        (api.review_decisions, {"now", "rubric_digest"}),
        (api.flag, {"inputs", "policy", "queue", "records", "fingerprints"}),
    ],
)
def test_options_are_keyword_only_and_nothing_is_swallowed(fn, names):
    params = inspect.signature(fn).parameters.values()
    assert not any(p.kind is p.VAR_KEYWORD for p in params), f"{fn.__name__} takes **kwargs"
    assert names <= {p.name for p in params if p.kind is p.KEYWORD_ONLY}


def test_a_misspelt_option_is_an_error_not_ignored(tmp_path):
    with pytest.raises(TypeError, match="expire"):
        api.annotate(1, "acceptable", queue=tmp_path / "review.sqlite", expire="30d")  # type: ignore[call-arg]
