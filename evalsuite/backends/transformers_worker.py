"""The transformers backend as a worker in a variant's own environment (evalsuite.backends.envs).

The worker runs evalsuite's own `TransformersBackend` (the code of the evalsuite that started it,
on its PYTHONPATH) with the environment's libraries, so two variants that differ only in their
environment differ only in the libraries. The backend in evalsuite's process is
`transformers_env.TransformersWorkerBackend`; they speak JSON lines (`worker_process`): every
message is an object with a `kind`, every answer `{"ok": true, ...}` or `{"ok": false, "error": "..."}`.

- `{"kind": "environment"}` -> `{"environment": {...}}`: `local_environment()` here (no model).
- `{"kind": "start", "variant": {...}}` -> `{"identity": {...}, "engine": {...}, "environment": {...}}`:
  the backend built (cheap: nothing loaded); its weights identity holds this environment's versions.
- `{"kind": "load"}` -> `{"load_s": s}`: the model loaded.
- `{"kind": "generate", "requests": [...]}` -> `{"generations": [...]}` (`Generation.to_dict()`, one per request).
- `{"kind": "memory"}` -> `{"peak_mb": x, "model_mb": y}`.

Answers go to the stdout the worker was started with; whatever the libraries print goes to stderr.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING

from ..cases.options import GenerationSettings
from .base import Generation, Request, local_environment
from .vllm_worker import exit_with_parent  # there: vLLM's worker runs by path with the standard library only

if TYPE_CHECKING:
    from ..cases.suite import Variant
    from .transformers import TransformersBackend

#: the variant fields the worker's backend reads (the model as a resolved directory)
_VARIANT_FIELDS = ("name", "model", "options", "quantization", "speculative", "kv_cache")


def variant_to_wire(variant: Variant, model_dir: str) -> dict:
    """What the worker needs of a variant: its settings, with `model` the directory this process resolved."""
    d = {k: getattr(variant, k) for k in _VARIANT_FIELDS}
    d["model"] = model_dir
    d["generation"] = variant.generation.to_dict()
    return d


def variant_from_wire(d: dict) -> Variant:
    """The variant as the worker's backend sees it: in this environment, with no environment of its own."""
    from ..cases.suite import Variant

    return Variant(backend="transformers", generation=GenerationSettings(**d["generation"]), **{k: d[k] for k in _VARIANT_FIELDS})


def request_to_wire(r: Request) -> dict:
    return dataclasses.asdict(r)


def request_from_wire(d: dict) -> Request:
    return Request(**dict(d, messages=tuple(tuple(m) for m in d["messages"])))


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(ln for ln in text.splitlines() if ln.strip())[:2000]


class _Worker:
    """The worker's state: the backend, once started."""

    def __init__(self) -> None:
        self.backend: TransformersBackend | None = None
        self.libraries: tuple[str, ...] = ("torch", "transformers")

    def answer(self, msg: dict) -> dict:
        kind = msg.get("kind")
        if kind == "environment":
            return {"environment": local_environment(msg.get("libraries") or self.libraries)}
        if kind == "start":
            from .transformers import TransformersBackend

            self.libraries = tuple(msg.get("libraries") or self.libraries)
            started = TransformersBackend(variant_from_wire(msg["variant"]))
            self.backend = started
            return {"identity": started.weights_identity(), "engine": started.engine_identity(), "environment": local_environment(self.libraries)}
        backend = self.backend
        if backend is None:
            raise RuntimeError(f"message {kind!r} before `start`")
        if kind == "load":
            backend.load()
            return {"load_s": backend.load_s}
        if kind == "generate":
            gens: list[Generation] = backend.generate([request_from_wire(r) for r in msg["requests"]])
            return {"generations": [g.to_dict() for g in gens]}
        if kind == "memory":
            return {"peak_mb": backend.peak_memory_mb(), "model_mb": backend.model_memory_mb()}
        raise ValueError(f"unknown message kind {kind!r}")


def main() -> int:
    """The worker loop (see the module docstring)."""
    exit_with_parent()  # a runner killed mid-batch leaves no worker generating
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # libraries that print write to fd 1: that is stderr now
    sys.stdout = sys.stderr
    worker = _Worker()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = {"ok": True, **worker.answer(json.loads(line))}
        except Exception as exc:  # noqa: BLE001 - reported to the backend, which names the variant
            reply = {"ok": False, "error": _error(exc)}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    if worker.backend is not None:
        worker.backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
