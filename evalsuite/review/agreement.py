"""How far reviewers agree, and what the automatic flags miss: statistics of the queue (pure).

- `agreement(histories)`: Cohen's kappa (statsmodels) per pair of reviewers over the items both
  answered independently (each reviewer's latest standing acceptable / regression), with the counts
  behind it; and the items whose independent reviews disagree, with the adjudicator's verdict when
  one settled them.
- `miss_rate(populations, audited)`: from the audit sample (unflagged outputs queued at random),
  the share of them reviewers judged a regression, with its exact binomial (Clopper-Pearson, 95%)
  interval (statsmodels), scaled to the population: how many regressions the flags let through.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .settle import DECISIVE, independent, standing


def _kappa(table: Any) -> float | None:
    """Cohen's kappa of a 2x2 table; None when it is undefined (every verdict in one category)."""
    import numpy as np
    from statsmodels.stats.inter_rater import cohens_kappa

    t = np.asarray(table, dtype=float)
    n = t.sum()
    if n == 0:
        return None
    pe = float((t.sum(0) * t.sum(1)).sum() / n**2)
    if pe >= 1.0 - 1e-12:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return round(float(cohens_kappa(t).kappa), 4)


def _pair_row(a: str, b: str, both: Sequence[tuple[str, str]]) -> dict:
    table = [[sum(1 for x, y in both if x == r and y == c) for c in DECISIVE] for r in DECISIVE]
    agree = sum(1 for x, y in both if x == y)
    return {
        "reviewers": [a, b],
        "items": len(both),
        "agree": agree,
        "disagree": len(both) - agree,
        "kappa": _kappa(table),
        "table": table,
        "categories": list(DECISIVE),
    }


def agreement(histories: Mapping[int, Sequence[Mapping[str, Any]]], items: Mapping[int, Mapping[str, Any]] | None = None) -> dict:
    """Kappa per reviewer pair and the disagreements (see the module docstring). `histories`: item id
    -> its verdict rows in order; `items`: item id -> item (variant, case id) for the listing."""
    votes: dict[int, dict[str, str]] = {}
    for iid, rows in histories.items():
        v = {rev: r["verdict"] for rev, r in independent(rows).items() if r["verdict"] in DECISIVE}
        if len(v) >= 2:
            votes[iid] = v
    reviewers = sorted({rev for v in votes.values() for rev in v})
    pairs = []
    for a, b in itertools.combinations(reviewers, 2):
        both = [(v[a], v[b]) for v in votes.values() if a in v and b in v]
        if both:
            pairs.append(_pair_row(a, b, both))
    disagreements = []
    for iid, v in sorted(votes.items()):
        if len(set(v.values())) > 1:
            adj = [r for r in standing(histories[iid]) if r["role"] == "adjudication"]
            it = (items or {}).get(iid, {})
            disagreements.append(
                {
                    "id": iid,
                    "variant": it.get("variant"),
                    "case_id": it.get("case_id"),
                    "verdicts": dict(sorted(v.items())),
                    "adjudicated": adj[-1]["verdict"] if adj else None,
                    "adjudicator": adj[-1]["reviewer"] if adj else None,
                }
            )
    return {"pairs": pairs, "items": len(votes), "disagreements": disagreements}


def miss_rate(populations: Iterable[Mapping[str, Any]], audited: Iterable[Mapping[str, Any]], alpha: float = 0.05) -> dict:
    """The audit's estimate of the regressions the flags miss (see the module docstring).
    `populations`: the audits table's rows; `audited`: the audit items with their current state."""
    from statsmodels.stats.proportion import proportion_confint

    pops = list(populations)
    audited = list(audited)
    population = sum(int(p["population"]) for p in pops)
    reviewed = [a for a in audited if a.get("verdict") in DECISIVE]
    x, n = sum(1 for a in reviewed if a["verdict"] == "regression"), len(reviewed)
    out: dict[str, Any] = {
        "runs": sorted({p["run_id"] for p in pops}),
        "rate": max((float(p["rate"]) for p in pops), default=0.0),
        "population": population,
        "sampled": len(audited),
        "reviewed": n,
        "regressions": x,
        "miss_rate": None,
        "ci": None,
        "missed": None,
        "missed_ci": None,
        "confidence": 1 - alpha,
        "method": "Clopper-Pearson (exact binomial)",
    }
    if n:
        lo, hi = proportion_confint(x, n, alpha=alpha, method="beta")
        out.update(
            miss_rate=round(x / n, 4),
            ci=[round(float(lo), 4), round(float(hi), 4)],
            missed=round(population * x / n, 1),
            missed_ci=[round(population * float(lo), 1), round(population * float(hi), 1)],
        )
    return out


def miss_rate_line(est: Mapping[str, Any]) -> str:
    """The estimate in one sentence (stats, gate notes, the report)."""
    if not est or not est.get("sampled"):
        return "no audit sample (set review.audit_rate in the rubric to estimate what the flags miss)"
    head = f"audit: {est['sampled']} of {est['population']} unflagged output(s) that differ from the baseline's queued at random ({est['rate']:.0%})"
    if not est.get("reviewed"):
        return head + "; none reviewed yet, so no estimate of what the flags miss"
    lo, hi = est["ci"]
    mlo, mhi = est["missed_ci"]
    return (
        f"{head}; {est['regressions']} of {est['reviewed']} reviewed judged a regression: the flags miss about "
        f"{est['miss_rate']:.0%} ({lo:.0%}-{hi:.0%}, {est['confidence']:.0%} CI), i.e. about {est['missed']:g} regression(s) ({mlo:g}-{mhi:g})"
    )
