"""AWQ checkpoints: published ones (`{method: awq, checkpoint: ID_OR_PATH}`), or one quantized from
the baseline with gptqmodel (`{method: awq, bits: 4, group_size: 64, calibration: PATH}`, cached like
GPTQ).

transformers 5 loads AWQ checkpoints through gptqmodel's kernels (autoawq is gone: it needs triton
and a GPU). On CPU gptqmodel has kernels for the GEMM packing only (its torch, torch_aten,
torch_fused and torch_int8 AWQ kernels); GEMV, GEMV_FAST, LLM-AWQ, Marlin and BitBLAS checkpoints
need CUDA, and evalsuite refuses them on CPU with that reason before loading anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..errors import EvalsuiteError

log = logging.getLogger("evalsuite")

_KEYS = {"method", "checkpoint", "revision", "bits", "group_size", "sym", "calibration", "calibration_samples"}
#: AWQ packings gptqmodel can run on a CPU (its kernels' SUPPORTS_DEVICES)
CPU_FORMATS = ("gemm",)


def awq_settings(q: dict, hidden_size: int | None = None) -> dict:
    """The AWQ settings that change the quantized weights (validated); {} for a published checkpoint."""
    unknown = set(q) - _KEYS
    if unknown:
        raise EvalsuiteError(f"unknown awq quantization setting(s) {sorted(unknown)}; known: {', '.join(sorted(_KEYS - {'method'}))}")
    if q.get("checkpoint"):
        extra = sorted(set(q) - {"method", "checkpoint", "revision"})
        if extra:
            raise EvalsuiteError(f"quantization: an AWQ checkpoint is used as published; {extra} only apply when evalsuite quantizes the baseline")
        return {}
    bits = int(q.get("bits", 4))
    if bits != 4:
        raise EvalsuiteError(f"quantization.bits: AWQ (GEMM packing) quantizes to 4 bits, not {bits}")
    group = int(q.get("group_size", 128))
    if hidden_size and group > 0 and hidden_size % group:
        ok = [d for d in (32, 64, 128) if hidden_size % d == 0]
        raise EvalsuiteError(f"quantization.group_size {group} must divide the model's hidden size {hidden_size} (try {ok})")
    return {"bits": bits, "group_size": group, "sym": bool(q.get("sym", False)), "calibration_samples": int(q.get("calibration_samples", 64))}


def checkpoint_format(model_dir: Path) -> str:
    """The packing an AWQ checkpoint declares (gemm, gemv, gemv_fast, marlin...), from config.json."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"cannot read {model_dir}/config.json: {exc}") from exc
    qc = cfg.get("quantization_config") or {}
    if str(qc.get("quant_method", "")).lower() != "awq":
        raise EvalsuiteError(f"quantization.checkpoint {model_dir} is not an AWQ checkpoint (quantization_config.quant_method is {qc.get('quant_method')!r})")
    return str(qc.get("version") or qc.get("format") or qc.get("checkpoint_format") or "gemm").lower()


def check_device(model_dir: Path, device: str) -> str:
    """The checkpoint's packing; an error with the reason when no kernel for it runs on `device`."""
    fmt = checkpoint_format(model_dir)
    if not str(device).startswith("cuda") and fmt not in CPU_FORMATS:
        raise EvalsuiteError(
            f"the AWQ checkpoint {model_dir} is packed as {fmt!r}, and gptqmodel's kernels for that packing run on CUDA/ROCm only; "
            f"on {device} it has AWQ kernels for the GEMM packing only (torch, torch_aten, torch_fused, torch_int8): use a GEMM checkpoint, or device cuda"
        )
    return fmt


def awq_plan(baseline_dir: Path, q: dict, cache_dir=None) -> tuple[Path, dict, dict, list[str]]:
    """Where the AWQ checkpoint is (or will be), without quantizing: (directory, identity, settings, texts)."""
    from .calibration import calibration_texts
    from .files import cache_root, library_identity, model_dir_identity, read_json
    from .resolve import resolve_model

    if q.get("checkpoint"):
        awq_settings(q)
        resolved = resolve_model(str(q["checkpoint"]), q.get("revision"), cache_dir, field="quantization.checkpoint")
        return resolved.path, {"checkpoint": model_dir_identity(resolved.path, cache_dir), "source": resolved.identity()}, {}, []
    settings = awq_settings(q, read_json(baseline_dir / "config.json").get("hidden_size"))
    texts = calibration_texts(q.get("calibration"), settings["calibration_samples"])
    key_obj = {
        "baseline": model_dir_identity(baseline_dir, cache_dir),
        "settings": settings,
        "calibration_sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest(),
        "libraries": library_identity("gptqmodel"),
    }
    key = hashlib.sha256(json.dumps(key_obj, sort_keys=True).encode()).hexdigest()[:16]
    final = cache_root(cache_dir) / "models" / f"awq-{baseline_dir.name}-{settings['bits']}b-g{settings['group_size']}-{key}"
    return final, {"awq_key": key}, settings, texts


def awq_checkpoint(baseline_dir: Path, q: dict, cache_dir=None) -> Path:
    """The AWQ checkpoint: the published one, or the baseline quantized once (minutes) and cached."""
    from .files import build_once, require

    final, _ident, settings, texts = awq_plan(baseline_dir, q, cache_dir)
    if q.get("checkpoint") or (final / "evalsuite-awq.json").is_file():
        return final
    require("gptqmodel", "AWQ quantization", "gptq", "gptqmodel")
    meta = {"settings": settings, "baseline": str(baseline_dir), "calibration_texts": len(texts)}
    announce = f"quantizing {baseline_dir.name} with AWQ (4-bit, group {settings['group_size']}) on {len(texts)} calibration texts: a few minutes, once"
    return build_once(final, "evalsuite-awq.json", lambda tmp: quantize_awq(baseline_dir, tmp, settings, texts), meta, announce)


def quantize_awq(baseline_dir: Path, out_dir: Path, settings: dict, texts: list[str]) -> None:
    """gptqmodel's AWQ in a child process (evalsuite.models.worker): its worker threads end the
    process on an error, which must not end the run."""
    from .worker import run_in_child

    spec = {"baseline": str(baseline_dir), "settings": settings, "texts": list(texts)}
    run_in_child("awq", spec, out_dir, f"AWQ quantization of {baseline_dir} (4-bit, group {settings['group_size']})")
