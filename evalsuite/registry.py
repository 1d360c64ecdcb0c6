"""Lazy name registries: entries are "module:attr" strings so importing evalsuite never imports torch."""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

from .errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects or to "module:attr" strings resolved on first use."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, target: T | str) -> T | str:
        """Register `target`: an object, or a "module:attr" string imported on first use."""
        self._entries[name] = target
        return target

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise UnknownNameError(self.kind, name, self.names())
        target = self._entries[name]
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            loaded: T = getattr(importlib.import_module(module), attr)
            self._entries[name] = loaded
            return loaded
        return target


#: backends by name; "module:attr" strings, so importing evalsuite never imports torch or vllm
#: (their classes and factories are typed where they live: importing them here would import the engines)
BACKENDS: Registry[Any] = Registry("backend")
BACKENDS.register("fake", "evalsuite.backends.fake:FakeBackend")
BACKENDS.register("transformers", "evalsuite.backends.transformers_env:transformers_backend")  # in-process, or in the variant's own environment
BACKENDS.register("http", "evalsuite.backends.http:HTTPBackend")
BACKENDS.register("vllm", "evalsuite.backends.vllm:VLLMBackend")

#: where generation runs (evalsuite.executors); "module:attr" strings, so importing evalsuite never imports ray
EXECUTORS: Registry[Any] = Registry("executor")
EXECUTORS.register("local", "evalsuite.executors.local:LocalExecutor")
EXECUTORS.register("ray", "evalsuite.executors.ray:RayExecutor")
