"""The executor seam: where a variant's batches are generated (this process, or a Ray cluster).

The runner keeps everything that makes a run trustworthy (cache lookups, appends, resume, error
records); an executor only decides *where* `generate_batch(backend, batch, variant)` runs and
hands each finished batch back as it completes. Executors are registered lazily, like backends,
so importing evalsuite never imports ray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..backends.base import Backend, Generation, Request
from ..errors import Problem
from ..registry import Registry

EXECUTORS = Registry("executor")
EXECUTORS.register("local", "evalsuite.executors.local:LocalExecutor")
EXECUTORS.register("ray", "evalsuite.executors.ray:RayExecutor")

#: `generate_batch(backend, batch, variant) -> generations`: the runner's batch call (retry one by
#: one on a batch failure, error records); executors run it, they do not reimplement it
GenerateBatch = Callable[[Backend, list, Any], list]
#: builds the variant's backend (wrapped as the runner wraps it); cheap: models load on first use
BuildBackend = Callable[[], Backend]


@dataclass(frozen=True)
class ExecutorSpec:
    """The suite file's `executor:` entry, validated."""

    kind: str = "local"  #: "local" or "ray"
    options: dict = field(default_factory=dict)  #: kind-specific settings (see RAY_OPTIONS)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **self.options}


@runtime_checkable
class Executor(Protocol):
    """Runs a variant's batches somewhere and yields each (batch, generations) as it finishes."""

    name: str

    def generate(
        self, variant: Any, backend: Backend, build: BuildBackend, batches: Sequence[list[Request]], generate_batch: GenerateBatch
    ) -> Iterator[tuple[list[Request], list[Generation]]]:
        """Yield (batch, generations) pairs, any order, each batch exactly once."""
        ...

    def scoring(self, cases: Sequence[Any], store: Any) -> ContextManager:
        """A context in which the run is scored (the Ray executor sends sandbox jobs to the cluster)."""
        ...


def make_executor(spec: ExecutorSpec | None) -> Executor:
    """The executor a suite asks for (local when it names none)."""
    spec = spec or ExecutorSpec()
    return EXECUTORS.get(spec.kind)(spec)


# -- suite-file validation ---------------------------------------------------------------------------


def _nonneg_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _int_at_least(n: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= n


#: option -> (check, what it must be)
RAY_OPTIONS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "address": (lambda v: isinstance(v, str) and bool(v), "a Ray address (ray://host:10001, host:6379 or auto)"),
    "num_actors": (_int_at_least(1), "an integer of at least 1 (model replicas per variant)"),
    "num_cpus": (_nonneg_number, "a number of CPUs per actor (>= 0)"),
    "num_gpus": (_nonneg_number, "a number of GPUs per actor (>= 0)"),
    "max_restarts": (_int_at_least(-1), "an integer (-1: restart a dead actor without limit)"),
    "max_task_retries": (_int_at_least(-1), "an integer (-1: retry without limit)"),
    "sandbox": (lambda v: isinstance(v, bool), "true or false (run code-scoring sandbox jobs as Ray tasks)"),
    "sandbox_num_cpus": (_nonneg_number, "a number of CPUs per sandbox task (>= 0)"),
    "llm_processor": (lambda v: v in ("auto", True, False), "auto, true or false (vllm variants through ray.data.llm)"),
    "runtime_env": (lambda v: isinstance(v, dict), "a mapping (Ray runtime_env: pip, working_dir, env_vars...)"),
    "object_store_mb": (_int_at_least(50), "an integer of at least 50 (object store of a Ray started here)"),
}


def parse_executor(raw: Any, file: str, line_of: Callable[[tuple], int | None], problems: list[Problem]) -> ExecutorSpec:
    """Validate the suite's `executor:` entry; append a Problem naming file, line and field for each fault.

    Accepted: `executor: local`, `executor: ray`, or a mapping `{kind: ray, address: ..., num_actors: 2}`.
    """
    if raw is None:
        return ExecutorSpec()
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, dict):
        problems.append(Problem(file, line_of(("executor",)), None, "executor", "expected `local`, `ray` or a mapping with `kind`"))
        return ExecutorSpec()
    kind = raw.get("kind", "local")
    if kind not in EXECUTORS:
        import difflib

        close = difflib.get_close_matches(str(kind), EXECUTORS.names(), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        where = ("executor", "kind") if "kind" in raw else ("executor",)
        problems.append(Problem(file, line_of(where), None, "executor.kind", f"unknown executor {kind!r}{hint}; available: {', '.join(EXECUTORS.names())}"))
        return ExecutorSpec()
    options = {k: v for k, v in raw.items() if k != "kind"}
    known = RAY_OPTIONS if kind == "ray" else {}
    ok: dict = {}
    for k, v in options.items():
        if k not in known:
            listing = ", ".join(sorted(known)) or "none"
            problems.append(Problem(file, line_of(("executor", k)), None, f"executor.{k}", f"unknown {kind} executor option (known: {listing})"))
            continue
        check, what = known[k]
        if not check(v):
            problems.append(Problem(file, line_of(("executor", k)), None, f"executor.{k}", f"expected {what}, got {v!r}"))
            continue
        ok[k] = v
    return ExecutorSpec(kind, ok)
