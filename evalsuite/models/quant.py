"""bitsandbytes settings and GPTQ (gptqmodel): settings, the cached checkpoint, the quantization itself."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import EvalsuiteError
from .calibration import calibration_texts
from .files import build_once, cache_root, library_identity, model_dir_identity, read_json, require
from .resolve import resolve_model

log = logging.getLogger("evalsuite")


def bnb_config(q: dict):
    """A BitsAndBytesConfig for `{method: bnb, bits: 8}` or `{method: bnb, bits: 4, quant_type: nf4}`."""
    require("bitsandbytes", "bitsandbytes quantization", "bnb", "bitsandbytes")
    import torch
    from transformers import BitsAndBytesConfig

    bits = int(q.get("bits", 8))
    unknown = set(q) - {"method", "bits", "quant_type", "double_quant", "compute_dtype", "skip_modules"}
    if unknown:
        raise EvalsuiteError(f"unknown bnb quantization setting(s) {sorted(unknown)}; known: bits, quant_type, double_quant, compute_dtype, skip_modules")
    skip = q.get("skip_modules")
    if bits == 8:
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=skip)
    if bits == 4:
        quant_type = q.get("quant_type", "nf4")
        if quant_type not in ("nf4", "fp4"):
            raise EvalsuiteError(f"bnb quant_type must be nf4 or fp4, not {quant_type!r}")
        compute = getattr(torch, str(q.get("compute_dtype", "float32")))
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=quant_type,
            bnb_4bit_use_double_quant=bool(q.get("double_quant", False)),
            bnb_4bit_compute_dtype=compute,
            llm_int8_skip_modules=skip,
        )
    raise EvalsuiteError(f"bnb quantization supports bits 8 or 4, not {bits}")


def gptq_settings(q: dict, hidden_size: int | None = None) -> dict:
    """The GPTQ settings that change the quantized weights (validated)."""
    unknown = set(q) - {
        "method",
        "bits",
        "group_size",
        "desc_act",
        "sym",
        "damp_percent",
        "calibration_samples",
        "calibration",
        "checkpoint",
        "revision",
        "kernel",
    }
    if unknown:
        raise EvalsuiteError(
            f"unknown gptq quantization setting(s) {sorted(unknown)}; known: bits, group_size, desc_act, sym, damp_percent, calibration, calibration_samples, checkpoint, revision, kernel"
        )
    bits = int(q.get("bits", 4))
    group = int(q.get("group_size", 128))
    if bits not in (2, 3, 4, 8):
        raise EvalsuiteError(f"gptq bits must be 2, 3, 4 or 8, not {bits}")
    if hidden_size and group > 0 and hidden_size % group:
        divisors = [d for d in (32, 64, 96, 128, 192) if hidden_size % d == 0]
        raise EvalsuiteError(f"gptq group_size {group} must divide the model's hidden size {hidden_size} (try {divisors})")
    return {
        "bits": bits,
        "group_size": group,
        "desc_act": bool(q.get("desc_act", False)),
        "sym": bool(q.get("sym", True)),
        "damp_percent": float(q.get("damp_percent", 0.05)),
        "calibration_samples": int(q.get("calibration_samples", 64)),
    }


_PLAN_MEMO: dict[str, tuple[Path, dict, dict, list[str]]] = {}


def gptq_plan(baseline_dir: Path, q: dict, cache_dir: str | os.PathLike | None = None) -> tuple[Path, dict, dict, list[str]]:
    """Where the GPTQ checkpoint for the baseline is (or will be), without quantizing anything.

    Returns (directory, identity, settings, calibration texts). An explicit `q['checkpoint']` is used
    as it is. Otherwise the checkpoint lives in the cache, keyed by the baseline's weights identity,
    the GPTQ settings, the digest of the calibration text and the gptqmodel version: the same
    quantized weights wherever the repository lives, and new weights when the calibration text
    changes (fixed case sets keep it fixed).
    """
    memo_key = json.dumps([str(baseline_dir), q, str(cache_root(cache_dir))], sort_keys=True, default=str)
    if memo_key in _PLAN_MEMO:
        return _PLAN_MEMO[memo_key]
    if q.get("checkpoint"):
        resolved = resolve_model(str(q["checkpoint"]), q.get("revision"), cache_dir, field="quantization.checkpoint")
        ckpt = resolved.path
        ident: dict = {"checkpoint": model_dir_identity(ckpt, cache_dir)} | ({"source": resolved.identity()} if resolved.source == "hub" else {})
        plan: tuple[Path, dict, dict, list[str]] = (ckpt, ident, {}, [])
        _PLAN_MEMO[memo_key] = plan
        return plan
    cfg = read_json(baseline_dir / "config.json")
    settings = gptq_settings(q, cfg.get("hidden_size"))
    texts = calibration_texts(q.get("calibration"), settings["calibration_samples"])
    key_obj = {
        "baseline": model_dir_identity(baseline_dir, cache_dir),
        "settings": {k: v for k, v in settings.items() if k != "calibration"},
        "calibration_sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest(),
        "libraries": library_identity("gptqmodel"),
    }
    key = hashlib.sha256(json.dumps(key_obj, sort_keys=True).encode()).hexdigest()[:16]
    final = cache_root(cache_dir) / "models" / f"gptq-{baseline_dir.name}-{settings['bits']}b-g{settings['group_size']}-{key}"
    plan = (final, {"gptq_key": key}, settings, texts)
    _PLAN_MEMO[memo_key] = plan
    return plan


def gptq_checkpoint(baseline_dir: Path, q: dict, cache_dir: str | os.PathLike | None = None) -> Path:
    """The GPTQ checkpoint directory for the baseline, quantized once (a few minutes) and cached."""
    final, _identity, settings, texts = gptq_plan(baseline_dir, q, cache_dir)
    if q.get("checkpoint") or (final / "evalsuite-gptq.json").is_file():
        return final
    require("gptqmodel", "GPTQ quantization", "gptq", "gptqmodel")
    if not texts:
        texts = calibration_texts(q.get("calibration"), settings["calibration_samples"])
    meta = {
        "settings": settings,
        "baseline": str(baseline_dir),
        "calibration_texts": len(texts),
        "calibration_sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest(),
    }
    announce = (
        f"quantizing {baseline_dir.name} with GPTQ ({settings['bits']}-bit, group {settings['group_size']}) "
        f"on {len(texts)} calibration texts: a few minutes, once"
    )
    return build_once(final, "evalsuite-gptq.json", lambda tmp: quantize_gptq(baseline_dir, tmp, settings, texts), meta, announce)


def quantize_gptq(baseline_dir: Path, out_dir: Path, settings: dict, texts: Sequence[str]) -> None:
    """Quantize a model directory with gptqmodel and save the checkpoint (with tokenizer)."""
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")
    from gptqmodel import GPTQModel, QuantizeConfig

    # gptqmodel writes per-layer logs under ./logs of the working directory: keep them in the checkpoint
    with contextlib.suppress(ImportError, AttributeError):
        from gptqmodel.looper import loop_processor

        if hasattr(loop_processor, "_PROJECT_LOG_DIR"):
            loop_processor._PROJECT_LOG_DIR = out_dir / "logs"
    # gptqmodel draws a progress line per calibration row and layer: keep that in a log file
    logfile = out_dir / "quantize.log"
    # (QuantizeConfig too: it prints where it offloads to)
    with open(logfile, "w", encoding="utf-8") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        try:
            qcfg = QuantizeConfig(
                bits=settings["bits"],
                group_size=settings["group_size"],
                desc_act=settings["desc_act"],
                sym=settings["sym"],
                damp_percent=settings["damp_percent"],
            )
            model = GPTQModel.load(str(baseline_dir), qcfg)
            model.quantize(list(texts), batch_size=1)
            model.save(str(out_dir))
        except Exception as exc:
            fh.flush()
            tail = logfile.read_text("utf-8", errors="replace")[-2000:]
            raise EvalsuiteError(f"GPTQ quantization of {baseline_dir} failed: {type(exc).__name__}: {exc}\n--- gptqmodel log (tail) ---\n{tail}") from exc
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(baseline_dir)).save_pretrained(str(out_dir))
    del model


def gptq_backend(name: str | None):
    """The gptqmodel BACKEND member for a name (None: the fastest measured on CPU here)."""
    from gptqmodel import BACKEND

    if not name:
        return None
    try:
        return BACKEND(str(name).lower())
    except ValueError:
        raise EvalsuiteError(f"unknown gptqmodel backend {name!r}; available: {', '.join(b.value for b in BACKEND)}") from None
