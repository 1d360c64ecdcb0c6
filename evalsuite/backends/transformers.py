"""The transformers backend: local model directories (or the embedded model), batched generation.

Options (under a variant's `options`, usually set once on the baseline and inherited):

- `device`: cpu, cuda or auto (default auto: cuda when available)
- `dtype`: float32, bfloat16, float16 or auto (default: float32 on CPU, bfloat16 on CUDA)
- `threads`: torch CPU threads (default: torch's choice)
- `cache_dir`: where converted/quantized models live (default $EVALSUITE_CACHE_DIR or ~/.cache/evalsuite)
- `compile`: `{mode: default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs, fullgraph,
  dynamic, max_cache_len}`: `torch.compile` of the decoding forward, with a static KV cache
- `attn_implementation`: eager, sdpa, flex_attention, flash_attention_2 or flash_attention_3
  (passed to `from_pretrained`; default: the model's own choice)
- `trust_remote_code`: not supported (a suite must not run code shipped with a model)

Variant fields used: `model` (a directory, a hub id with `revision`, or "embedded"), `kv_cache`
(quantized or offloaded KV cache: evalsuite.backends.transformers_cache),
`quantization` (bnb 8/4-bit, gptq, awq, compressed-tensors, llm-compressor, torchao, hqq:
evalsuite.models.formats) and `speculative` (`{method: prompt_lookup, num_tokens: 10}` or
`{method: draft, model: DIR_OR_ID, revision: REV, draft: {quantization: {...}}, num_tokens: 5}`).

Sampling (temperature > 0) is done by a per-row logits processor with a torch.Generator seeded
from `Request.sample_seed()`, so a sample depends on its seed only, not on which other requests
share its batch. Speculative variants generate one request at a time (transformers' assisted
generation supports batch size 1 only) and sample with transformers' own sampler under the seed.

`compile` and `attn_implementation` are the variant's compile layer (change category `compile`:
evalsuite.backends.transformers_compile): the model is warmed up when it loads, its seconds are
`compile_s()`, and a setting the library refuses here is the variant's `load_error`, with the
library's reason.

Each generation records what its batch cost against its context length under `extra["cost"]`
(prefill time, peak memory, KV-cache bytes: evalsuite.backends.transformers_cost).
"""

from __future__ import annotations

import gc
import glob
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import models
from ..errors import EvalsuiteError, MissingExtraError
from ..models import formats
from ..models.quiet import quiet_libraries
from .base import Backend, Generation, Request, check_options
from .toolcalls import TOOL_CHAT_TEMPLATE as TOOL_CHAT_TEMPLATE  # re-exported: the fallback template chat_prompt uses
from .toolcalls import parse_text_calls
from .transformers_cache import parse_kv_cache, probe
from .transformers_compile import CompileLayer, CompileRun, check_combination
from .transformers_generate import BatchFacts, GenerateCall, chat_prompt, eos_ids, finished_rows
from .transformers_loader import ModelLoader, gptq_kernel
from .transformers_memory import ServingMemory, malloc_trim, weights_mb

# Library noise that would bury the runner's progress bars (evalsuite.models.quiet)
quiet_libraries()


