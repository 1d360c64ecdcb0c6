"""A run from start to scores: generate (evalsuite.run.runner), then score (evalsuite.scoring.run).

The runner stops at stored generations; scoring sits a layer above it. `run_suite` is the one call
that does both, for the CLI, the demo, the pytest plugin, the adaptive driver and the tests.
"""

from __future__ import annotations

from ..cases.suite import Suite
from ..executors import make_executor
from ..run.runner import RunOptions, RunResult, generate_suite
from ..run.store import DEFAULT_CACHE, GenerationCache
from .run import score_generations, score_run

__all__ = ["RunOptions", "RunResult", "run_suite", "score_stored_run"]


def run_suite(suite: Suite, options: RunOptions | None = None) -> RunResult:
    """Generate (or resume) a suite's run, then score it unless `options.score` is False."""
    opts = options or RunOptions()
    result = generate_suite(suite, opts)
    if opts.score:
        score_stored_run(suite, result, opts.cache_path)
    return result


def score_stored_run(suite: Suite, result: RunResult, cache_path: str | None = None) -> None:
    """Score a generated run with the cases in hand (not reloaded from the run's copy); stored scores
    of unchanged outputs are reused from the cache, and the suite's executor may send sandbox jobs away."""
    executor = make_executor(suite.executor)
    cache = GenerationCache(cache_path or suite.cache or DEFAULT_CACHE)
    try:
        with executor.scoring(result.cases, result.store, score_generations=score_generations):  # the ray executor sends sandbox jobs to the cluster
            score_run(result.store, result.cases, cache=cache)
    finally:
        cache.close()
