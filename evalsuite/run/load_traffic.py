"""The traffic of a load window: the replayed cases, the background pools, the draw and its order."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..backends.base import Request
from ..cases.options import LoadSettings
from .load_records import REST, TrafficItem
from .prompting import build_requests

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.suite import Variant


def _chars(req: Request) -> int:
    return sum(len(m[1]) for m in req.messages)


def replay_requests(cases: Sequence[Case], variant: Variant, n: int) -> list[Request]:
    """The fixed cases replayed under load: sample 0 of the first `n` case ids, asked as at rest."""
    reqs = sorted((r for r in build_requests(cases, variant) if r.sample == 0), key=lambda r: r.case_id)
    return reqs[:n]


def background_pools(cases: Sequence[Case], variant: Variant, settings: LoadSettings) -> dict[str, list[Request]]:
    """The background traffic's pools: `short` (the shorter half of the prompts) and `long` (the
    longest quarter: the longest contexts), with the load block's token limit."""
    reqs = sorted((r for r in build_requests(cases, variant) if r.sample == 0), key=lambda r: (_chars(r), r.case_id))
    if settings.max_new_tokens is not None:
        reqs = [replace(r, max_new_tokens=settings.max_new_tokens) for r in reqs]
    if not reqs:
        return {"short": [], "long": []}
    return {"short": reqs[: max(1, len(reqs) // 2)], "long": reqs[-max(1, len(reqs) // 4) :]}


def window_traffic(pools: Mapping[str, Sequence[Request]], replays: Sequence[Request], settings: LoadSettings, level: int, rnd: int) -> list[TrafficItem]:
    """One window's requests in sending order: background drawn by weight (the same draw for every
    variant at this level and round), with the replayed cases spread among them once the server is
    busy. The at-rest window (level 0) is the replayed cases alone."""
    shown = [TrafficItem(kind="replay", request=r, stream=True) for r in replays]
    if level == REST:
        return shown
    rng = random.Random(f"{settings.seed}:{level}:{rnd}")
    kinds = [k for k, w in settings.mix.items() if w > 0 and pools.get(k)]
    if not kinds:
        return shown
    weights = [settings.mix[k] for k in kinds]
    background = []
    for _ in range(settings.requests):
        kind = rng.choices(kinds, weights)[0]
        background.append(TrafficItem(kind=kind, request=rng.choice(list(pools[kind])), stream=rng.random() < settings.stream))
    lead = min(level - 1, len(background))  # the server is busy before the first replay
    out = background[:lead]
    rest = background[lead:]
    step = max(1, len(rest) // max(1, len(shown))) if rest else 1
    for i, item in enumerate(shown):
        out.append(item)
        out.extend(rest[i * step : (i + 1) * step])
    out.extend(rest[len(shown) * step :])
    return out
