"""Lazy name registries: entries are "module:attr" strings so importing evalsuite never imports torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import UnknownNameError


class Registry:
    """Maps names to objects or to "module:attr" strings resolved on first use."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def register(self, name: str, target: Any | None = None) -> Any:
        """Register `target` (an object or a "module:attr" string); usable as a decorator."""
        if target is None:

            def deco(obj: Callable) -> Callable:
                self._entries[name] = obj
                return obj

            return deco
        self._entries[name] = target
        return target

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str) -> Any:
        if name not in self._entries:
            raise UnknownNameError(self.kind, name, self.names())
        target = self._entries[name]
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            target = getattr(importlib.import_module(module), attr)
            self._entries[name] = target
        return target


#: backends by name; "module:attr" strings, so importing evalsuite never imports torch or vllm
BACKENDS = Registry("backend")
BACKENDS.register("fake", "evalsuite.backends.fake:FakeBackend")
BACKENDS.register("transformers", "evalsuite.backends.transformers_env:transformers_backend")  # in-process, or in the variant's own environment
BACKENDS.register("http", "evalsuite.backends.http:HTTPBackend")
BACKENDS.register("vllm", "evalsuite.backends.vllm:VLLMBackend")

#: where generation runs (evalsuite.executors); "module:attr" strings, so importing evalsuite never imports ray
EXECUTORS = Registry("executor")
EXECUTORS.register("local", "evalsuite.executors.local:LocalExecutor")
EXECUTORS.register("ray", "evalsuite.executors.ray:RayExecutor")
