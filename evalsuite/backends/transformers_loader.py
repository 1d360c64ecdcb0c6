"""Loading a transformers causal LM for the transformers backend: the baseline weights, a quantized
checkpoint (bnb, GPTQ, AWQ, compressed-tensors, llm-compressor) or an on-demand format (torchao, HQQ).

Imports torch and transformers only when a model loads (a cached run never needs them).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

from .. import models
from ..errors import EvalsuiteError
from ..models import awq, formats, ondemand


def gptq_kernel(quantization: dict, device: str) -> str | None:
    """The GPTQ kernel a variant runs with (it can change outputs, so it is part of the fingerprint)."""
    # measured here (SmolLM2-135M, 4-bit g64, 2 CPU cores): gptq_torch 0.6 tok/s, gptq_torch_fused
    # 32, gptq_torch_int8 32, gptq_torch_aten 34 (what `auto` picks). Named explicitly on CPU so the
    # kernel, which can change outputs, is part of the fingerprint and stable across versions.
    return quantization.get("kernel") or ("gptq_torch_aten" if device == "cpu" else None)


class ModelLoader:
    """Loads models for one variant: its device, dtype and cache directory."""

    def __init__(self, *, who: str, device: str, dtype_name: str, cache_dir: str | None, extra_kwargs: dict | None = None) -> None:
        self.who = who  #: the variant's name, for messages
        self.device = device
        self.dtype_name = dtype_name
        self.cache_dir = cache_dir
        self.extra_kwargs = dict(extra_kwargs or {})  #: further `from_pretrained` arguments (`attn_implementation`)
        self.gptq_wrapper: Any = None  #: keeps gptqmodel's state alive with the HF model

    @property
    def dtype(self):
        """The torch dtype of the weights (imports torch)."""
        import torch

        return getattr(torch, self.dtype_name)

    def causal_lm(self, model_dir: Path, quantization: dict | None):
        """Load a causal LM from `model_dir`, quantized as `quantization` says, on the device, in eval mode."""
        from transformers import AutoModelForCausalLM

        method = models.quantization_method(quantization)
        if method == "gptq":
            return self._gptq(model_dir, quantization or {})
        source, kwargs = self._kwargs(model_dir, quantization, method)
        bars = io.StringIO()  # compressed-tensors draws progress bars (dispatch, decompress); gptqmodel (AWQ) a banner and its kernel choice
        try:
            with warnings.catch_warnings(), contextlib.redirect_stderr(bars), contextlib.redirect_stdout(bars):
                # compressed-tensors: "loading attributes ... will be overwritten" is what we ask for
                warnings.filterwarnings("ignore", message=r".*already has a `quantization_config` attribute.*")
                model = AutoModelForCausalLM.from_pretrained(str(source), **kwargs)
                if hasattr(model, "ct_decompress_hook"):  # decompress now (it would on the first forward): load time and memory are the model's
                    import torch as t

                    with t.inference_mode():
                        model(input_ids=t.zeros((1, 1), dtype=t.long, device=model.device))
        except Exception as exc:
            if method not in formats.CHECKPOINT_METHODS and method != "torchao":
                raise
            tail = bars.getvalue()[-1500:]
            raise EvalsuiteError(
                f"variant {self.who!r}: loading the {method} model {source} on {self.device} failed: {type(exc).__name__}: {exc}"
                + (f"\n--- its output (tail) ---\n{tail}" if tail.strip() else "")
            ) from exc
        if method == "hqq":
            ondemand.apply_hqq(model, ondemand.hqq_settings(quantization or {}), self.dtype, self.device if self.device != "cuda" else "cuda:0")
        model.eval()
        return model

    def _kwargs(self, model_dir: Path, quantization: dict | None, method: str | None) -> tuple[Path, dict]:
        """What `from_pretrained` loads (the baseline, or a quantized checkpoint) and with which arguments."""
        kwargs: dict = {"dtype": self.dtype, "device_map": {"": self.device if self.device != "cuda" else "cuda:0"}, **self.extra_kwargs}
        source = model_dir
        if method == "bnb":
            kwargs["quantization_config"] = models.bnb_config(quantization or {})
            models.require("accelerate", "bitsandbytes quantization", "bnb", "accelerate")
        elif method == "torchao":
            kwargs["quantization_config"] = ondemand.torchao_config(ondemand.torchao_settings(quantization or {}, self.device, self.dtype_name))
        elif method in formats.CHECKPOINT_METHODS:
            if why := formats.missing_requirement(quantization):
                raise EvalsuiteError(f"variant {self.who!r}: quantization {method} {why}")
            source = formats.checkpoint_dir(method, model_dir, quantization or {}, self.cache_dir)
            if method == "awq":
                awq.check_device(source, self.device)
            else:  # weight-only schemes load dequantized: the same outputs, without re-quantizing every weight at every step
                from transformers import CompressedTensorsConfig

                kwargs["quantization_config"] = CompressedTensorsConfig(dequantize=formats.weight_only(source))
        elif self.device == "cpu":
            kwargs.pop("device_map")  # plain CPU load: no accelerate dispatch needed
        return source, kwargs

    def _gptq(self, model_dir: Path, quantization: dict):
        models.require("gptqmodel", "GPTQ quantization", "gptq", "gptqmodel")
        os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")
        buf = io.StringIO()  # gptqmodel prints a banner at import, config dumps and its kernel choice
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            import gptqmodel  # noqa: F401  (import-time banner captured here)
        ckpt = models.gptq_checkpoint(model_dir, quantization, self.cache_dir)
        from gptqmodel import GPTQModel

        kernel = models.gptq_backend(gptq_kernel(quantization, self.device))
        kwargs = {"device": self.device if self.device != "cuda" else "cuda:0"}
        if kernel is not None:
            kwargs["backend"] = kernel
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                wrapped = GPTQModel.load(str(ckpt), **kwargs)
        except Exception as exc:
            raise EvalsuiteError(f"loading the GPTQ checkpoint {ckpt} failed: {type(exc).__name__}: {exc}\n{buf.getvalue()[-2000:]}") from exc
        self.gptq_wrapper = wrapped  # keeps gptqmodel's state alive with the HF model
        model = wrapped.model
        model.eval()
        return model
