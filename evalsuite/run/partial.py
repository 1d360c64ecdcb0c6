"""Whether a run covers its whole suite: a run made with `--limit`, `--scenarios`, `--variants` (or a
narrow demo profile, which is a limit) is *partial*. It is judged like any other, but it clears no
variant for a stage unless asked (`gate --record`), and `promote` refuses it (issue 38: a smoke run
once cleared a variant for production).

The signature records the narrowing at creation (`partial`: limit and scenarios); the variants a run
lacks are read from the suite saved beside it, so a resumed run that adds them becomes full.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["full_run_command", "partial_reasons", "selection"]


def selection(*, limit: int | None, scenarios: Sequence[str] | None) -> dict:
    """What the signature records of a run's narrowing of its cases ({} for every case of the suite)."""
    out: dict[str, Any] = {}
    if limit is not None:
        out["limit"] = int(limit)
    if scenarios:
        out["scenarios"] = sorted(scenarios)
    return out


def partial_reasons(signature: Mapping[str, object], suite: Mapping[str, object] | None) -> tuple[str, ...]:
    """Why a run is not a full run of its suite, in the words of the options that made it (empty: full)."""
    partial, ran_variants = signature.get("partial"), signature.get("variants")
    sel: Mapping[str, object] = partial if isinstance(partial, Mapping) else {}
    limit, scenarios = sel.get("limit"), sel.get("scenarios")
    out = []
    if limit is not None:
        out.append(f"--limit {limit}")
    if isinstance(scenarios, list) and scenarios:
        out.append(f"--scenarios {','.join(map(str, scenarios))}")
    variants = (suite or {}).get("variants")
    named = [str(v.get("name")) for v in (variants if isinstance(variants, list) else []) if isinstance(v, Mapping) and v.get("name")]
    ran = set(ran_variants) if isinstance(ran_variants, Mapping) else set()
    missing = [n for n in named if n not in ran]
    if ran and missing:
        out.append(f"--variants (without {', '.join(missing)})")
    return tuple(out)


def full_run_command(suite: Mapping[str, object] | None) -> str:
    """The command that makes a full run of the suite a run was made from."""
    path = str((suite or {}).get("path") or (suite or {}).get("name") or "SUITE")
    return f"evalsuite run {shlex.quote(path)}"
