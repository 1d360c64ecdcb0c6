"""The traffic extra's libraries, imported on first use with one clear error when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from ...errors import MissingExtraError


def need(module: str, package: str, feature: str) -> ModuleType:
    """`module` imported, or MissingExtraError naming `package` and the `traffic` extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"`evalsuite cases from-traffic` ({feature})", "traffic", package) from exc