class _DraftConfigNotice(logging.Filter):
    """Drops the one deprecation notice transformers logs about its *own* call: in draft-model
    (assisted) generation its candidate generator calls the draft's `generate` with a
    `generation_config` plus `min_new_tokens`/`max_new_tokens`. evalsuite passes its settings one way
    (keyword arguments only), so the notice says nothing the user can act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passing `generation_config` together with generation-related" not in record.getMessage()


_DRAFT_NOTICE = _DraftConfigNotice()

# torch and transformers are imported on first use (`_torch()`, `load()`), never at construction:
# the fingerprint needs only file hashes and settings, so a warm run whose every generation is a
# cache hit does not pay for them (seconds of import, more than the rest of such a run).
torch: Any = None  # the torch module, once `_torch()` imported it

log = logging.getLogger("evalsuite")

#: the options a transformers variant takes, in process or in a worker (`transformers_env`)
OPTIONS = {"device", "dtype", "threads", "cache_dir", "trust_remote_code", "compile", "attn_implementation"}
#: dtype option -> torch attribute name (resolved to a torch.dtype only when the model loads)
_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16"}
#: device nodes of a CUDA (or ROCm, WSL, Jetson) capable host: without any, torch sees no GPU
_GPU_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg", "/dev/nvhost-ctrl-gpu", "/dev/nvmap")


def _require_libs() -> None:
    """Fail naming the extra when torch or transformers is missing, without importing either."""
    import importlib.util

    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            raise MissingExtraError("the transformers backend", "models", name)


def _torch():
    """Import torch (and quiet transformers' loading bars) on first use."""
    global torch
    if torch is None:
        try:
            import torch as _t
            import transformers
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise MissingExtraError("the transformers backend", "models", exc.name or "transformers") from exc
        quiet_libraries()  # again: importing torch may have configured its loggers
        transformers.utils.logging.disable_progress_bar()  # weight-loading bars; the runner shows progress
        logging.getLogger("transformers.generation.utils").addFilter(_DRAFT_NOTICE)
        torch = _t
    return torch


def _cuda_available() -> bool:
    """torch.cuda.is_available(), answered without importing torch where no GPU device node exists."""
    if "torch" not in sys.modules and not any(os.path.exists(n) for n in _GPU_NODES) and not glob.glob("/dev/nvidia[0-9]*"):
        return False
    return bool(_torch().cuda.is_available())


def _resolve_device(device: str) -> str:
    """The device option as used: auto picks cuda when available."""
    device = str(device or "auto").lower()
    if device == "auto":
        return "cuda" if _cuda_available() else "cpu"
    if device.startswith("cuda") and not _cuda_available():
        raise EvalsuiteError("device cuda requested but CUDA is not available (torch.cuda.is_available() is False)")
    if device != "cpu" and not device.startswith("cuda"):
        raise EvalsuiteError(f"unknown device {device!r}; use cpu, cuda or auto")
    return device


def _resolve_dtype(dtype: str, device: str) -> str:
    """The dtype option as a torch attribute name: auto is float32 on CPU, bfloat16 (or float16) on CUDA."""
    dtype = str(dtype or "auto").lower()
    if dtype == "auto":
        if device == "cpu":
            return "float32"
        return "bfloat16" if _torch().cuda.is_bf16_supported() else "float16"
    if dtype not in _DTYPES:
        raise EvalsuiteError(f"unknown dtype {dtype!r}; use {', '.join(sorted(_DTYPES))} or auto")
    return _DTYPES[dtype]


class TransformersBackend(Backend):
    """Generation with a transformers causal LM; the model loads on the first `generate`."""

    name = "transformers"

    def __init__(self, variant):
        _require_libs()
        self.variant = variant
        self.options = check_options(variant, "transformers", OPTIONS)
        self.quant_method = models.quantization_method(variant.quantization)
        spec = dict(variant.speculative or {})
        self.spec_method = spec.get("method")
        if self.spec_method not in (None, "prompt_lookup", "draft"):
            raise EvalsuiteError(f"variant {variant.name!r}: unknown speculative method {self.spec_method!r}; available: prompt_lookup, draft")
        self.speculative = spec
        self.kv_cache = parse_kv_cache(getattr(variant, "kv_cache", None), variant.name)
        self.layer = CompileLayer.from_options(self.options, variant.name)  #: compile, attention implementation
        check_combination(self.layer, kv_cache_default=self.kv_cache.default, quant_method=self.quant_method, who=variant.name)
        self.cache_dir = self.options.get("cache_dir")
        self.device = _resolve_device(self.options.get("device", "auto"))
        self.dtype_name = _resolve_dtype(self.options.get("dtype", "auto"), self.device)
        self.model = None
        self.tokenizer = None
        self.draft = None
        self._identity: dict | None = None
        self._resolved: models.ResolvedModel | None = None
        self._memory = ServingMemory()
        self._model_loader: ModelLoader | None = None
        self.load_s: float | None = None
        self._compiled = CompileRun(self.layer, variant.name)  #: warm-up, recompilations, the library's refusal

    @property
    def dtype(self):
        """The torch dtype of the weights (imports torch)."""
        return getattr(_torch(), self.dtype_name)

    @property
    def resolved(self) -> models.ResolvedModel:
        """The baseline weights' directory and where it came from (a hub id resolves to a cached snapshot)."""
        if self._resolved is None:
            self._resolved = models.resolve_model(self.variant.model, getattr(self.variant, "revision", None), self.cache_dir)
        return self._resolved

    @property
    def model_dir(self) -> Path:
        return self.resolved.path

    def _draft_spec(self) -> tuple[Path, dict | None, dict | None]:
        """The draft model's directory, its quantization, and its hub source (None unless from the hub)."""
        draft = dict(self.speculative.get("draft") or {})
        model = self.speculative.get("model") or draft.get("model")
        if not model:
            return self.model_dir, draft.get("quantization"), None
        revision = self.speculative.get("revision") or draft.get("revision")
        resolved = models.resolve_model(model, revision, self.cache_dir, field="speculative.model")
        return resolved.path, draft.get("quantization"), resolved.identity() if resolved.source == "hub" else None

    def weights_identity(self) -> dict:
        """What the loaded weights are: file hashes, hub commit, derived checkpoints, device, dtype, libraries."""
        if self._identity is None:
            libs = ["torch", "transformers", *self.kv_cache.libraries()]
            ident: dict = {"model": models.model_dir_identity(self.model_dir, self.cache_dir), "device": self.device.split(":")[0], "dtype": self.dtype_name}
            if self.resolved.source == "hub":  # the commit a branch pointed to: a moved branch is a new variant
                ident["source"] = self.resolved.identity()
            q = self.variant.quantization
            if self.quant_method:
                libs.extend(formats.LIBRARIES[self.quant_method])
            if self.quant_method == "gptq":
                _, ident["gptq"], _, _ = models.gptq_plan(self.model_dir, q, self.cache_dir)
                ident["gptq"]["kernel"] = gptq_kernel(q, self.device) or "auto"
            elif self.quant_method not in (None, "bnb"):
                ident[self.quant_method] = formats.identity(self.quant_method, self.model_dir, q, self.cache_dir, self.device, self.dtype_name)
            if self.spec_method == "draft":
                draft_dir, draft_q, draft_source = self._draft_spec()
                ident["draft"] = {"model": models.model_dir_identity(draft_dir, self.cache_dir), "quantization": draft_q}
                if draft_source:
                    ident["draft"]["source"] = draft_source
                if draft_method := models.quantization_method(draft_q):
                    libs.extend(formats.LIBRARIES[draft_method])
            ident["libraries"] = models.library_identity(*dict.fromkeys(libs))
            self._identity = ident
        return self._identity

    def fingerprint(self) -> str:
        return self.variant.fingerprint(self.weights_identity())

    def engine_identity(self) -> dict:
        """The engine for the report's engine column: transformers' version, the device and dtype as resolved."""
        ident = self.weights_identity()
        out = {"engine": "transformers", "version": ident["libraries"].get("transformers"), "device": ident["device"], "dtype": ident["dtype"]}
        return out | ({"settings": self.layer.describe()} if self.layer.active else {})

    def _loader(self) -> ModelLoader:
        if self._model_loader is None:
            self._model_loader = ModelLoader(who=self.variant.name, device=self.device, dtype_name=self.dtype_name, cache_dir=self.cache_dir)
            self._model_loader.extra_kwargs = self.layer.load_kwargs()
        return self._model_loader

    def load(self) -> None:
        """Load tokenizer, model and draft model (idempotent); a compile layer is warmed up or refused for good (`load_error`)."""
        try:
            self._load()
        except EvalsuiteError:
            if self._compiled.refused is not None:  # never generated with another setting: the model goes
                self.load_error, self.model = str(self._compiled.refused), None
            raise

    def _load(self) -> None:
        self._compiled.check()
        if self.model is not None:
            return
        _torch()
        from transformers import AutoTokenizer

        from .transformers_hooks import touch

        if self.options.get("threads"):
            torch.set_num_threads(int(self.options["threads"]))
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(str(self.model_dir))
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        if not getattr(tok, "chat_template", None):
            raise EvalsuiteError(f"the tokenizer of {self.model_dir} has no chat template; evalsuite sends chat messages")
        self.tokenizer = tok
        self.model = self._compiled.load(lambda: self._loader().causal_lm(self.model_dir, self.variant.quantization))
        if self.spec_method == "draft":
            draft_dir, draft_q, _ = self._draft_spec()
            self.draft = self._loader().causal_lm(draft_dir, draft_q)
            n = self.speculative.get("num_tokens")
            if n:
                self.draft.generation_config.num_assistant_tokens = int(n)
                self.draft.generation_config.num_assistant_tokens_schedule = "constant"
        probe(self.model, self.kv_cache, self.variant.name, tok.pad_token_id)  # refused here, with the library's reason
        self.load_s = time.perf_counter() - t0
        self._compiled.warm_up(self.model, pad_token_id=tok.pad_token_id, batch_size=self.variant.generation.batch_size, device=self.device)
        model_mb = round(self.model_memory_mb() or 0.0, 1)
        # the peak is measured from here: serving memory (weights + generation), not the load-time
        # transients (bnb quantizes fp32 weights while loading) nor what earlier variants freed
        if not self.device.startswith("cuda"):
            touch(self.model, self.draft)  # weights memory-mapped from safetensors: page them in now
        self._memory.loaded(model_mb)
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        log.debug("loaded %s (%s) in %.1fs", self.variant.name, self.model_dir, self.load_s)

    def compile_s(self) -> float | None:
        """Seconds of the warm-up and of the recompilations since (None: no compile layer, or not loaded)."""
        return self._compiled.seconds

    def passes_tools(self) -> bool:  # the chat template's `tools` (chat_prompt)
        return True

    def prompt_text(self, request: Request) -> str:
        return chat_prompt(self.tokenizer, request)

    def encode(self, requests: Sequence[Request]) -> dict:
        """Left-padded input ids and attention mask for a batch of chats."""
        texts = [self.prompt_text(r) for r in requests]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(self._input_device()) for k, v in enc.items() if k in ("input_ids", "attention_mask")}

    def _input_device(self):
        try:
            return self.model.get_input_embeddings().weight.device
        except Exception:  # noqa: BLE001 - any model without plain embeddings: use the configured device
            return torch.device(self.device)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        self.load()
        if self.spec_method is not None and len(requests) > 1:
            # assisted and prompt-lookup generation in transformers support batch size 1 only
            out: list[Generation] = []
            for r in requests:
                out.extend(self._generate_batch([r]))
            return out
        return self._generate_batch(list(requests))

    def _generate_batch(self, requests: list[Request]) -> list[Generation]:
        from .transformers_cost import BatchCost
        from .transformers_hooks import FirstTokenStreamer

        first = requests[0]
        if any((r.temperature, r.top_p) != (first.temperature, first.top_p) for r in requests):
            raise EvalsuiteError("a batch mixes decoding settings; the runner batches one variant's requests only")
        enc = self.encode(requests)
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        call = self._generate_call(requests, enc)
        streamer = FirstTokenStreamer() if len(requests) == 1 else None
        t0 = time.perf_counter()
        call.start(t0)
        with self._compiled.batch() as recompiled, torch.inference_mode(), BatchCost(self.model, self._memory, self.device) as meter:
            out = self.model.generate(**enc, logits_processor=call.processors, stopping_criteria=call.stopping, streamer=streamer, **call.kwargs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        latency = time.perf_counter() - t0
        cache = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")  # `cache` from transformers 5.x on
        cost = meter.record(cache, int(enc["input_ids"].numel()))
        out = out.sequences
        if streamer is not None and streamer.first is not None:
            ttft, ttft_source = streamer.first - t0, "streamer"
        elif call.timer.first is not None:
            ttft, ttft_source = call.timer.first - t0, "first_step"
        else:
            ttft, ttft_source = None, None
        rows = finished_rows(requests, out[:, enc["input_ids"].shape[1] :].tolist(), eos_ids(self.model, self.tokenizer))
        batch = BatchFacts(
            latency=latency,
            ttft=ttft,
            size=len(requests),
            timed_out=bool(call.deadline and call.deadline.hit),
            extra={
                "ttft_source": ttft_source,
                "batch_tokens_per_s": round(sum(len(ids) for _, ids, _ in rows) / latency, 3) if latency > 0 else None,
                "device": self.device,
                "model_mb": self._memory.model_mb,
                "cost": cost,
                **({"speculative": self.spec_method} if self.spec_method else {}),
                **recompiled,
            },
        )
        return [self._generation(req, ids, finish, int(plen), batch) for (req, ids, finish), plen in zip(rows, prompt_lens)]

    def _generate_call(self, requests: list[Request], enc: dict) -> GenerateCall:
        """The keyword arguments, logits processors and stopping criteria of one `generate` call."""
        from transformers import LogitsProcessorList, StoppingCriteriaList

        from .transformers_hooks import FirstStepTimer, SeededSampler

        first = requests[0]
        timer = FirstStepTimer()
        processors = LogitsProcessorList([timer])
        kwargs: dict = {"max_new_tokens": max(r.max_new_tokens for r in requests), "pad_token_id": self.tokenizer.pad_token_id, "do_sample": False}
        # the cache object comes back with the tokens: its bytes are the KV-cache cost (transformers_cost)
        kwargs.update(self.kv_cache.generate_kwargs(), **self.layer.generate_kwargs(self.device), return_dict_in_generate=True)
        # neutral values, so a model's generation_config defaults do not leak into greedy decoding
        kwargs.update({"temperature": None, "top_p": None, "top_k": None})
        if not first.greedy:
            if self.spec_method is None:
                processors.append(SeededSampler([r.sample_seed() for r in requests], first.temperature, first.top_p, enc["input_ids"].device))
            else:
                torch.manual_seed(first.sample_seed())
                kwargs.update({"do_sample": True, "temperature": first.temperature, "top_p": first.top_p})
        if self.spec_method == "prompt_lookup":
            kwargs["prompt_lookup_num_tokens"] = int(self.speculative.get("num_tokens", 10))
            if self.speculative.get("max_ngram"):
                kwargs["max_matching_ngram_size"] = int(self.speculative["max_ngram"])
        elif self.spec_method == "draft":
            kwargs["assistant_model"] = self.draft
        return GenerateCall(kwargs, processors, StoppingCriteriaList(), timer, self.variant.generation.timeout_s)

    def _generation(self, req: Request, ids: list[int], finish: str, prompt_tokens: int, batch: BatchFacts) -> Generation:
        extra = {"token_ids": ids, **batch.extra}
        common: dict[str, Any] = {"prompt_tokens": prompt_tokens, "new_tokens": len(ids), "latency_s": batch.latency, "batch_size": batch.size, "extra": extra}
        if batch.timed_out and finish != "stop" and len(ids) < req.max_new_tokens:
            timeout = self.variant.generation.timeout_s
            return Generation(req.case_id, self.variant.name, req.sample, error=f"timed out after {timeout}s", timeout=True, finish_reason="timeout", **common)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Generation(
            case_id=req.case_id,
            variant=self.variant.name,
            sample=req.sample,
            text=text,
            tool_calls=parse_text_calls(text) if req.tools is not None else None,
            ttft_s=batch.ttft,
            tokens_per_s=len(ids) / batch.latency if batch.latency > 0 else None,
            finish_reason=finish,
            **common,
        )

    def peak_memory_mb(self) -> float | None:
        """Serving memory: the weights plus the peak working set of generation (see transformers_memory)."""
        if self.model is None:
            return None
        if self.device.startswith("cuda"):
            return max(self._memory.cuda_seen_mb, torch.cuda.max_memory_allocated() / 2**20)
        return self._memory.cpu_peak_mb()

    def model_memory_mb(self) -> float | None:
        """Bytes of the loaded weights and buffers (main model plus draft)."""
        if self.model is None:
            return None
        return weights_mb(self.model, self.draft)

    def close(self) -> None:
        if self.model is None and self.draft is None and self.tokenizer is None:
            return  # nothing was loaded (every generation came from the cache): nothing to free
        self.model = None
        self.draft = None
        self.tokenizer = None
        self._model_loader = None  # with it gptqmodel's wrapper of the model
        gc.collect()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
        malloc_trim()
