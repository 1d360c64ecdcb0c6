"""The report's "Stability under load" rows: per served variant and level, the figures of
evalsuite.verdict.load's LoadSummary as display values (the HTML page, markdown and the terminal
render the same rows). Faults, when recorded, sit beside these in their own record."""

from __future__ import annotations

from collections.abc import Mapping

from ..verdict.load import LoadLevel, LoadSummary, ratio_text

__all__ = ["load_rows"]


def _s(x: float | None) -> str:
    """Seconds: 0.123 s, 12.3 ms below 0.1 s."""
    if x is None:
        return "-"
    return f"{1000 * x:.1f} ms" if x < 0.1 else f"{x:.3f} s"


def _pcts(d: Mapping[str, float | None]) -> str:
    return " / ".join(_s(d.get(k)) for k in ("p50", "p95", "p99"))


def _row(lv: LoadLevel, rest: LoadLevel | None) -> dict:
    floor = len(rest.flips) if rest is not None and rest.scored else None
    return {
        "variant": lv.variant,
        "level": lv.level,
        "rounds": lv.rounds,
        "requests": lv.requests,
        "not_sent": lv.not_sent,
        "errors": lv.errors,
        "timeouts": lv.timeouts,
        "ttft": _pcts(lv.ttft_s),
        "itl": _pcts(lv.itl_s),
        "e2e": _pcts(lv.e2e_s),
        "ttft_p95_s": lv.ttft_s.get("p95"),
        "tokens_per_s": "-" if lv.tokens_per_s is None else f"{lv.tokens_per_s:.1f}",
        "tokens_per_s_request": "-" if lv.tokens_per_s_request is None else f"{lv.tokens_per_s_request:.1f}",
        "queue_wait": lv.queue_wait_source if lv.queue_wait_s is None else _s(lv.queue_wait_s),
        "ttft_ratio": ratio_text(lv.ttft_p95_ratio),
        "replayed": lv.replayed,
        "changed": len(lv.changed),
        "flips": "-" if not lv.scored else str(len(lv.flips)),
        "flip_floor": "-" if floor is None else str(floor),
        "flip_cases": ", ".join(map(str, lv.flips[:5])),
        "vs_baseline": "-" if not lv.scored else str(lv.baseline_pass_to_fail),
        "errors_seen": "; ".join(lv.error_samples),
    }


def load_rows(summary: LoadSummary | None) -> list[dict]:
    """One row per served variant and level (its at-rest rerun first, as level "rest"), or [] without load."""
    if summary is None:
        return []
    rows = []
    for v in summary.variants:
        rest = summary.rest(v)
        if rest is not None:
            rows.append(_row(rest, None) | {"level": "rest"})
        rows += [_row(lv, rest) for lv in summary.for_variant(v)]
    return rows
