"""Clearance of a build at a stage, the deployment stack, and the rollback target (pure, from rows)."""

from __future__ import annotations

import pytest

from evalsuite.releases.clearance import RubricDigests, clearance, deployment_stack, stage_deployments
from evalsuite.releases.ledger import Decision

from .test_ledger import decision, deployment


class Digests(RubricDigests):
    def __init__(self, digest="d1"):
        super().__init__()
        self.digest = digest

    def __call__(self, path, stage):
        return (self.digest, "") if self.digest else (None, "its rubric cannot be read now (gone)")


def stamped(d: Decision, i: int) -> Decision:
    from dataclasses import replace

    return replace(d, id=i, created=f"2026-01-0{i}T00:00:00")


@pytest.mark.parametrize(
    ("history", "digest", "verdicts", "cleared", "since", "reason"),
    [
        ([decision()], "d1", {}, True, "2026-01-01T00:00:00", ""),
        ([decision(), decision()], "d1", {}, True, "2026-01-01T00:00:00", ""),
        ([decision(), decision(status="regression", failed_rules=("r1",)), decision()], "d1", {}, True, "2026-01-03T00:00:00", ""),
        ([decision(), decision(status="needs review")], "d1", {}, False, None, "its latest dev decision (#2, run run-1) was needs review"),
        ([decision(status="regression", failed_rules=("r1", "r2"))], "d1", {}, False, None, "was regression: r1, r2"),
        ([decision()], "d2", {}, False, None, "the dev rules of r.yaml changed since decision #1: judge it again"),
        ([decision()], None, {}, False, None, "its rubric cannot be read now (gone)"),
        ([decision(waivers={"c1": {"item": 5, "why": "w"}})], "d1", {5: {"verdict": "acceptable"}}, True, "2026-01-01T00:00:00", ""),
        ([decision(waivers={"c1": {"item": 5, "why": "w"}})], "d1", {5: {"verdict": "unsure", "reviewer": "sam"}}, False, None, "waiver expired: item #5 (c1) is now unsure (sam)"),
        ([decision()], "d1", {9: {"verdict": "regression", "case_id": "c9", "reviewer": "rita"}}, False, None, "judged 1 of its output(s) a regression: #9 (c9, rita)"),
    ],
    ids=["one-pass", "streak", "streak-after-a-fail", "needs-review", "regression", "rules-changed", "rubric-gone", "waiver-stands", "waiver-expired", "regression-since"],
)
def test_clearance(history, digest, verdicts, cleared, since, reason):
    c = clearance([stamped(d, i + 1) for i, d in enumerate(history)], Digests(digest), verdicts)
    assert (c.cleared, c.since) == (cleared, since)
    assert reason in c.reason


@pytest.mark.parametrize(
    ("moves", "stack"),
    [
        ([("promote", "a"), ("promote", "b")], ["a", "b"]),
        ([("promote", "a"), ("promote", "b"), ("rollback", "a")], ["a"]),
        ([("promote", "a"), ("promote", "b"), ("promote", "a")], ["b", "a"]),
        ([("promote", "a"), ("promote", "b"), ("rollback", "a"), ("promote", "c")], ["a", "c"]),
        ([("promote", "a"), ("promote", "b"), ("promote", "c"), ("rollback", "a")], ["a"]),
        ([("rollback", "x")], ["x"]),
    ],
)
def test_deployment_stack(moves, stack):
    deps = [deployment(fp, fp, action) for action, fp in moves]
    assert [d.fingerprint for d in deployment_stack(deps)] == stack


def test_the_rollback_target_is_the_nearest_earlier_cleared_entry():
    from evalsuite.releases.clearance import Clearance

    deps = [deployment(fp, fp) for fp in ("a", "b", "c")]
    cleared = {"a": True, "b": False, "c": True}
    sd = stage_deployments("production", deps, lambda fp: Clearance(fingerprint=fp, variant=fp, stage="production", cleared=cleared[fp], since=None, decision=None, reasons=() if cleared[fp] else ("its latest production decision was regression",)))
    assert (sd.current.fingerprint, sd.target.fingerprint) == ("c", "a")
    cleared["a"] = False
    sd = stage_deployments("production", deps, lambda fp: Clearance(fingerprint=fp, variant=fp, stage="production", cleared=cleared[fp], since=None, decision=None, reasons=("not cleared",)))
    assert sd.target is None and sd.why_no_target.startswith("no variant production ran before c (c) is still cleared: b (b): not cleared; a (a): not cleared")


def test_after_a_rollback_the_variant_rolled_back_from_is_a_target_while_cleared():
    """Issue 38, point 6: promote int4, promote int8, rollback to int4: `releases` said `rollback
    target: none`, though int8 was a deployment (and still cleared)."""
    from evalsuite.releases.clearance import Clearance

    deps = [deployment("int4", "int4"), deployment("int8", "int8"), deployment("int4", "int4", "rollback")]
    cleared = {"int4": True, "int8": True}

    def clear(fp):
        return Clearance(fingerprint=fp, variant=fp, stage="production", cleared=cleared[fp], since=None, decision=None, reasons=() if cleared[fp] else ("not cleared",))

    sd = stage_deployments("production", deps, clear)
    assert (sd.current.fingerprint, sd.target.fingerprint, sd.why_no_target) == ("int4", "int8", "")
    cleared["int8"] = False  # not cleared any more: no target, and why
    sd = stage_deployments("production", deps, clear)
    assert sd.target is None and "production has run only int4" in sd.why_no_target
