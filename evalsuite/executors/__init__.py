"""Executors: where generation (and code-scoring sandbox jobs) run. `local` by default, `ray` for clusters."""

from .base import EXECUTORS, Executor, ExecutorSpec, make_executor, parse_executor

__all__ = ["EXECUTORS", "Executor", "ExecutorSpec", "make_executor", "parse_executor"]
