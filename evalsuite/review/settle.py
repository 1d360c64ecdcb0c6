"""An item's state from its verdict history (pure): which rows still stand, and what they settle.

Rows are appended, never changed: an undo appends a retraction of an earlier row, an adjudication
appends the adjudicator's verdict. What stands:

- an adjudication (the latest standing one) settles the item, whatever the reviews said;
- with one review needed, the latest standing review counts (a later reviewer may overrule);
- with `needed` independent reviews, each reviewer's latest standing review counts once:
  fewer than `needed` decisive ones (acceptable / regression) -> `pending` (or `unsure` when
  nobody decided), all agreeing -> that verdict, any disagreement -> `disputed` (adjudication).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..states import DECISIVE as _DECISIVE
from ..states import REVIEW_STATES

DECISIVE = _DECISIVE
STATES = REVIEW_STATES


@dataclass(frozen=True)
class Settled:
    """An item's current state and the row that decided it (None: never reviewed)."""

    state: str | None  #: acceptable | regression | unsure | pending | disputed | None
    row: Mapping[str, Any] | None  #: the deciding (or latest standing) row


def standing(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows that still stand, in order: neither retractions nor retracted."""
    rows = list(rows)
    retracted = {r["retracts"] for r in rows if r["role"] == "retraction"}
    return [r for r in rows if r["role"] != "retraction" and r["id"] not in retracted]


def independent(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """reviewer -> their latest standing review (adjudications left out)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for r in standing(rows):
        if r["role"] == "review":
            latest[r["reviewer"]] = r
    return latest


def settle(rows: Iterable[Mapping[str, Any]], needed: int = 1) -> Settled:
    """The state the history settles on (rows in id order)."""
    live = standing(rows)
    adjudications = [r for r in live if r["role"] == "adjudication"]
    if adjudications:
        return Settled(adjudications[-1]["verdict"], adjudications[-1])
    reviews = [r for r in live if r["role"] == "review"]
    if not reviews:
        return Settled(None, None)
    if needed <= 1:
        return Settled(reviews[-1]["verdict"], reviews[-1])
    decisive = [r for r in independent(reviews).values() if r["verdict"] in DECISIVE]
    if len(decisive) < needed:
        return Settled("pending" if decisive else "unsure", reviews[-1])
    verdicts = {r["verdict"] for r in decisive}
    last = max(decisive, key=lambda r: r["id"])
    return Settled(last["verdict"] if len(verdicts) == 1 else "disputed", last)
