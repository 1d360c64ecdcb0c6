"""What the gate returns: a Verdict made of one RuleResult per (variant, rule), each with its
Violations and their evidence; and a Judgment, the verdict together with what it was judged on
(`evalsuite.judge.judge_run`'s result, which every entry point renders).

Exit codes: 0 pass, 1 regression (a block rule failed), 2 cannot judge (bad rubric, missing data,
run incomplete), 3 needs review (nothing failed, but more flagged outputs await human review than
the rubric's `review.max_open`). Warn rules are reported and never fail the gate.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..states import CANNOT_JUDGE_WORD, NEEDS_REVIEW, PASS, REGRESSION, ExitCode, RuleStatus, VerdictStatus
from .compare import Comparison
from .decisions import Decisions
from .rubric import Rubric, stage_reason

if TYPE_CHECKING:
    from ..run.store import RunStore

DIFF_WIDTH = 240


@dataclass(frozen=True, kw_only=True)
class Violation:
    """One broken rule for one variant (and scenario/metric), with the evidence to act on it."""

    rule: str
    severity: str  #: block | warn
    variant: str
    scenario: str | None
    metric: str | None
    reason: str
    numbers: dict = field(default_factory=dict)  #: baseline, variant, delta, CI, p, flips, noise floor...
    cases: tuple[str, ...] = ()  #: offending case ids (pass->fail, or worst first)
    diffs: tuple[str, ...] = ()  #: short baseline -> variant output diffs of the first offending cases

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class RuleResult:
    """The outcome of one rule for one variant: pass, fail (block), warn, skip (not applicable), missing,
    or cannot_judge (a performance interval straddles its limit; exit 2 unless another block rule fails)."""

    variant: str
    rule: str
    severity: str
    status: RuleStatus
    violations: tuple[Violation, ...] = ()
    note: str = ""
    single_pass: bool = False  #: speed ratios from one sequential pass, not judged (the verdict notes it once)
    #: a `required: false` rule that matched no score: cannot judge, shown as such, counted among the
    #: rules not checked, but the verdict does not wait on it (the rubric said it may match nothing)
    optional: bool = False

    def to_dict(self) -> dict:
        return {**asdict(self), "violations": [v.to_dict() for v in self.violations]}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Did quality regress? `passed` is False when a block rule failed or the run cannot be judged."""

    passed: bool
    judgeable: bool
    stage: str
    rubric: str
    run_id: str
    baseline: str
    variants: tuple[str, ...]
    results: tuple[RuleResult, ...]
    problems: tuple[str, ...] = ()  #: why the run cannot be judged
    notes: tuple[str, ...] = ()
    needs_review: bool = False  #: more open review items than the rubric's review.max_open (exit 3 when nothing failed)
    review: dict = field(default_factory=dict)  #: what the review queue decided (decisions.ReviewDecisions.summary)

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(v for r in self.results if r.status == "fail" for v in r.violations)

    @property
    def warnings(self) -> tuple[Violation, ...]:
        return tuple(v for r in self.results if r.status == "warn" for v in r.violations)

    @property
    def status(self) -> VerdictStatus:
        """pass | regression | cannot judge | needs review: the one word every output opens with."""
        if not self.judgeable:
            return CANNOT_JUDGE_WORD
        if not self.passed:
            return REGRESSION
        return NEEDS_REVIEW if self.needs_review else PASS

    @property
    def exit_code(self) -> int:
        if not self.judgeable:
            return int(ExitCode.CANNOT_JUDGE)
        return int((ExitCode.NEEDS_REVIEW if self.needs_review else ExitCode.OK) if self.passed else ExitCode.FAILED)

    def variant_status(self, variant: str) -> VerdictStatus:
        """One variant's own word (what the release ledger records for it): cannot judge when the run
        cannot be judged, regression when one of its block rules failed, needs review when the run
        needs review and this variant has open items, else pass."""
        if not self.judgeable:
            return CANNOT_JUDGE_WORD
        if self.failed_rules(variant):
            return REGRESSION
        if self.needs_review and (self.review.get("open_items") or {}).get(variant):
            return NEEDS_REVIEW
        return PASS

    @property
    def skipped(self) -> tuple[str, ...]:
        """The rules not checked for some variant (status skip), each once: the summary line counts them."""
        return tuple(dict.fromkeys(r.rule for r in self.results if r.status == "skip" or r.optional))

    def result(self, variant: str, rule: str) -> RuleResult | None:
        return next((r for r in self.results if r.variant == variant and r.rule == rule), None)

    def failed_rules(self, variant: str | None = None) -> list[str]:
        return [r.rule for r in self.results if r.status == "fail" and (variant is None or r.variant == variant)]

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "judgeable": self.judgeable,
            "exit_code": self.exit_code,
            "status": self.status,
            "stage": self.stage,
            "rubric": self.rubric,
            "run_id": self.run_id,
            "baseline": self.baseline,
            "variants": list(self.variants),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "needs_review": self.needs_review,
            "review": self.review,
            "violations": [v.to_dict() for v in self.violations],
            "warnings": [v.to_dict() for v in self.warnings],
            "results": [r.to_dict() for r in self.results],
        }


