"""Where a suite's model lives: the embedded model, a local directory or a hub id at a revision."""

from __future__ import annotations

import os
from pathlib import Path

from .embedded import ensure_embedded_model
from .hub import ResolvedModel
from .hub import resolve_model as _hub_resolve_model


def resolve_model(model: str | None, revision: str | None = None, cache_dir: str | os.PathLike | None = None, field: str = "model") -> ResolvedModel:
    """Where a suite's model lives: "embedded" (or None), a local directory, or a hub id at `revision`
    (evalsuite.models.hub: through huggingface_hub's cache, offline-aware)."""
    return _hub_resolve_model(model, revision, field=field, ensure_embedded=lambda: ensure_embedded_model(cache_dir))


def resolve_model_dir(model: str | None, cache_dir: str | os.PathLike | None = None, revision: str | None = None, field: str = "model") -> Path:
    """The local directory of a variant's `model` ("embedded" or None means the embedded model)."""
    return resolve_model(model, revision, cache_dir, field).path
