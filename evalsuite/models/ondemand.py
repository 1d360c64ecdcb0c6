"""Quantization applied while the baseline loads, nothing written to disk: torchao and HQQ.

- `{method: torchao, scheme: int8_weight_only}` (int8 weights, per channel), `scheme: int8_dynamic`
  (int8 weights and int8 per-token activations) run on CPU; `scheme: int4_weight_only, group_size:
  64` needs CUDA (bfloat16): torchao has no int4 CPU kernel here, and evalsuite refuses it on CPU
  with the reason of each packing format (`TORCHAO_INT4_CPU`).
- `{method: hqq, bits: 4, group_size: 64, axis: 1}`: Half-Quadratic Quantization of every linear
  layer but the head, through the `hqq` library (transformers 5 no longer applies an HqqConfig at
  load: "QuantizationMethod.HQQ is not available yet"); its PyTorch backend dequantizes on the fly.

The library's version and the validated settings are part of the variant's weights identity.
"""

from __future__ import annotations

import contextlib
import io

from ..errors import EvalsuiteError, MissingExtraError, suggest

TORCHAO_SCHEMES = ("int8_weight_only", "int8_dynamic", "int4_weight_only")
_TORCHAO_KEYS = {"method", "scheme", "group_size"}
_HQQ_KEYS = {"method", "bits", "group_size", "axis"}
HQQ_BITS = (1, 2, 3, 4, 8)

#: why torchao int4 weight-only cannot run on this CPU build, per packing format (torchao 0.18, torch 2.13 CPU)
TORCHAO_INT4_CPU = (
    "torchao has no int4 weight-only CPU kernel in this build: packing format tile_packed_to_4d (tinygemm) needs CUDA "
    "('Torch not compiled with CUDA enabled'), plain needs the mslk CUDA kernels ('Requires mslk >= 1.0.0'), "
    "plain_int32 is for XPU ('Int4PlainInt32Tensor does not support device 'cpu' yet'), and the opaque CPU kernels "
    "of Int8DynamicActivationIntxWeightConfig are not in the PyPI wheel ('TorchAO kernel library is not loaded'); "
    "on CPU use scheme int8_weight_only or int8_dynamic, or method hqq for 4 bits"
)


def _close(value, options) -> str:
    return suggest(value, options, n=2, cutoff=0.4, quote=False)


# -- torchao --------------------------------------------------------------------------------------
def torchao_settings(q: dict, device: str = "cpu", dtype: str | None = None) -> dict:
    """`{method: torchao, scheme: ..., group_size: ...}`, validated for the device it will run on."""
    unknown = set(q) - _TORCHAO_KEYS
    if unknown:
        raise EvalsuiteError(f"unknown torchao setting(s) {sorted(unknown)}; known: scheme, group_size")
    scheme = str(q.get("scheme", "int8_weight_only")).lower()
    if scheme not in TORCHAO_SCHEMES:
        raise EvalsuiteError(
            f"quantization.scheme: unknown torchao scheme {scheme!r}{_close(scheme, TORCHAO_SCHEMES)}; available: {', '.join(TORCHAO_SCHEMES)}"
        )
    out: dict = {"scheme": scheme}
    if scheme == "int4_weight_only":
        if not str(device).startswith("cuda"):
            raise EvalsuiteError(f"quantization: torchao int4_weight_only cannot run on {device}: {TORCHAO_INT4_CPU}")
        if dtype not in (None, "bfloat16"):
            raise EvalsuiteError(f"quantization: torchao int4_weight_only packs for tinygemm, which needs dtype bfloat16 (options.dtype is {dtype})")
        out["group_size"] = int(q.get("group_size", 128))
        if out["group_size"] not in (32, 64, 128, 256):
            raise EvalsuiteError(f"quantization.group_size for torchao int4 must be 32, 64, 128 or 256, not {out['group_size']}")
    elif q.get("group_size") is not None:
        raise EvalsuiteError(f"quantization.group_size: torchao {scheme} quantizes per channel and takes no group_size")
    return out


