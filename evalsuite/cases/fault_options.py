"""The suite's `faults:` block: which fault probes run against each served variant, and their bounds.

A served variant (`backend: http` with a `serve` launcher) is probed after its generation: an
over-long input, a client that disconnects mid-stream, a caller that retries, a burst above the
server's concurrent-sequence limit, the server killed mid-run and a model that fails to load.
Each probe's outcome is recorded in the run (evalsuite.run.faults). The block is top-level and
applies to every served variant unless `variants` names some:

    faults: all                                  # every probe, default bounds
    faults: [disconnect, retry]                  # these probes
    faults: {kinds: [burst], burst: 12, timeout_s: 60, variants: [served-cb]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Problem, suggest
from .options import LineOf


@dataclass(frozen=True, kw_only=True)
class FaultKind:
    """One fault probe, every fact about it in one place: adding a kind is one entry here and its probe."""

    name: str  #: its name in a suite's `faults.kinds`, in faults.json and in the report
    title: str  #: how the report names it for people
    options: tuple[str, ...]  #: the `faults:` settings its probe reads
    probe: str  #: "module:attr" of its probe (the run layer; resolved lazily, as registry entries are)
    classifier: str  #: "module:attr" of the pure function that turns what the probe saw into an outcome


_PROBES, _CLASSIFY = "evalsuite.run.fault_probes", "evalsuite.run.faults"

#: the one table of fault kinds, in the order the probes run (the ones that restart the server come last):
#: (name, title, the `faults:` settings its probe reads, its probe, its classifier)
FAULTS: tuple[FaultKind, ...] = tuple(
    FaultKind(name=name, title=title, options=options, probe=f"{_PROBES}:{probe}", classifier=f"{_CLASSIFY}:{classifier}")
    for name, title, options, probe, classifier in (
        ("retry", "caller retries", ("cases",), "probe_retry", "classify_retry"),
        ("disconnect", "client disconnect mid-stream", ("cases", "timeout_s"), "probe_disconnect", "classify_disconnect"),
        ("burst", "burst above the sequence limit", ("cases", "burst", "timeout_s"), "probe_burst", "classify_burst"),
        ("server_killed", "server killed mid-run", ("kill_after", "timeout_s"), "probe_server_killed", "classify_killed"),
        ("overlong_input", "over-long input", ("cases", "overlong_tokens", "timeout_s"), "probe_overlong", "classify_overlong"),
        ("load_failure", "model fails to load", ("timeout_s",), "probe_load_failure", "classify_load_failure"),
    )
)
FAULT_KIND: dict[str, FaultKind] = {f.name: f for f in FAULTS}
#: the fault probes' names, in the order they run
FAULT_KINDS: tuple[str, ...] = tuple(FAULT_KIND)

_INTS = {"burst": 2, "cases": 1, "kill_after": 1, "overlong_tokens": 16}


@dataclass(frozen=True, kw_only=True)
class FaultSettings:
    """The parsed `faults:` block."""

    kinds: tuple[str, ...] = FAULT_KINDS  #: the probes to run, in FAULT_KINDS order
    variants: tuple[str, ...] | None = None  #: the served variants to probe (None: every served one)
    timeout_s: float = 120.0  #: the bound of each probe's wait: a server silent past it hangs
    burst: int = 8  #: requests sent at once by the burst probe (above the server's sequence limit)
    cases: int = 3  #: requests (the first cases) each probe replays
    kill_after: int = 1  #: finished generations the run holds before the server is killed
    overlong_tokens: int | None = None  #: the over-long prompt's length (default: 1.25x the model's context)

    def to_dict(self) -> dict:
        return {
            "kinds": list(self.kinds),
            "variants": list(self.variants) if self.variants is not None else None,
            "timeout_s": self.timeout_s,
            "burst": self.burst,
            "cases": self.cases,
            "kill_after": self.kill_after,
            "overlong_tokens": self.overlong_tokens,
        }


def parse_faults_block(raw: object, file: str, line_of: LineOf, problems: list[Problem]) -> FaultSettings | None:
    """The suite's `faults:` block as settings (None when absent); each fault of the block becomes a
    Problem naming the file, the line and the field."""
    if raw is None or raw is False:
        return None
    if raw == "all" or raw is True:
        return parse_faults_block({}, file, line_of, problems)
    if isinstance(raw, list):
        return parse_faults_block({"kinds": raw}, file, line_of, problems)
    if not isinstance(raw, dict):
        problems.append(Problem(file, line_of(("faults",)), None, "faults", f"expected `all`, a list of probes or a mapping, got {raw!r}"))
        return None
    n = len(problems)

    def bad(key: str, message: str) -> None:
        problems.append(Problem(file, line_of(("faults", key)), None, f"faults.{key}", message))

    known = set(FaultSettings.__dataclass_fields__)
    for key in sorted(set(raw) - known, key=str):
        bad(str(key), f"unknown setting{suggest(str(key), sorted(known))} (known: {', '.join(sorted(known))})")
    vals: dict[str, Any] = {}
    kinds = raw.get("kinds", list(FAULT_KINDS))
    if kinds == "all":
        kinds = list(FAULT_KINDS)
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        bad("kinds", f"expected a list of probes ({', '.join(FAULT_KINDS)}), got {kinds!r}")
    else:
        for k in kinds:
            if k not in FAULT_KINDS:
                bad("kinds", f"unknown probe {k!r}{suggest(k, FAULT_KINDS)}; known: {', '.join(FAULT_KINDS)}")
        vals["kinds"] = tuple(k for k in FAULT_KINDS if k in kinds)
    names = raw.get("variants")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            bad("variants", f"expected a list of variant names, got {names!r}")
        else:
            vals["variants"] = tuple(names)
    for key, lo in _INTS.items():
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            bad(key, f"expected an integer of at least {lo}, got {v!r}")
        else:
            vals[key] = v
    v = raw.get("timeout_s")
    if v is not None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            bad("timeout_s", f"expected a positive number of seconds, got {v!r}")
        else:
            vals["timeout_s"] = float(v)
    if len(problems) > n:
        return None
    return FaultSettings(**vals)
