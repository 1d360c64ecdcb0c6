"""How a verdict history settles into an item's state (pure): undo, double review, adjudication."""

from __future__ import annotations

import pytest

from evalsuite.review.settle import settle


def row(i, verdict, reviewer, role="review", retracts=None):
    return {"id": i, "verdict": verdict, "reviewer": reviewer, "role": role, "retracts": retracts}


@pytest.mark.parametrize(
    "rows, needed, state, by",
    [
        ([], 1, None, None),
        ([row(1, "unsure", "a"), row(2, "acceptable", "b")], 1, "acceptable", 2),  # the latest counts
        ([row(1, "acceptable", "a"), row(2, "regression", "b"), row(3, "retracted", "b", "retraction", 2)], 1, "acceptable", 1),  # undo
        ([row(1, "acceptable", "a"), row(2, "retracted", "a", "retraction", 1)], 1, None, None),
        ([row(1, "acceptable", "a")], 2, "pending", 1),
        ([row(1, "unsure", "a")], 2, "unsure", 1),
        ([row(1, "acceptable", "a"), row(2, "acceptable", "b")], 2, "acceptable", 2),
        ([row(1, "acceptable", "a"), row(2, "acceptable", "a")], 2, "pending", 2),  # one reviewer twice is one review
        ([row(1, "acceptable", "a"), row(2, "regression", "b")], 2, "disputed", 2),
        ([row(1, "acceptable", "a"), row(2, "regression", "b"), row(3, "acceptable", "b")], 2, "acceptable", 3),  # b changed their mind
        ([row(1, "acceptable", "a"), row(2, "regression", "b"), row(3, "regression", "c", "adjudication")], 2, "regression", 3),
        ([row(1, "acceptable", "a"), row(2, "regression", "b"), row(3, "regression", "c", "adjudication"), row(4, "retracted", "c", "retraction", 3)], 2, "disputed", 2),
    ],
)
def test_settle(rows, needed, state, by):
    s = settle(rows, needed)
    assert s.state == state and (s.row["id"] if s.row else None) == by
