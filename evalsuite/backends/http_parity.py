"""Served greedy outputs against the offline baseline's: identical, or each difference with its likely cause.

Served and offline greedy decoding of the same weights should agree token for token. When they do
not, the cause is one of a few settings, and the facts each generation carries tell which:

- an error on either side: nothing to compare
- different prompt token counts: the prompt was rendered differently (chat template, special tokens)
- the server's settings check found temperature 0 not greedy, or a setting was not sent
  (`unsupported`) or ignored (`max_tokens`): that setting
- one side stopped at the token limit and the other did not, the shorter text a prefix of the
  longer: the token limit or stop handling (`max_tokens`, end-of-sequence tokens)
- otherwise the same prompt decoded to a different argmax somewhere: numerics (the server's
  kernels, dtype, or the batch it ran in, e.g. continuous batching), named with the first
  differing character
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .base import Generation


@dataclass(frozen=True)
class ParityRow:
    """One (case, sample): whether the served text equals the offline one, else why not."""

    case_id: str
    sample: int
    identical: bool
    setting: str | None = None  #: the setting responsible for a difference
    detail: str = ""
    first_difference: int | None = None  #: character index of the first difference

    def to_dict(self) -> dict:
        return asdict(self)


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def explain(offline: Generation, served: Generation) -> ParityRow:
    """Compare one served generation with the offline one of the same case and sample."""
    key: dict[str, Any] = {"case_id": offline.case_id, "sample": offline.sample}
    if not offline.ok or not served.ok:
        side, g = ("offline", offline) if not offline.ok else ("served", served)
        return ParityRow(**key, identical=False, setting="error", detail=f"the {side} generation failed: {g.error}")
    if offline.text == served.text:
        return ParityRow(**key, identical=True)
    at = _first_difference(offline.text, served.text)
    extra = served.extra or {}
    if offline.prompt_tokens is not None and served.prompt_tokens is not None and offline.prompt_tokens != served.prompt_tokens:
        return ParityRow(
            **key,
            identical=False,
            setting="prompt rendering (chat template / special tokens)",
            detail=f"prompt tokens: offline {offline.prompt_tokens}, served {served.prompt_tokens}",
            first_difference=at,
        )
    check = extra.get("settings_check") or {}
    if check.get("status") == "ignored":
        return ParityRow(**key, identical=False, setting=check.get("setting", "temperature"), detail=check.get("evidence", ""), first_difference=at)
    for field, why in (("settings_not_sent", "not sent (listed as unsupported)"), ("settings_ignored", "ignored by the server")):
        if extra.get(field):
            return ParityRow(**key, identical=False, setting=", ".join(extra[field]), detail=why, first_difference=at)
    short, long_ = sorted((offline.text, served.text), key=len)
    if long_.startswith(short) and "length" in (offline.finish_reason, served.finish_reason):
        return ParityRow(
            **key,
            identical=False,
            setting="max_tokens / stop handling",
            detail=f"finish: offline {offline.finish_reason} ({offline.new_tokens} tokens), served {served.finish_reason} ({served.new_tokens} tokens)",
            first_difference=at,
        )
    parts = f"outputs part at character {at}: offline {offline.text[at : at + 20]!r}, served {served.text[at : at + 20]!r}"
    if served.prompt_tokens is None or offline.prompt_tokens is None:  # e.g. llama.cpp's server: no usage on a stream
        return ParityRow(**key, identical=False, setting="numerics or prompt rendering (no prompt token count to compare)", detail=parts, first_difference=at)
    return ParityRow(
        **key,
        identical=False,
        setting="numerics (server kernels, dtype or batching)",
        detail=f"same prompt ({served.prompt_tokens} tokens), {parts}",
        first_difference=at,
    )


def parity(offline: Iterable[Generation], served: Iterable[Generation]) -> list[ParityRow]:
    """One row per (case, sample) present on both sides, in the offline side's order."""
    by_key = {(g.case_id, g.sample): g for g in served}
    return [explain(o, by_key[(o.case_id, o.sample)]) for o in offline if (o.case_id, o.sample) in by_key]
