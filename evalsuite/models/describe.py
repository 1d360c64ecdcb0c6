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


def weights_summary(identity: dict | None) -> dict:
    """What of a backend's weights identity the variant matrix shows, small enough for a run's
    signature: the hub source (commit) of the model, of a published checkpoint and of a draft, and
    the library versions the weights were made and run with. No file hashes, no local paths."""
    if not isinstance(identity, dict):
        return {}
    out: dict = {k: identity[k] for k in ("source", "libraries") if k in identity}
    for key, block in identity.items():
        if isinstance(block, dict) and isinstance(block.get("source"), dict):
            out[key] = {"source": block["source"]}
    return out


def matrix_text(row: dict) -> str:
    """One variant matrix row in a few words (the demo table's cell): method, bits, scheme, group
    size; library and version; checkpoint and revision (or commit); speculative method."""
    if row.get("method") in (None, "none"):
        parts = [f"unquantized ({row['bits']}-bit)" if row.get("bits") else "unquantized"]
    else:
        bits = f" {row['bits']}-bit" if row.get("bits") else ""
        scheme = f" {row['scheme']}" if row.get("scheme") else ""
        group = f" g{row['group_size']}" if row.get("group_size") else ""
        parts = [f"{row['method']}{bits}{scheme}{group}"]
    if row.get("library"):
        parts.append(f"{row['library']} {row.get('library_version') or '?'}")
    commit = str(row["commit"])[:10] if row.get("commit") else None
    pin = f"{row['revision']} ({commit})" if row.get("revision") and commit and row["revision"] != row["commit"] else row.get("revision") or commit
    if row.get("checkpoint"):
        parts.append(str(row["checkpoint"]) + (f"@{pin}" if pin else ""))
    elif pin:
        parts.append(f"revision {pin}")
    if row.get("speculative"):
        parts.append(f"speculative {row['speculative']}")
    return " · ".join(parts)


def variant_matrix(variants: list[dict], signature: dict) -> dict[str, dict]:
    """Variant name -> its matrix row, for variants as a run's resolved suite holds them and the
    run's signature (the libraries it ran with, the hub commits its weights resolved to). The report
    and the demo table both read this."""
    weights = signature.get("weights") or {}
    libraries = signature.get("libraries") or {}
    return {str(v.get("name")): describe_quantization(v, {"libraries": libraries, **(weights.get(v.get("name")) or {})}) for v in variants}
