"""The rubric's `review:` section: what the review queue flags, and how many open items the gate
tolerates (`max_open`). Parsed with the rubric (verdict/rubric.py), applied by evalsuite.review.policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class ReviewPolicy:
    """What gets flagged for review, and how many open items the gate tolerates."""

    flips: bool = True  #: flag pass->fail flips
    flip_metrics: tuple[str, ...] = ("*",)  #: globs of the pass/fail metrics whose flips are flagged
    similarity_metric: str = "similarity.chrf"  #: a similarity-to-baseline metric (higher is closer)
    min_similarity: float | None = 50.0  #: flag below this (None: off)
    max_json_drift: float | None = 0.0  #: flag json.drift above this (None: off)
    citations: bool = True  #: flag changed citation sets
    leaks: bool = True  #: flag any leak
    speculative: bool = True  #: flag outputs of speculative variants that differ from the baseline
    disagreement: bool = True  #: flag scorer disagreements
    related: tuple[tuple[str, ...], ...] = ()  #: groups of related metric globs (default: one group per metric family)
    max_open: int | None = None  #: the gate says "needs review" above this many open items (None: never)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_POLICY = ReviewPolicy()

_SPEC: dict[str, tuple[str, Any]] = {
    "flips": ("bool", None),
    "flip_metrics": ("globs", None),
    "similarity_metric": ("str", None),
    "min_similarity": ("num?", (0.0, None)),
    "max_json_drift": ("num?", (0.0, None)),
    "citations": ("bool", None),
    "leaks": ("bool", None),
    "speculative": ("bool", None),
    "disagreement": ("bool", None),
    "related": ("groups", None),
    "max_open": ("int?", (0, None)),
}


def parse_review_policy(raw: Any, add: Callable[[tuple, Any, str, str], None]) -> ReviewPolicy:
    """Parse a rubric's `review:` section; report each problem through `add(path, rule, field, message)`
    (the rubric parser's, which prefixes file and line). A missing section gives the defaults."""
    if raw is None:
        return DEFAULT_POLICY
    if not isinstance(raw, dict):
        add(("review",), None, "review", f"expected a mapping of review settings ({', '.join(_SPEC)}), got {type(raw).__name__}")
        return DEFAULT_POLICY
    vals: dict[str, Any] = {}
    for k in raw:
        if k not in _SPEC:
            import difflib

            close = difflib.get_close_matches(str(k), list(_SPEC), n=1)
            add(("review", k), None, f"review.{k}", f"unknown field{' (did you mean ' + repr(close[0]) + '?)' if close else ''}; known: {', '.join(_SPEC)}")
            continue
        v, (typ, rng) = raw[k], _SPEC[k]
        path, fld = ("review", k), f"review.{k}"
        if typ == "bool":
            if not isinstance(v, bool):
                add(path, None, fld, f"expected true or false, got {v!r}")
                continue
        elif typ == "str":
            if not isinstance(v, str) or not v:
                add(path, None, fld, f"expected a metric name, got {v!r}")
                continue
        elif typ in ("num?", "int?"):
            if v is not None:
                bad = (
                    isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or (typ == "int?" and not isinstance(v, int))
                    or (isinstance(v, float) and math.isnan(v))
                )
                if bad:
                    add(path, None, fld, f"expected {'an integer' if typ == 'int?' else 'a number'} or null, got {v!r}")
                    continue
                if rng[0] is not None and v < rng[0]:
                    add(path, None, fld, f"must be at least {rng[0]:g}, got {v!r}")
                    continue
                v = int(v) if typ == "int?" else float(v)
        elif typ == "globs":
            v = [v] if isinstance(v, str) else v
            if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
                add(path, None, fld, f"expected a metric glob or a list of them, got {raw[k]!r}")
                continue
            v = tuple(v)
        elif typ == "groups":
            if not isinstance(v, list) or not all(isinstance(g, list) and len(g) >= 2 and all(isinstance(x, str) for x in g) for g in v):
                add(path, None, fld, f"expected a list of groups, each a list of two or more metric globs, got {v!r}")
                continue
            v = tuple(tuple(g) for g in v)
        vals[k] = v
    return ReviewPolicy(**vals)
