"""The local executor: batches run one after another in this process (evalsuite's behaviour before executors)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..backends.base import Backend, Generation, Request
from .base import BuildBackend, ExecutorSpec, GenerateBatch, ScoreGenerations, StoredRun

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.suite import Variant


class LocalExecutor:
    """In order, in process, on the backend the runner built: exactly the runner's old loop."""

    name = "local"

    def __init__(self, spec: ExecutorSpec | None = None):
        self.spec = spec or ExecutorSpec()

    def generate(
        self, variant: Variant, backend: Backend, build: BuildBackend, batches: Sequence[list[Request]], generate_batch: GenerateBatch
    ) -> Iterator[tuple[list[Request], list[Generation]]]:
        for batch in batches:
            yield batch, generate_batch(backend, batch, variant)

    def scoring(self, cases: Sequence[Case], store: StoredRun, score_generations: ScoreGenerations | None = None):
        return contextlib.nullcontext()