def short_diff(before: str | None, after: str | None, width: int = DIFF_WIDTH) -> str:
    """A one-paragraph word diff, `[-removed-]{+added+}`, trimmed around the changes."""
    if before is None or after is None:
        return "(output not stored)"
    a, b = before.split(), after.split()
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    parts: list[str] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            seg = a[i1:i2]
            if len(seg) > 8:
                seg = seg[:3] + ["..."] + seg[-3:] if parts else ["..."] + seg[-4:]
            parts.append(" ".join(seg))
        else:
            if i2 > i1:
                parts.append("[-" + " ".join(a[i1:i2]) + "-]")
            if j2 > j1:
                parts.append("{+" + " ".join(b[j1:j2]) + "+}")
    text = " ".join(p for p in parts if p)
    if not any(op != "equal" for op, *_ in sm.get_opcodes()):
        text = "(identical text)" if before == after else "(whitespace differs only)"
    return text if len(text) <= width else text[: width - 3] + "..."


def _fmt(x: object) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(i) for i in x) + "]"
    return str(x)


def violation_text(v: Violation) -> str:
    """A violation as plain text (pytest failures, logs)."""
    head = f"[{v.severity}] {v.rule} - {v.variant}: {v.reason}"
    lines = [head]
    keys = ("stat", "n", "baseline", "variant", "delta", "ci95", "p_worse", "p_adjusted", "pass_to_fail", "fail_to_pass", "noise_flips")
    nums = ", ".join(f"{k}={_fmt(v.numbers[k])}" for k in keys if k in v.numbers)
    if nums:
        lines.append(f"    numbers: {nums}")
    if v.cases:
        lines.append(f"    offending cases ({len(v.cases)} shown): {', '.join(v.cases)}")
    for d in v.diffs:
        lines.append(f"    diff {d}")
    return "\n".join(lines)


class FlagSummary(Protocol):
    """What a judgment shows of the flagging that preceded it (review.api.FlagResult is one; the
    review layer sits above this one, so it is named by shape)."""

    @property
    def queue(self) -> str: ...

    @property
    def open(self) -> int: ...

    @property
    def added(self) -> tuple[int, ...]: ...


@dataclass(frozen=True, kw_only=True)
class Judgment:
    """A judged run: the verdict and what it was judged on. Every entry point (gate, report, the
    pytest plugin, the demo, the notebooks, `run --adaptive`) renders one of these."""

    verdict: Verdict
    comparison: Comparison
    store: RunStore  #: the run judged
    rubric: Rubric
    stage: str
    stage_source: str  #: where the stage came from: "given", "suite" (its `stage:`) or "default"
    decisions: Decisions  #: the review and adaptive decisions the gate applied
    flagged: FlagSummary | None = None  #: the review queue's FlagResult when the run was flagged first
    partial: tuple[str, ...] = ()  #: why the run is not a full run of its suite (evalsuite.run.partial): it clears nothing unless asked

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def adaptive(self) -> bool:
        return self.decisions.adaptive is not None

    @property
    def stage_reason(self) -> str:
        """Why this stage: "as given", "the suite's stage:" or "the default: ..."."""
        return stage_reason(self.stage_source)

    def stage_line(self) -> str:
        """`stage production (the suite's stage:)`: which stage and why, for every output."""
        return f"stage {self.stage} ({self.stage_reason})"
