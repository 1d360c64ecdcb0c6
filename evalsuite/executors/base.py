"""The executor seam: where a variant's batches are generated (this process, or a Ray cluster).

The runner keeps everything that makes a run trustworthy (cache lookups, appends, resume, error
records); an executor only decides *where* `generate_batch(backend, batch, variant)` runs and
hands each finished batch back as it completes. Executors are registered lazily, like backends,
so importing evalsuite never imports ray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..backends.base import Backend, Generation, Request
from ..cases.options import RAY_OPTIONS, ExecutorSpec, parse_executor
from ..registry import EXECUTORS

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.suite import Variant

__all__ = ["EXECUTORS", "RAY_OPTIONS", "BuildBackend", "Executor", "ExecutorSpec", "GenerateBatch", "ScoreGenerations", "make_executor", "parse_executor"]


#: `generate_batch(backend, batch, variant) -> generations`: the runner's batch call (retry one by
#: one on a batch failure, error records); executors run it, they do not reimplement it
GenerateBatch = Callable[[Backend, list[Request], "Variant"], list[Generation]]
#: `score_generations(cases, generations, baseline)`: the scoring layer's function, handed down so an
#: executor can collect the sandbox jobs a scoring pass asks for (executors sit beneath scoring)
ScoreGenerations = Callable[..., list]
#: builds the variant's backend (wrapped as the runner wraps it); cheap: models load on first use
BuildBackend = Callable[[], Backend]


class StoredRun(Protocol):
    """What scoring reads of a run. `RunStore` is one; executors sit below the run layer, so they name this."""

    @property
    def signature(self) -> dict: ...

    def generations(self) -> list[Generation]: ...


@runtime_checkable
class Executor(Protocol):
    """Runs a variant's batches somewhere and yields each (batch, generations) as it finishes."""

    name: str

    def generate(
        self, variant: Variant, backend: Backend, build: BuildBackend, batches: Sequence[list[Request]], generate_batch: GenerateBatch
    ) -> Iterator[tuple[list[Request], list[Generation]]]:
        """Yield (batch, generations) pairs, any order, each batch exactly once."""
        ...

    def scoring(self, cases: Sequence[Case], store: StoredRun, score_generations: ScoreGenerations | None = None) -> ContextManager:
        """A context in which the run is scored (the Ray executor sends sandbox jobs to the cluster)."""
        ...


def make_executor(spec: ExecutorSpec | None) -> Executor:
    """The executor a suite asks for (local when it names none)."""
    spec = spec or ExecutorSpec()
    return EXECUTORS.get(spec.kind)(spec)