def torchao_config(settings: dict):
    """The transformers TorchAoConfig for validated settings."""
    if _find("torchao") is None:
        raise MissingExtraError("torchao quantization", "torchao", "torchao")
    from transformers import TorchAoConfig

    quiet = io.StringIO()  # torchao warns at import about its CUDA-only extensions
    with contextlib.redirect_stderr(quiet):
        from torchao.quantization import Int4WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig
    scheme = settings["scheme"]
    if scheme == "int8_weight_only":
        return TorchAoConfig(Int8WeightOnlyConfig())
    if scheme == "int8_dynamic":
        return TorchAoConfig(Int8DynamicActivationInt8WeightConfig())
    return TorchAoConfig(Int4WeightOnlyConfig(group_size=settings["group_size"], int4_packing_format="tile_packed_to_4d"))


# -- HQQ ------------------------------------------------------------------------------------------
def hqq_settings(q: dict) -> dict:
    """`{method: hqq, bits: 4, group_size: 64, axis: 1}`, validated."""
    unknown = set(q) - _HQQ_KEYS
    if unknown:
        raise EvalsuiteError(f"unknown hqq setting(s) {sorted(unknown)}; known: bits, group_size, axis")
    bits = int(q.get("bits", 4))
    if bits not in HQQ_BITS:
        raise EvalsuiteError(f"quantization.bits for hqq must be one of {', '.join(map(str, HQQ_BITS))}, not {bits}")
    group = int(q.get("group_size", 64))
    axis = int(q.get("axis", 1))
    if axis not in (0, 1):
        raise EvalsuiteError(f"quantization.axis for hqq must be 0 or 1, not {axis}")
    return {"bits": bits, "group_size": group, "axis": axis}


def apply_hqq(model, settings: dict, dtype, device: str):
    """Quantize a loaded model's linear layers (not the head) with HQQ, in place."""
    if _find("hqq") is None:
        raise MissingExtraError("HQQ quantization", "hqq", "hqq")
    from hqq.core.quantize import BaseQuantizeConfig
    from hqq.models.hf.base import AutoHQQHFModel

    cfg = BaseQuantizeConfig(nbits=settings["bits"], group_size=settings["group_size"], axis=settings["axis"])
    bars = io.StringIO()  # a progress bar per layer
    try:
        with contextlib.redirect_stderr(bars), contextlib.redirect_stdout(bars):
            AutoHQQHFModel.quantize_model(model, quant_config=cfg, compute_dtype=dtype, device=device)
    except Exception as exc:
        raise EvalsuiteError(f"HQQ quantization ({settings}) failed: {type(exc).__name__}: {exc}") from exc
    return model


# -- memory of quantized tensors ------------------------------------------------------------------
def _find(module: str):
    import importlib.util

    return importlib.util.find_spec(module)


def storage_tensors(t):
    """The plain tensors that hold a tensor's data: itself, or those inside a tensor subclass
    (torchao's quantized tensors report their logical dtype and shape, not their storage)."""
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is not None and type(t).__name__ not in ("Parameter", "Tensor"):
        names, _ = flatten()
        for n in names:
            inner = getattr(t, n, None)
            if inner is not None:
                yield from storage_tensors(inner)
        return
    yield t


def tensor_bytes(t) -> int:
    """Bytes a tensor holds, looking inside tensor subclasses."""
    return sum(int(x.numel()) * int(x.element_size()) for x in storage_tensors(t))


def stored_differently(model) -> bool:
    """Whether a model holds torchao's quantized tensors or HQQ layers, whose size
    `get_memory_footprint` misreads."""
    return any(type(p).__module__.startswith("torchao") for p in model.parameters()) or any(type(m).__module__.startswith("hqq") for m in model.modules())


def weights_mb(model) -> float:
    """Megabytes of a model's parameters and buffers as stored (quantized tensors at their real size,
    HQQ layers with their scales and zero points), each shared tensor counted once."""
    seen: set[int] = set()
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += tensor_bytes(t)
    for module in model.modules():
        meta = getattr(module, "meta", None)
        if isinstance(meta, dict):  # HQQLinear keeps scale and zero point in `meta`, not as parameters
            total += sum(tensor_bytes(v) for v in meta.values() if hasattr(v, "element_size") and id(v) not in seen)
    return total / 2**20
