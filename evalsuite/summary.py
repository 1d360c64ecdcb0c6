"""Pass rates of one variant per scenario, kind and metric: where a model's floor is."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from .scoring.base import ScoreRecord


def pass_rates(records: Iterable[ScoreRecord], variant: str) -> list[dict]:
    """Rows (scenario, kind, metric, cases, passed, rate) over the records of `variant` that carry `passed`.

    A case counts as passed when at least half of its samples passed (as in the comparison).
    """
    per_case: dict[tuple[str, str, str, str], list[bool]] = defaultdict(list)
    for r in records:
        if r.variant != variant or r.passed is None:
            continue
        per_case[(r.scenario, r.kind, r.metric, r.case_id)].append(bool(r.passed))
    agg: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for (scen, kind, metric, _cid), flags in per_case.items():
        a = agg[(scen, kind, metric)]
        a[0] += 1
        a[1] += int(sum(flags) * 2 >= len(flags))
    return [
        {"scenario": s, "kind": k, "metric": m, "cases": n, "passed": p, "rate": p / n}
        for (s, k, m), (n, p) in sorted(agg.items())
    ]


def markdown_table(rows: list[dict]) -> str:
    out = ["| scenario | kind | metric | cases | passed | rate |", "| --- | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['scenario']} | {r['kind']} | `{r['metric']}` | {r['cases']} | {r['passed']} | {100 * r['rate']:.0f}% |")
    return "\n".join(out)
