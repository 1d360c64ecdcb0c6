"""Where code-scoring sandbox jobs run: the sandbox's own pool, or a remote runner (no Ray needed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite import sandbox
from evalsuite.backends.base import Generation
from evalsuite.cases.caseset import load_caseset
from evalsuite.executors import sandbox_jobs
from evalsuite.scoring.run import score_generations

REPO = Path(__file__).resolve().parents[2]
CASES = {c.id: c for c in load_caseset(REPO / "casesets/code/examples.yaml").cases}
COMPLETION = CASES["code-ex-completion-001"]
PAL = 'def is_palindrome(s: str) -> bool:\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n'
TEXTS = [f"```python\n{PAL}```", "```python\ndef is_palindrome(s):\n    return False\n```", f"```python\n{PAL}```", "no code here"]


def gens(variant="base"):
    return [Generation(COMPLETION.id, variant, i, text=t) for i, t in enumerate(TEXTS)]


class LocalRunner:
    """A stand-in for a cluster: runs each job through the sandbox here, and records each dispatch."""

    def __init__(self):
        self.dispatches: list[list] = []
        self.run = sandbox.run_tests  # the "node's" sandbox, kept before a test forbids this process's

    def __call__(self, jobs, limits):
        self.dispatches.append(list(jobs))
        return [self.run(p, t, e, **limits) for p, t, e in jobs]


def code_scores(records):
    return sorted((r.variant, r.sample if r.sample is not None else -1, r.metric, r.value) for r in records if r.metric.startswith("code.pass"))


def test_without_a_remote_runner_the_sandbox_functions_are_used(monkeypatch):
    asked = []
    monkeypatch.setattr(sandbox, "run_tests_many", lambda jobs, **lim: asked.append((jobs, lim)) or ["r"] * len(jobs))
    monkeypatch.setattr(sandbox, "run_tests_cached", lambda p, t, e=None, **lim: ("cached", p))
    assert sandbox_jobs.run_tests_many([("p", "t", None)], timeout_s=3) == ["r"]
    assert asked == [([("p", "t", None)], {"timeout_s": 3})]
    assert sandbox_jobs.run_tests_cached("p", "t") == ("cached", "p")


def test_prefetch_sends_every_job_at_once_and_scoring_then_sends_nothing(monkeypatch):
    sandbox.clear_cache()
    local = code_scores(score_generations([COMPLETION], gens(), "base"))
    runner = LocalRunner()
    with sandbox_jobs.remote(runner) as state:
        # once the jobs are remote, nothing may run in this process's sandbox
        for home in (sandbox, sandbox.pool):  # called directly, and by cached and pooled runs
            monkeypatch.setattr(home, "run_tests", lambda *a, **k: pytest.fail("ran locally"))
        sent = sandbox_jobs.prefetch([COMPLETION], gens(), "base", score_generations)
        assert sent == 2 and len(runner.dispatches) == 1  # two distinct programs, one dispatch
        remote = code_scores(score_generations([COMPLETION], gens(), "base"))
        assert len(runner.dispatches) == 1 and state.sent == 2  # scoring was served from the results
    assert remote == local
    assert ("base", -1, "code.pass@1", 0.5) in remote


def test_jobs_asked_one_by_one_go_remote_and_are_memoised():
    runner = LocalRunner()
    with sandbox_jobs.remote(runner):
        a = sandbox_jobs.run_tests_cached("x = 1\n", "assert x == 1\n", timeout_s=5)
        b = sandbox_jobs.run_tests_many([("x = 1\n", "assert x == 1\n", None), ("x = 2\n", "assert x == 1\n", None)], timeout_s=5)
    assert a.passed and [r.status for r in b] == ["passed", "failed"]
    assert runner.dispatches == [[("x = 1\n", "assert x == 1\n", None)], [("x = 2\n", "assert x == 1\n", None)]]


def test_a_runner_returning_the_wrong_count_is_an_error():
    with sandbox_jobs.remote(lambda jobs, limits: []):
        with pytest.raises(RuntimeError, match="returned 0 results for 1 jobs"):
            sandbox_jobs.run_tests_many([("x = 1\n", "assert x\n", None)])
