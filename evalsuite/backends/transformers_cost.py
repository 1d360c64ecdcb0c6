"""What one `generate` call of the transformers backend costs, against its context length.

Recorded per generation under `extra["cost"]` (evalsuite.perf.context fits them against prompt
tokens):

- `prefill_s`: the model's first forward pass (the whole prompt at once), timed by hooks on the
  model; time to first token (`ttft_s`) adds the cache's set-up and the first token's selection
- `peak_memory_mb`: the weights plus the batch's own peak working set (CUDA: the allocator's peak
  during the call; CPU: how far the peak RSS rose during the call, see transformers_memory)
- `kv_cache_bytes`, `kv_cache_tokens`: what the cache holds when generation ends, summed over the
  cache object's tensors (a quantized cache's packed integers, scales and zero points, and its
  full-precision residual window), and how many positions it covers
- `context_tokens`: the batch's padded prompt length times its size: the tokens the prefill processed

Imported on the first `load()` (imports torch).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..models.ondemand import storage_tensors
from .transformers_memory import ServingMemory


def cache_bytes(cache: Any) -> int | None:
    """Bytes held by a transformers cache object's layers (None when it has no layers to read)."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        return None
    seen: set[int] = set()

    def walk(x: Any, depth: int) -> int:
        if depth > 4:
            return 0
        if isinstance(x, torch.Tensor):
            total = 0
            for t in storage_tensors(x):
                if id(t) not in seen and t.numel():
                    seen.add(id(t))
                    total += int(t.numel()) * int(t.element_size())
            return total
        if isinstance(x, dict):
            return sum(walk(v, depth + 1) for v in x.values())
        if isinstance(x, (list, tuple)):
            return sum(walk(v, depth + 1) for v in x)
        return 0

    return sum(walk(v, 0) for layer in layers for v in vars(layer).values())


class BatchCost:
    """Measures one `generate` call: use as a context manager around it, then `record(...)`."""

    def __init__(self, model: Any, memory: ServingMemory, device: str) -> None:
        self.model = model
        self.memory = memory
        self.cuda = device.startswith("cuda")
        self._first_start: float | None = None
        self._first_end: float | None = None
        self._hooks: list[Any] = []

    def _pre(self, module, args, kwargs=None):
        if self._first_start is None:
            self._first_start = time.perf_counter()

    def _post(self, module, args, output):
        if self._first_end is None:
            if self.cuda:
                torch.cuda.synchronize()
            self._first_end = time.perf_counter()

    def __enter__(self) -> BatchCost:
        if self.cuda:
            self.memory.cuda_seen_mb = max(self.memory.cuda_seen_mb, torch.cuda.max_memory_allocated() / 2**20)
            torch.cuda.reset_peak_memory_stats()
        else:
            self.memory.batch_start()
        self._hooks = [self.model.register_forward_pre_hook(self._pre), self.model.register_forward_hook(self._post)]
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def record(self, cache: Any, context_tokens: int) -> dict:
        """The call's cost (module docstring); figures the backend cannot read are None."""
        peak = torch.cuda.max_memory_allocated() / 2**20 if self.cuda else self.memory.batch_peak_mb()
        kv = cache_bytes(cache) if cache is not None else None
        seq = cache.get_seq_length() if cache is not None and hasattr(cache, "get_seq_length") else None
        prefill = self._first_end - self._first_start if self._first_start is not None and self._first_end is not None else None
        return {
            "prefill_s": round(prefill, 6) if prefill is not None else None,
            "peak_memory_mb": round(peak, 2) if peak is not None else None,
            "kv_cache_bytes": kv,
            "kv_cache_tokens": int(seq) if seq is not None else None,
            "context_tokens": int(context_tokens),
        }
