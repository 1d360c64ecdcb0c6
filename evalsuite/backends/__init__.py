"""Backends, registered lazily by name so importing evalsuite never imports torch or vllm."""

from .base import BACKENDS, Backend, Generation, GenerationSettings, Request, make_backend

BACKENDS.register("fake", "evalsuite.backends.fake:FakeBackend")
BACKENDS.register("transformers", "evalsuite.backends.transformers:TransformersBackend")
BACKENDS.register("http", "evalsuite.backends.http:HTTPBackend")
BACKENDS.register("vllm", "evalsuite.backends.vllm:VLLMBackend")

__all__ = ["BACKENDS", "Backend", "Generation", "GenerationSettings", "Request", "make_backend"]
