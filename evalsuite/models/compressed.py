"""compressed-tensors checkpoints (the format llm-compressor writes and vLLM serves), and building
one from the baseline with llm-compressor's `oneshot`.

- `{method: compressed-tensors, checkpoint: ID_OR_PATH, revision: REV}` loads a published checkpoint
  (W4A16, W8A8, FP8...). transformers loads it through the `compressed-tensors` package; on CPU the
  weights are decompressed and activation quantization is simulated, so outputs are those of the
  scheme while speed is not that of a GPU kernel.
- `{method: llm-compressor, scheme: W8A8 | W4A16 | FP8_DYNAMIC, group_size: 64, ignore: [lm_head],
  algorithm: rtn | gptq, calibration: PATH, calibration_samples: 64}` quantizes the baseline once
  (seconds for round-to-nearest; minutes with `algorithm: gptq`), cached under the evalsuite cache
  and keyed by the baseline's weights, the settings, the calibration text and the library versions.

llm-compressor 0.14 declares `transformers<=5.17` and `compressed-tensors==0.19`; evalsuite installs
it without its declared dependencies (`pip install --no-deps llmcompressor==0.14.0.1`, as `make setup`
does) and runs it in a child process (evalsuite.models.worker), on transformers 5.24 and compressed-tensors 0.20, where its
`oneshot` with these schemes is tested.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..errors import EvalsuiteError, MissingExtraError, suggest

log = logging.getLogger("evalsuite")

LLMCOMPRESSOR_PIN = "llmcompressor==0.14.0.1"
#: preset schemes tested here: weights bits, weight strategy, default group size, activations, what a CPU does with it.
#: Not offered: W4A16_ASYM (builds, but its packed zero points do not load in transformers 5.24 with
#: compressed-tensors 0.20: weight_zero_point size mismatch); NVFP4/MXFP4 and static-activation schemes (untested here).
SCHEMES: dict[str, dict] = {
    "W8A8": {"bits": 8, "strategy": "channel", "group_size": None, "activations": "int8 dynamic per token", "cpu": "emulated"},
    "W4A16": {"bits": 4, "strategy": "group", "group_size": 128, "activations": None, "cpu": "dequantized"},
    "W8A16": {"bits": 8, "strategy": "group", "group_size": 128, "activations": None, "cpu": "dequantized"},
    "FP8_DYNAMIC": {"bits": 8, "strategy": "channel", "group_size": None, "activations": "fp8 dynamic per token", "cpu": "emulated"},
}
ALGORITHMS = ("rtn", "gptq")
_CT_KEYS = {"method", "checkpoint", "revision"}
_LLMC_KEYS = {"method", "scheme", "group_size", "ignore", "algorithm", "calibration", "calibration_samples", "dampening_frac"}


def _close(name: str, options) -> str:
    return suggest(str(name).upper(), options, n=3, cutoff=0.4, quote=False)


# -- published checkpoints ------------------------------------------------------------------------
def checkpoint_settings(q: dict) -> dict:
    """`{method: compressed-tensors, checkpoint: ID_OR_PATH, revision: REV}`, validated."""
    unknown = set(q) - _CT_KEYS
    if unknown:
        raise EvalsuiteError(f"unknown compressed-tensors setting(s) {sorted(unknown)}; known: checkpoint, revision")
    if not q.get("checkpoint"):
        raise EvalsuiteError(
            "quantization.checkpoint: method compressed-tensors loads a published checkpoint (a hub id or directory); "
            "to build one from the baseline use {method: llm-compressor, scheme: W8A8}"
        )
    return {"checkpoint": str(q["checkpoint"]), "revision": q.get("revision")}


def checkpoint_scheme(model_dir: Path) -> dict:
    """What a compressed-tensors checkpoint holds, read from its config.json (no import)."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"cannot read {model_dir}/config.json: {exc}") from exc
    qc = cfg.get("quantization_config") or cfg.get("compression_config") or {}
    return qc if isinstance(qc, dict) else {}


def require_compressed_checkpoint(model_dir: Path, name: str) -> dict:
    """The checkpoint's quantization config; an error naming what it is when it is not compressed-tensors."""
    qc = checkpoint_scheme(model_dir)
    method = qc.get("quant_method")
    if method != "compressed-tensors":
        what = f"quantization_config.quant_method is {method!r}" if method else "it has no quantization_config"
        hint = {"awq": " (use method: awq)", "gptq": " (use method: gptq with checkpoint:)"}.get(str(method), "")
        raise EvalsuiteError(f"quantization.checkpoint {name!r} is not a compressed-tensors checkpoint: {what}{hint}")
    return qc


