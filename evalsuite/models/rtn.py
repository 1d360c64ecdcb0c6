"""A round-to-nearest (RTN) copy of a model directory: every linear weight rounded to `bits`-bit
symmetric groups and stored dequantized, as a plain transformers checkpoint.

Any loader reads it (lm-evaluation-harness's HF backend, Inspect's, evalsuite's own) on CPU in
seconds, so the import tests compare a model with a quantized copy of it without a GPTQ build. It
shows what RTN weight rounding does to the outputs; it does not save memory (docs/import.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .files import build_once, cache_root, model_dir_identity

MARKER = "evalsuite-rtn.json"


def rtn_copy(baseline_dir: str | os.PathLike, *, bits: int = 4, group_size: int = 32, cache_dir: str | os.PathLike | None = None) -> Path:
    """The RTN copy of `baseline_dir` (built once, cached beside the other derived checkpoints)."""
    base = Path(baseline_dir)
    key_obj = {"baseline": model_dir_identity(base, cache_dir), "bits": bits, "group_size": group_size}
    key = hashlib.sha256(json.dumps(key_obj, sort_keys=True).encode()).hexdigest()[:16]
    final = cache_root(cache_dir) / "models" / f"rtn-{base.name}-{bits}b-g{group_size}-{key}"
    meta = {"baseline": str(base), "bits": bits, "group_size": group_size}
    announce = f"rounding {base.name} to {bits}-bit groups of {group_size} (RTN): seconds, once"
    return build_once(final, MARKER, lambda tmp: _build(base, tmp, bits, group_size), meta, announce)


def _build(base: Path, out: Path, bits: int, group_size: int) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    for f in base.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and not f.name.startswith("evalsuite-"):
            shutil.copy2(f, out / f.name)
    for shard in sorted(base.glob("*.safetensors")):
        tensors = load_file(str(shard))
        rounded = {name: _round(t, bits, group_size) if _linear(name, t) else t for name, t in tensors.items()}
        save_file({k: v.contiguous() for k, v in rounded.items()}, str(out / shard.name), metadata={"format": "pt"})
    del torch


def _linear(name: str, t) -> bool:
    """The weights RTN rounds: 2-D projection matrices (embeddings and norms are kept)."""
    return t.ndim == 2 and name.endswith(".weight") and "embed" not in name and "lm_head" not in name


def _round(t, bits: int, group_size: int):
    """Symmetric per-group rounding to `bits` bits, dequantized back to the tensor's dtype."""
    import torch

    rows, cols = t.shape
    if cols % group_size:
        return t
    w = t.to(torch.float32).reshape(rows, cols // group_size, group_size)
    qmax = 2 ** (bits - 1) - 1
    scale = w.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / qmax
    q = torch.clamp(torch.round(w / scale), -qmax - 1, qmax)
    return (q * scale).reshape(rows, cols).to(t.dtype)
