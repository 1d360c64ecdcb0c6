"""One row of the variant matrix (report, demo table): what a variant's weights are, in words.

`describe_quantization(variant_dict)` takes a variant as `Variant.to_dict()` writes it (the run's
resolved suite holds these) and returns method, bits, scheme, group size, library and version,
checkpoint, revision, and the hub commit when the backend's weights identity is given. Pure: it
reads no model and imports no heavy library (versions come from the installed packages' metadata,
or from the identity's `libraries` when given, which is what the run used).
"""

from __future__ import annotations

from importlib import metadata

from ..errors import EvalsuiteError
from .compressed import SCHEMES as LLMC_SCHEMES
from .formats import LIBRARIES, quantization_method

_DTYPE_BITS = {"float32": 32, "fp32": 32, "bfloat16": 16, "bf16": 16, "float16": 16, "fp16": 16}
_TORCHAO_BITS = {"int8_weight_only": 8, "int8_dynamic": 8, "int4_weight_only": 4}


def _version(name: str, identity: dict | None) -> str | None:
    libs = (identity or {}).get("libraries") or {}
    if name in libs:
        return libs[name]
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _row(method: str, bits=None, scheme=None, group_size=None, checkpoint=None, revision=None) -> dict:
    return {"method": method, "bits": bits, "scheme": scheme, "group_size": group_size, "checkpoint": checkpoint, "revision": revision}


def _quantized(method: str, q: dict) -> dict:
    """method, bits, scheme, group size, checkpoint, revision of a quantization mapping (defaults filled as evalsuite fills them)."""
    ckpt, rev = q.get("checkpoint"), q.get("revision")
    if method == "bnb":
        bits = int(q.get("bits", 8))
        return _row(method, bits, "LLM.int8" if bits == 8 else str(q.get("quant_type", "nf4")))
    if method in ("gptq", "awq"):
        if ckpt:
            return _row(method, q.get("bits"), "published checkpoint", None, ckpt, rev)
        bits, group = int(q.get("bits", 4)), int(q.get("group_size", 128))
        if method == "awq":
            return _row(method, bits, "GEMM, " + ("symmetric" if q.get("sym", False) else "zero point"), group)
        return _row(method, bits, "sym" if q.get("sym", True) else "asym", group)
    if method == "compressed-tensors":
        return _row(method, None, "published checkpoint", None, ckpt, rev)
    if method == "llm-compressor":
        scheme = str(q.get("scheme", "")).upper()
        info = LLMC_SCHEMES.get(scheme, {})
        return _row(method, info.get("bits"), f"{scheme} ({q.get('algorithm', 'rtn')})", q.get("group_size", info.get("group_size")))
    if method == "torchao":
        scheme = str(q.get("scheme", "int8_weight_only"))
        return _row(method, _TORCHAO_BITS.get(scheme), scheme, q.get("group_size"))
    if method == "hqq":
        return _row(method, int(q.get("bits", 4)), f"HQQ axis {int(q.get('axis', 1))}", int(q.get("group_size", 64)))
    return _row(method)


def _commit(method: str | None, row: dict, ident: dict) -> str | None:
    """The hub commit of the published checkpoint (or, without one, of the model), from the weights identity."""
    if row["checkpoint"]:
        block = ident.get(method or "")
        return ((block.get("source") if isinstance(block, dict) else None) or {}).get("commit")
    return (ident.get("source") or {}).get("commit")


def describe_quantization(variant: dict, identity: dict | None = None) -> dict:
    """The variant matrix row of one variant.

    Keys: name, backend, method ("none" when unquantized), bits (weights; the dtype's for an
    unquantized variant with an explicit dtype), scheme, group_size, library, library_version,
    checkpoint (a published one: hub id or path), revision (as written), commit (the hub commit
    the backend resolved, when `identity` = its weights identity is given), speculative (method or
    None). Unknown methods (a vllm-only `fp8`, say) are shown as written, with the vllm library.
    """
    q = variant.get("quantization") or {}
    spec = variant.get("speculative") or {}
    backend = variant.get("backend")
    try:
        method = quantization_method(q) if q else None
    except EvalsuiteError:  # a method only another backend knows (vllm's fp8, marlin kernels ...)
        method = str(q.get("method") or "kv-cache")
    if method is None:
        dtype = str((variant.get("options") or {}).get("dtype", "auto")).lower()
        row = _row("none", _DTYPE_BITS.get(dtype), None)
        libs: tuple[str, ...] = ()
    else:
        row = _quantized(method, q)
        libs = LIBRARIES.get(method, ("vllm",) if backend == "vllm" else ())
    library = libs[0] if libs else None
    return {
        "name": variant.get("name"),
        "backend": backend,
        **row,
        "revision": row["revision"] if row["checkpoint"] else variant.get("revision"),
        "library": library,
        "library_version": _version(library, identity) if library else None,
        "commit": _commit(method, row, identity or {}),
        "speculative": spec.get("method"),
    }
