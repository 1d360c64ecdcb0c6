"""Scores and the scorer registry.

A scorer is a pure function of a case and an output (and, for drift, the baseline's output for the
same case and sample): it reads no files and calls no model, so every score of a stored run can be
recomputed in seconds. Scorers are registered by name with the arguments they were built with, so a
run records exactly how it was scored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..backends.toolcalls import ToolCall
from ..cases.caseset import Case
from ..registry import Registry
from ..run.store import ScoreRecord  # the stored form of a score (the run directory owns its records)

__all__ = ["SCORERS", "CaseScorer", "PerOutputScorer", "Score", "ScoreInput", "ScoreRecord", "ScorerSpec", "scorer"]


@dataclass(frozen=True)
class Score:
    """One metric value for one output (or for one case, for case-level metrics such as pass@k)."""

    metric: str  #: dotted name, e.g. "json.valid", "citations.precision", "code.pass@1"
    value: float | None  #: None when the metric does not apply to this output
    passed: bool | None = None  #: pass/fail view of the metric, when it has one
    higher_is_better: bool = True
    details: dict = field(default_factory=dict)  #: evidence: missing terms, error paths, first divergence...


@dataclass(frozen=True)
class ScoreInput:
    """What a per-output scorer sees."""

    case: Case
    text: str
    sample: int = 0
    variant: str = ""
    baseline_text: str | None = None  #: the baseline's output for the same case and sample
    error: str | None = None  #: the generation's error, if it failed (text is then empty)
    tokens: tuple[int, ...] | None = None  #: generated token ids, when the backend recorded them
    baseline_tokens: tuple[int, ...] | None = None  #: the baseline's, for the same case and sample
    calls: tuple[ToolCall, ...] | None = None  #: the tool calls the backend parsed; None: read them from the text
    baseline_calls: tuple[ToolCall, ...] | None = None  #: the baseline's, for the same case and sample


PerOutputScorer = Callable[[ScoreInput], Sequence[Score]]
#: a case-level scorer sees every sample of one case for one variant (and the baseline's)
CaseScorer = Callable[[Case, Sequence[ScoreInput]], Sequence[Score]]


@dataclass(frozen=True, kw_only=True)
class ScorerSpec:
    """A registered scorer: its name, the function, what it applies to and its arguments."""

    name: str
    fn: Callable
    level: str = "output"  #: "output" (per sample) or "case" (all samples of a case)
    scenarios: tuple[str, ...] = ()  #: empty = every scenario
    kinds: tuple[str, ...] = ()  #: empty = every kind
    args: dict = field(default_factory=dict)
    version: str = "1"  #: bump when the scorer's behaviour changes other than through its source (reuse keys on it)

    def applies(self, case: Case) -> bool:
        return (not self.scenarios or case.scenario in self.scenarios) and (not self.kinds or case.kind in self.kinds)

    def describe(self) -> dict:
        return {"name": self.name, "level": self.level, "scenarios": list(self.scenarios), "kinds": list(self.kinds), "args": self.args}


SCORERS: Registry[ScorerSpec] = Registry("scorer")


def scorer(name: str, *, level: str = "output", scenarios: Iterable[str] = (), kinds: Iterable[str] = (), version: str = "1", **args: object):
    """Decorator registering a scorer under `name`."""

    def deco(fn: Callable) -> Callable:
        SCORERS.register(name, ScorerSpec(name=name, fn=fn, level=level, scenarios=tuple(scenarios), kinds=tuple(kinds), args=dict(args), version=str(version)))
        return fn

    return deco
