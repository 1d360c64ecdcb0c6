"""The rubric's `review:` section: what the review queue flags, how it is reviewed (anchored or blind
pairwise, one or two independent verdicts per item, a random audit share of unflagged outputs, the
knife-edge margin of triage) and how many open items the gate tolerates (`max_open`). Parsed with
the rubric (verdict/rubric.py), applied by evalsuite.review.policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

from ..errors import suggest


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
    mode: str = "anchors"  #: anchors (baseline and variant named) | pairwise (blind: sides randomised per item, "which is worse?")
    reviews_per_item: int = 1  #: independent verdicts an item needs; 2: double review, disagreements go to adjudication
    audit_rate: float = 0.0  #: share of the unflagged outputs that differ from the baseline's, queued at random to audit the flags
    seed: int = 0  #: seeds the audit sample and the blind sides (recorded with each item)
    knife_edge_margin: float = 0.5  #: nats: a flip whose baseline preferred its token by less than this is knife-edge
    keep: str = "none"  #: regression: every output reviewed as a regression is kept as a case (casesets/kept/; `evalsuite review keep`)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_POLICY = ReviewPolicy()
MODES = ("anchors", "pairwise")
KEEP = ("none", "regression")  #: the review verdicts kept as cases automatically

#: field -> (its type, its range: (low, high) for numbers, the choices for a choice, else empty)
_SPEC: dict[str, tuple[str, tuple]] = {
    "flips": ("bool", ()),
    "flip_metrics": ("globs", ()),
    "similarity_metric": ("str", ()),
    "min_similarity": ("num?", (0.0, None)),
    "max_json_drift": ("num?", (0.0, None)),
    "citations": ("bool", ()),
    "leaks": ("bool", ()),
    "speculative": ("bool", ()),
    "disagreement": ("bool", ()),
    "related": ("groups", ()),
    "max_open": ("int?", (0, None)),
    "mode": ("choice", MODES),
    "reviews_per_item": ("int", (1, 5)),
    "audit_rate": ("num", (0.0, 1.0)),
    "seed": ("int", (0, None)),
    "knife_edge_margin": ("num", (0.0, None)),
    "keep": ("choice", KEEP),
}


def _number(typ: str, rng: tuple, v: object) -> tuple[object, str | None]:
    """A number field: (value, None) or (None, the problem)."""
    integer, optional = typ.startswith("int"), typ.endswith("?")
    if v is None and optional:
        return None, None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)) or (isinstance(v, float) and math.isnan(v)):
        return None, f"expected {'an integer' if integer else 'a number'}{' or null' if optional else ''}, got {v!r}"
    if rng[0] is not None and v < rng[0]:
        return None, f"must be at least {rng[0]:g}, got {v!r}"
    if rng[1] is not None and v > rng[1]:
        return None, f"must be at most {rng[1]:g}, got {v!r}"
    return (int(v) if integer else float(v)), None


def _value(typ: str, rng: tuple, v: object) -> tuple[object, str | None]:
    """One field's value checked against its type: (value, None) or (None, the problem)."""
    if typ == "bool":
        return (v, None) if isinstance(v, bool) else (None, f"expected true or false, got {v!r}")
    if typ == "str":
        return (v, None) if isinstance(v, str) and v else (None, f"expected a metric name, got {v!r}")
    if typ == "choice":
        return (v, None) if v in rng else (None, f"expected one of {', '.join(rng)}, got {v!r}")
    if typ in ("num", "num?", "int", "int?"):
        return _number(typ, rng, v)
    if typ == "globs":
        v = [v] if isinstance(v, str) else v
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            return None, f"expected a metric glob or a list of them, got {v!r}"
        return tuple(v), None
    if not isinstance(v, list) or not all(isinstance(g, list) and len(g) >= 2 and all(isinstance(x, str) for x in g) for g in v):
        return None, f"expected a list of groups, each a list of two or more metric globs, got {v!r}"
    return tuple(tuple(g) for g in v), None


def parse_review_policy(raw: object, add: Callable[[tuple, str | None, str, str], None]) -> ReviewPolicy:
    """Parse a rubric's `review:` section; report each problem through `add(path, rule, field, message)`
    (the rubric parser's, which prefixes file and line). A missing section gives the defaults."""
    if raw is None:
        return DEFAULT_POLICY
    if not isinstance(raw, dict):
        add(("review",), None, "review", f"expected a mapping of review settings ({', '.join(_SPEC)}), got {type(raw).__name__}")
        return DEFAULT_POLICY
    vals: dict = {}  # ReviewPolicy fields by name (of several types)
    for k in raw:
        if k not in _SPEC:
            add(("review", k), None, f"review.{k}", f"unknown field{suggest(k, _SPEC)}; known: {', '.join(_SPEC)}")
            continue
        typ, rng = _SPEC[k]
        value, problem = _value(typ, rng, raw[k])
        if problem is not None:
            add(("review", k), None, f"review.{k}", problem)
            continue
        vals[k] = value
    return ReviewPolicy(**vals)
