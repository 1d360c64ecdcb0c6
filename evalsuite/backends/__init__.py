"""Backends, registered lazily by name so importing evalsuite never imports torch or vllm."""

from .base import BACKENDS, Backend, Generation, GenerationSettings, Request, make_backend

__all__ = ["BACKENDS", "Backend", "Generation", "GenerationSettings", "Request", "make_backend"]
