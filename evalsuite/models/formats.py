"""Every quantization method in one table: its spellings, the libraries whose versions can change
its outputs, the packages it needs, its weights identity and the checkpoint it loads.

Methods: bnb (bitsandbytes int8/nf4/fp4 at load), gptq (gptqmodel: built or published), awq
(gptqmodel: built or published), compressed-tensors (published llm-compressor checkpoints),
llm-compressor (built from the baseline with `oneshot`), torchao and hqq (applied at load).
Nothing heavy is imported here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import EvalsuiteError, suggest

METHODS = ("bnb", "gptq", "awq", "compressed-tensors", "llm-compressor", "torchao", "hqq")
ALIASES = {
    "bitsandbytes": "bnb",
    "compressed_tensors": "compressed-tensors",
    "compressedtensors": "compressed-tensors",
    "llmcompressor": "llm-compressor",
    "llm_compressor": "llm-compressor",
}
#: libraries whose versions are part of a variant's identity, per method
LIBRARIES = {
    "bnb": ("bitsandbytes",),
    "gptq": ("gptqmodel",),
    "awq": ("gptqmodel",),
    "compressed-tensors": ("compressed-tensors",),
    "llm-compressor": ("llmcompressor", "compressed-tensors"),
    "torchao": ("torchao",),
    "hqq": ("hqq",),
}
#: (module, extra, pip name) each method needs in the transformers backend
REQUIRES = {
    "bnb": (("bitsandbytes", "bnb", "bitsandbytes"),),
    "gptq": (("gptqmodel", "gptq", "gptqmodel"),),
    "awq": (("gptqmodel", "gptq", "gptqmodel"),),
    "compressed-tensors": (("compressed_tensors", "compressed", "compressed-tensors"),),
    "llm-compressor": (("compressed_tensors", "compressed", "compressed-tensors"), ("llmcompressor", "llmcompressor", "llmcompressor")),
    "torchao": (("torchao", "torchao", "torchao"),),
    "hqq": (("hqq", "hqq", "hqq"),),
}
#: methods that load a checkpoint directory other than the baseline's
CHECKPOINT_METHODS = ("awq", "compressed-tensors", "llm-compressor")


def quantization_method(q: dict | None) -> str | None:
    """The method of a variant's `quantization` mapping (aliases folded), or None without one."""
    if not q:
        return None
    raw = str(q.get("method", "")).strip().lower()
    method = ALIASES.get(raw, raw)
    if method not in METHODS:
        hint = suggest(raw, list(METHODS) + list(ALIASES), n=2, cutoff=0.5, quote=False)
        raise EvalsuiteError(f"quantization.method: unknown quantization method {q.get('method')!r}{hint}; available: {', '.join(METHODS)}")
    return method


def missing_requirement(q: dict | None) -> str | None:
    """Why a quantization cannot run in this installation (a missing optional package), or None."""
    method = quantization_method(q)
    if method is None:
        return None
    for module, extra, package in REQUIRES[method]:
        if importlib.util.find_spec(module) is None:
            if module == "llmcompressor":
                from .compressed import LLMCOMPRESSOR_PIN

                return f"needs llmcompressor: pip install 'evalsuite[llmcompressor]' && pip install --no-deps {LLMCOMPRESSOR_PIN}"
            if method == "gptq" and (q or {}).get("checkpoint"):
                continue  # another backend (vllm) may load a published GPTQ checkpoint without gptqmodel
            return f"needs {package}: pip install 'evalsuite[{extra}]'"
    return None


def identity(method: str, baseline_dir: Path, q: dict, cache_dir=None, device: str = "cpu", dtype: str | None = None) -> dict:
    """What the quantized weights are, for the fingerprint (cheap: nothing is quantized or loaded).

    awq/llm-compressor: the cache key of the built checkpoint (baseline weights, settings, calibration,
    library versions) or the published checkpoint's file hashes and hub commit; compressed-tensors:
    the checkpoint's; torchao/hqq: the validated settings (the library versions are added by the backend).
    """
    from .files import model_dir_identity
    from .resolve import resolve_model

    if method == "awq":
        from .awq import awq_plan

        return awq_plan(baseline_dir, q, cache_dir)[1]
    if method == "llm-compressor":
        from .compressed import llmcompressor_plan

        return llmcompressor_plan(baseline_dir, q, cache_dir)[1]
    if method == "compressed-tensors":
        from .compressed import checkpoint_settings

        s = checkpoint_settings(q)
        resolved = resolve_model(s["checkpoint"], s["revision"], cache_dir, field="quantization.checkpoint")
        return {"checkpoint": model_dir_identity(resolved.path, cache_dir), "source": resolved.identity()}
    if method == "torchao":
        from .ondemand import torchao_settings

        return torchao_settings(q, device, dtype)
    if method == "hqq":
        from .ondemand import hqq_settings

        return hqq_settings(q)
    return {}


def checkpoint_dir(method: str, baseline_dir: Path, q: dict, cache_dir=None) -> Path:
    """The directory a checkpoint method loads (building it first for awq and llm-compressor)."""
    from .resolve import resolve_model

    if method == "awq":
        from .awq import awq_checkpoint

        return awq_checkpoint(baseline_dir, q, cache_dir)
    if method == "llm-compressor":
        from .compressed import llmcompressor_checkpoint

        return llmcompressor_checkpoint(baseline_dir, q, cache_dir)
    if method == "compressed-tensors":
        from .compressed import checkpoint_settings, require_compressed_checkpoint

        s = checkpoint_settings(q)
        path = resolve_model(s["checkpoint"], s["revision"], cache_dir, field="quantization.checkpoint").path
        require_compressed_checkpoint(path, s["checkpoint"])
        return path
    raise EvalsuiteError(f"quantization method {method!r} loads no checkpoint of its own")


def weight_only(model_dir: Path) -> bool:
    """Whether a compressed-tensors checkpoint quantizes weights only (no activation quantization):
    then dequantizing its weights at load gives the same outputs as running it compressed."""
    from .compressed import checkpoint_scheme

    groups = (checkpoint_scheme(model_dir).get("config_groups") or {}).values()
    return bool(groups) and all(isinstance(g, dict) and not g.get("input_activations") and not g.get("output_activations") for g in groups)
