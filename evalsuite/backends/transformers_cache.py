"""A transformers variant's KV cache (its `kv_cache:` mapping): which cache `generate` builds.

- `{implementation: dynamic}`: transformers' default cache, what a variant without `kv_cache` uses
- `{implementation: quantized, backend: hqq, nbits: 4}`: transformers' `QuantizedCache` (KIVI-style:
  keys and values quantized per group, the last `residual_length` tokens kept in full precision).
  `backend`: hqq (1, 2, 3, 4 or 8 bits), quanto (2 or 4 bits; needs optimum-quanto) or fp8 (per
  tensor, no group settings); `q_group_size`, `residual_length`, `axis_key`, `axis_value` as in
  transformers. What the library accepts is the library's to say: the backend builds the cache once
  when the model loads and refuses the variant with the library's own reason.
- `{implementation: offloaded}`: layers kept on the CPU and prefetched to the GPU one at a time
  (transformers runs it on CUDA only; on a CPU the variant is refused with the library's reason).

The mapping is part of the variant's spec, so every setting is in its fingerprint, and the library
that quantizes the cache is in the weights identity's library versions. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import EvalsuiteError, suggest

IMPLEMENTATIONS = ("dynamic", "quantized", "offloaded")
QUANT_BACKENDS = ("hqq", "quanto", "fp8")
#: the cache backend -> the distribution whose version can change its outputs
LIBRARIES = {"hqq": "hqq", "quanto": "optimum-quanto", "fp8": None}
_GROUP_KEYS = ("nbits", "q_group_size", "residual_length", "axis_key", "axis_value")
_KEYS = {"implementation", "backend", *_GROUP_KEYS}


@dataclass(frozen=True)
class KVCacheSettings:
    """The cache `generate` builds for a variant: transformers' `cache_implementation` and `cache_config`."""

    implementation: str = "dynamic"
    config: dict = field(default_factory=dict)  #: QuantizedCache's arguments (backend, nbits, ...)

    @property
    def default(self) -> bool:
        """The plain dynamic cache (the baseline's)."""
        return self.implementation == "dynamic"

    def generate_kwargs(self) -> dict:
        """Keyword arguments of `model.generate` selecting this cache (none for the default)."""
        if self.default:
            return {}
        out: dict[str, Any] = {"cache_implementation": self.implementation}
        if self.config:
            out["cache_config"] = dict(self.config)
        return out

    def libraries(self) -> list[str]:
        """Distributions (beyond torch and transformers) that compute this cache."""
        lib = LIBRARIES.get(str(self.config.get("backend"))) if self.implementation == "quantized" else None
        return [lib] if lib else []

    def describe(self) -> str:
        """A short name for messages and reports: `quantized hqq 4-bit`, `offloaded`."""
        if self.implementation != "quantized":
            return self.implementation
        bits = self.config.get("nbits")
        return f"quantized {self.config.get('backend')}" + (f" {bits}-bit" if bits else "")


def parse_kv_cache(raw: dict | None, who: str) -> KVCacheSettings:
    """A variant's `kv_cache:` mapping as settings; errors name the variant and the field."""
    if not raw:
        return KVCacheSettings()
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"variant {who!r}: kv_cache: expected a mapping, got {raw!r}")
    unknown = sorted(map(str, set(raw) - _KEYS))
    if unknown:
        k = unknown[0]
        raise EvalsuiteError(f"variant {who!r}: kv_cache.{k}: unknown setting{suggest(k, sorted(_KEYS))}; known: {', '.join(sorted(_KEYS))}")
    impl = str(raw.get("implementation", "quantized" if "backend" in raw else "dynamic")).lower()
    if impl not in IMPLEMENTATIONS:
        raise EvalsuiteError(
            f"variant {who!r}: kv_cache.implementation: unknown cache {impl!r}{suggest(impl, IMPLEMENTATIONS)}; available: {', '.join(IMPLEMENTATIONS)}"
        )
    config = {k: raw[k] for k in ("backend", *_GROUP_KEYS) if k in raw}
    if impl != "quantized":
        if config:
            raise EvalsuiteError(f"variant {who!r}: kv_cache.{next(iter(config))}: only a quantized cache takes {', '.join(config)}")
        return KVCacheSettings(impl)
    backend = str(config.get("backend", "")).lower()
    if backend not in QUANT_BACKENDS:
        raise EvalsuiteError(
            f"variant {who!r}: kv_cache.backend: a quantized cache needs a backend, one of {', '.join(QUANT_BACKENDS)} (got {config.get('backend')!r})"
        )
    for k in _GROUP_KEYS:
        if k in config and (not isinstance(config[k], int) or isinstance(config[k], bool)):
            raise EvalsuiteError(f"variant {who!r}: kv_cache.{k}: expected an integer, got {config[k]!r}")
    config["backend"] = backend
    return KVCacheSettings(impl, config)


def refusal(settings: KVCacheSettings, who: str, exc: BaseException) -> EvalsuiteError:
    """The error refusing a variant whose cache the library cannot build here, with the library's
    reason and the field it is about (the setting its message names, else the implementation)."""
    text = str(exc)
    if isinstance(exc, ImportError) and settings.implementation == "quantized":
        key = "backend"
    else:
        key = next((k for k in _GROUP_KEYS if k in text), "backend" if "backend" in text else "implementation")
    value = settings.implementation if key == "implementation" else settings.config.get(key)
    return EvalsuiteError(f"variant {who!r}: kv_cache.{key} = {value!r} ({settings.describe()} cache) cannot run here: {type(exc).__name__}: {text}")


def probe(model: Any, settings: KVCacheSettings, who: str, pad_token_id: int | None) -> None:
    """Build the variant's cache once with a two-token generation, so a cache the library cannot
    run here (a missing package, bits it does not take, offloading without CUDA) refuses the
    variant at load, with the library's reason, instead of failing every case alike."""
    if settings.default:
        return
    import torch

    ids = torch.ones((1, 4), dtype=torch.long, device=model.device)
    try:
        with torch.inference_mode():
            model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=2, do_sample=False, pad_token_id=pad_token_id, **settings.generate_kwargs()
            )
    except Exception as exc:  # noqa: BLE001 - the library's refusal, whatever its type, becomes the variant's
        raise refusal(settings, who, exc) from exc
