"""Pass rates of one variant per scenario, kind and metric: where a model's floor is."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..scoring.base import ScoreRecord


def pass_rates(records: Iterable[ScoreRecord], variant: str) -> list[dict]:
    """Rows (scenario, kind, metric, cases, passed, rate) over the records of `variant` that carry
    `passed`; a case passes as in the comparison (`CaseAgg.passed`)."""
    from .compare import per_case

    agg: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for (v, scen, metric), cases in per_case(records).items():
        if v != variant:
            continue
        for case in cases.values():
            if case.passes:
                a = agg[(scen, case.kind, metric)]
                a[0] += 1
                a[1] += int(case.passed)
    return [{"scenario": s, "kind": k, "metric": m, "cases": n, "passed": p, "rate": p / n} for (s, k, m), (n, p) in sorted(agg.items())]


def markdown_table(rows: list[dict]) -> str:
    out = ["| scenario | kind | metric | cases | passed | rate |", "| --- | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['scenario']} | {r['kind']} | `{r['metric']}` | {r['cases']} | {r['passed']} | {100 * r['rate']:.0f}% |")
    return "\n".join(out)
