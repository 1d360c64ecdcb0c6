"""The transformers backend of a variant with an environment of its own (`environment:` in a suite):
evalsuite's transformers generation code, run by a worker in that environment
(evalsuite.backends.transformers_worker) over JSON lines (evalsuite.backends.worker_process).

`transformers_backend(variant)` is what the registry's `transformers` entry builds: the in-process
`TransformersBackend` for a variant without `environment:`, this worker backend for one with it.

The model is resolved here (the embedded model converted, a hub id looked up) and handed to the
worker as a directory: both sides load the same files. The fingerprint holds the weights identity
the worker computes, so the library versions in it are the environment's as installed (a requested
`transformers==5.25.0` that resolved to 5.25.1 shows), and the environment as the suite wrote it
(`Variant.spec()`). An environment that cannot be built or started is the variant's `load_error`:
its cases are recorded as errors, the run goes on with the other variants, and the comparison says
it cannot judge that variant.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import models
from ..errors import EvalsuiteError
from . import envs
from .base import Backend, Generation, Request, check_options
from .transformers_worker import request_to_wire, variant_to_wire
from .worker_process import WorkerProcess

if TYPE_CHECKING:
    from ..cases.suite import Variant

log = logging.getLogger("evalsuite")

#: how the worker starts: its own evalsuite (on PYTHONPATH) first, the caller's folder not on its path
_WORKER_CODE = "import sys; del sys.path[0]; from evalsuite.backends.transformers_worker import main; sys.exit(main())"
#: restarts of a worker that died during a batch before the variant is given up
_MAX_RESTARTS = 2


def transformers_backend(variant: Variant) -> Backend:
    """The transformers backend a variant runs on: in this process, or in its own environment."""
    if variant.environment:
        return TransformersWorkerBackend(variant)
    from .transformers import TransformersBackend

    return TransformersBackend(variant)


def environment_label(environment: dict) -> str:
    """A variant's environment in a few words (the report's engine column)."""
    if environment.get("python"):
        return f"python {environment['python']}"
    return " ".join(str(r) for r in environment.get("requirements") or [])


class TransformersWorkerBackend(Backend):
    """The transformers backend in a worker process in the variant's own environment."""

    name = "transformers"

    def __init__(self, variant: Variant):
        from .transformers import OPTIONS

        self.variant = variant
        self.options = check_options(variant, "transformers", OPTIONS)
        self.environment_spec: dict = dict(variant.environment or {})  # a variant with an environment comes here
        self.cache_dir = self.options.get("cache_dir")
        self.worker: WorkerProcess | None = None
        self._path: contextlib.ExitStack | None = None
        self._described: dict | None = None
        self._spec: envs.EnvSpec | None = None
        self._python: str | None = None
        self._loaded = False
        self._restarts = 0
        self._memory: dict = {}
        self.load_s: float | None = None

    # -- the worker ----------------------------------------------------------------------------
    def _libraries(self) -> tuple[str, ...]:
        return self._spec.libraries() if self._spec is not None else envs.CORE_LIBRARIES

    def _interpreter(self) -> str:
        if self._python is None:
            self._python, self._spec = envs.interpreter(self.environment_spec, announce=lambda msg: log.info("variant %s: %s", self.variant.name, msg))
        return self._python

    def _worker_env(self, folder: str) -> dict:
        env = dict(os.environ, PYTHONPATH=folder, PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
        env.pop("PYTHONHOME", None)
        return env

    def _model_dir(self) -> str:
        resolved = models.resolve_model(self.variant.model, self.variant.revision, self.cache_dir)
        return str(Path(resolved.path).resolve())

    def _start(self) -> WorkerProcess:
        """The worker, started and told the variant (its answer kept: identity, engine, environment)."""
        if self.load_error is not None:
            raise EvalsuiteError(self.load_error)
        if self.worker is not None and self.worker.running:
            return self.worker
        self._stop()
        try:
            python = self._interpreter()
            variant = variant_to_wire(self.variant, self._model_dir())
            stack = contextlib.ExitStack()
            folder = stack.enter_context(envs.evalsuite_on_path())
            self._path = stack
            self.worker = WorkerProcess([python, "-c", _WORKER_CODE], env=self._worker_env(folder), log_prefix="evalsuite-transformers-worker-")
            try:
                answer = self.worker.ask({"kind": "start", "variant": variant, "libraries": list(self._libraries())})
            except EvalsuiteError as exc:
                raise EvalsuiteError(f"the worker ({python}) did not start: {exc}") from None
            if not answer.get("ok"):
                raise EvalsuiteError(f"the worker ({python}) refused the variant: {answer.get('error')}")
        except EvalsuiteError as exc:
            self._stop()
            self.load_error = f"variant {self.variant.name!r}: {exc}"
            raise EvalsuiteError(self.load_error) from None
        self._described = answer
        self._loaded = False
        return self.worker

    def _ask(self, msg: dict, what: str) -> dict:
        worker = self._start()
        try:
            answer = worker.ask(msg)
        except EvalsuiteError as exc:  # the worker died: started again for the next batch, a few times
            self._stop()
            self._restarts += 1
            if self._restarts > _MAX_RESTARTS:
                self.load_error = f"variant {self.variant.name!r}: the worker died {self._restarts} times; last: {exc}"
            raise EvalsuiteError(f"variant {self.variant.name!r}: the worker died during {what}: {exc}") from None
        if not answer.get("ok"):
            raise EvalsuiteError(f"variant {self.variant.name!r}: {what} failed in the worker: {answer.get('error')}")
        return answer

    def _stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            with contextlib.suppress(EvalsuiteError):
                self._memory = worker.ask({"kind": "memory"}) if worker.running and self._loaded else self._memory
            worker.close()
        stack, self._path = self._path, None
        if stack is not None:
            stack.close()
        self._loaded = False

    def _describe(self) -> dict:
        if self._described is None:
            self._start()
        assert self._described is not None
        return self._described

    # -- identity ------------------------------------------------------------------------------
    def weights_identity(self) -> dict | None:
        """The weights identity the worker computes (its libraries are the environment's), with
        the environment's Python and the hub commit as this process resolved it; None when the
        environment did not come up."""
        try:
            described = self._describe()
        except EvalsuiteError:
            return None
        ident = dict(described["identity"])
        env = described.get("environment") or {}
        ident["environment"] = {"python": env.get("python"), "libraries": env.get("libraries")}
        resolved = models.resolve_model(self.variant.model, self.variant.revision, self.cache_dir)
        if resolved.source == "hub":
            ident["source"] = resolved.identity()
        return ident

    def fingerprint(self) -> str:
        ident = self.weights_identity()
        if ident is None:  # never a cache hit: errors are not cached, and no output was made this way
            ident = {"unavailable": self.environment_spec}
        return self.variant.fingerprint(ident)

    def engine_identity(self) -> dict | None:
        """transformers' version as the environment has it, the device and dtype the worker resolved, the environment."""
        try:
            engine = dict(self._describe()["engine"])
        except EvalsuiteError:
            return None
        engine["environment"] = environment_label(self.environment_spec)
        return engine

    def environment(self) -> dict:
        """The worker environment's versions (read by its interpreter from package metadata, no model
        loaded); an environment not built yet is not built for this: it says so instead."""
        if self._described is not None:
            return dict(self._described["environment"])
        python = envs.built_interpreter(self.environment_spec)
        if python is None:
            return {"libraries": {}, "python": None, "built": False, "requirements": list(self.environment_spec.get("requirements") or [])}
        spec = None if self.environment_spec.get("python") else envs.EnvSpec.of(self.environment_spec.get("requirements") or [])
        libraries = spec.libraries() if spec is not None else envs.CORE_LIBRARIES
        with envs.evalsuite_on_path() as folder:
            worker = WorkerProcess([python, "-c", _WORKER_CODE], env=self._worker_env(folder), log_prefix="evalsuite-transformers-worker-")
            try:
                answer = worker.ask({"kind": "environment", "libraries": list(libraries)})
            finally:
                worker.close()
        if not answer.get("ok"):
            raise EvalsuiteError(f"variant {self.variant.name!r}: its environment could not report itself: {answer.get('error')}")
        return dict(answer["environment"])

    # -- generation ----------------------------------------------------------------------------
    def load(self) -> None:
        """Start the worker and load the model in it (idempotent); a failure is the variant's load_error."""
        self._start()
        if not self._loaded:
            try:
                answer = self._ask({"kind": "load"}, "loading the model")
            except EvalsuiteError as exc:
                self.load_error = str(exc)
                self._stop()
                raise
            self._loaded = True
            self.load_s = answer.get("load_s")

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        self.load()
        answer = self._ask({"kind": "generate", "requests": [request_to_wire(r) for r in requests]}, f"a batch of {len(requests)}")
        gens = [Generation.from_dict(g) for g in answer["generations"]]
        if len(gens) != len(requests):
            raise EvalsuiteError(f"variant {self.variant.name!r}: the worker answered {len(gens)} generations for {len(requests)} requests")
        return gens

    def _memory_now(self) -> dict:
        if self.worker is not None and self.worker.running and self._loaded:
            with contextlib.suppress(EvalsuiteError):
                self._memory = self._ask({"kind": "memory"}, "reading memory")
        return self._memory

    def peak_memory_mb(self) -> float | None:
        """The worker's serving memory (weights plus generation's peak), as its backend measures it."""
        return self._memory_now().get("peak_mb")

    def model_memory_mb(self) -> float | None:
        return self._memory_now().get("model_mb")

    def close(self) -> None:
        self._stop()