# -- building with llm-compressor ---------------------------------------------------------------
def llmcompressor_settings(q: dict, dims: tuple[int, ...] = ()) -> dict:
    """The llm-compressor settings that change the quantized weights (validated, defaults filled).

    `dims` are the input widths of the quantized layers (hidden and intermediate size): a group
    size must divide each.
    """
    unknown = set(q) - _LLMC_KEYS
    if unknown:
        raise EvalsuiteError(f"unknown llm-compressor setting(s) {sorted(unknown)}; known: {', '.join(sorted(_LLMC_KEYS - {'method'}))}")
    scheme = str(q.get("scheme") or "").upper()
    if scheme not in SCHEMES:
        raise EvalsuiteError(
            f"quantization.scheme: unknown llm-compressor scheme {q.get('scheme')!r}{_close(scheme, SCHEMES)}; available: {', '.join(SCHEMES)}"
        )
    algorithm = str(q.get("algorithm", "rtn")).lower()
    if algorithm not in ALGORITHMS:
        raise EvalsuiteError(f"quantization.algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    group = SCHEMES[scheme]["group_size"]
    if q.get("group_size") is not None:
        if group is None:
            raise EvalsuiteError(f"quantization.group_size: scheme {scheme} quantizes per channel and takes no group_size")
        group = int(q["group_size"])
    bad = [d for d in dims if group and d % group]
    if bad:
        ok = [g for g in (32, 64, 128) if all(d % g == 0 for d in dims)]
        raise EvalsuiteError(f"quantization.group_size {group} must divide the quantized layers' input width {bad[0]} (try group_size: {ok[-1] if ok else 32})")
    ignore = q.get("ignore", ["lm_head"])
    if not isinstance(ignore, list) or not all(isinstance(i, str) for i in ignore):
        raise EvalsuiteError("quantization.ignore must be a list of module names or 're:' patterns")
    out = {"scheme": scheme, "group_size": group, "ignore": sorted(ignore), "algorithm": algorithm}
    if algorithm == "gptq":
        out["calibration_samples"] = int(q.get("calibration_samples", 64))
        out["dampening_frac"] = float(q.get("dampening_frac", 0.01))
    return out


def model_dims(model_dir: Path) -> tuple[int, ...]:
    """Input widths of a decoder's linear layers, from its config (hidden and intermediate size)."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(int(cfg[k]) for k in ("hidden_size", "intermediate_size") if isinstance(cfg.get(k), int))


def llmcompressor_plan(baseline_dir: Path, q: dict, cache_dir=None) -> tuple[Path, dict, dict, list[str]]:
    """Where the llm-compressor checkpoint for the baseline is (or will be), without building it.

    Returns (directory, identity, settings, calibration texts).
    """
    from .calibration import calibration_texts
    from .files import cache_root, library_identity, model_dir_identity

    settings = llmcompressor_settings(q, model_dims(baseline_dir))
    texts = calibration_texts(q.get("calibration"), settings["calibration_samples"]) if settings["algorithm"] == "gptq" else []
    key_obj = {
        "baseline": model_dir_identity(baseline_dir, cache_dir),
        "settings": settings,
        "calibration_sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest() if texts else None,
        "libraries": library_identity("llmcompressor", "compressed-tensors"),
    }
    key = hashlib.sha256(json.dumps(key_obj, sort_keys=True).encode()).hexdigest()[:16]
    name = f"llmc-{baseline_dir.name}-{settings['scheme'].lower()}" + (f"-g{settings['group_size']}" if settings["group_size"] else "")
    final = cache_root(cache_dir) / "models" / f"{name}-{settings['algorithm']}-{key}"
    return final, {"llmcompressor_key": key, "settings": settings}, settings, texts


class LLMCompressorMissing(MissingExtraError):
    """llm-compressor is not installed; it installs without its declared dependencies."""

    def __init__(self) -> None:
        super().__init__("building a compressed-tensors checkpoint", "llmcompressor", "llmcompressor")
        self.args = (
            "building a compressed-tensors checkpoint needs llm-compressor: pip install 'evalsuite[llmcompressor]' && "
            f"pip install --no-deps {LLMCOMPRESSOR_PIN} (its metadata pins transformers<=5.17.0 and compressed-tensors==0.19.0: "
            "a plain install would downgrade transformers; evalsuite runs it on the installed transformers)",
        )

    def __str__(self) -> str:
        return self.args[0]


def require_llmcompressor() -> None:
    """Fail with the exact install command when llm-compressor is missing (checked without importing it)."""
    import importlib.util

    if importlib.util.find_spec("llmcompressor") is None:
        raise LLMCompressorMissing()
    if importlib.util.find_spec("compressed_tensors") is None:
        raise MissingExtraError("compressed-tensors checkpoints", "compressed", "compressed-tensors")


def llmcompressor_checkpoint(baseline_dir: Path, q: dict, cache_dir=None) -> Path:
    """The llm-compressor checkpoint for the baseline, built once (in a child process) and cached."""
    from .files import build_once

    final, _ident, settings, texts = llmcompressor_plan(baseline_dir, q, cache_dir)
    if (final / "evalsuite-llmcompressor.json").is_file():
        return final
    require_llmcompressor()
    meta = {"settings": settings, "baseline": str(baseline_dir), "calibration_texts": len(texts)}
    announce = f"quantizing {baseline_dir.name} with llm-compressor ({settings['scheme']}, {settings['algorithm']}): once, cached in {final}"
    return build_once(final, "evalsuite-llmcompressor.json", lambda tmp: run_oneshot(baseline_dir, tmp, settings, texts), meta, announce)


def run_oneshot(baseline_dir: Path, out_dir: Path, settings: dict, texts: list[str]) -> None:
    """llm-compressor's `oneshot` in a child process (evalsuite.models.worker)."""
    from .worker import run_in_child

    spec = {"baseline": str(baseline_dir), "settings": settings, "texts": texts}
    run_in_child("llmcompressor", spec, out_dir, f"llm-compressor quantization of {baseline_dir} ({settings['scheme']})")
