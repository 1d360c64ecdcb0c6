"""The vllm backend: offline batched generation with `vllm.LLM.chat`, on a CUDA GPU or a CPU.

Where `import vllm` works in evalsuite's own environment (vLLM installed beside evalsuite on a GPU
machine), the engine runs in this process; otherwise in a worker process in vLLM's own environment
(`make vllm` builds `.venv-vllm`; `EVALSUITE_VLLM_PYTHON` names another interpreter):
`evalsuite.backends.vllm_env`. Both run the same engine code (`vllm_worker.Engine`).

Options (under a variant's `options`):

- `dtype`: auto, bfloat16, float16, float32 (default auto)
- `gpu_memory_utilization`: share of GPU memory vLLM may reserve (default 0.9; the KV cache is
  preallocated from it, so peak memory follows this setting more than the model)
- `cpu_kvcache_space_gib`: on a CPU, the KV cache's size in GiB (`VLLM_CPU_KVCACHE_SPACE`; default 2)
- `max_model_len`, `tensor_parallel_size`, `pipeline_parallel_size`, `max_num_seqs`,
  `enforce_eager`, `seed`: passed to `vllm.LLM` (tensor parallelism splits each layer over the
  GPUs of one node; pipeline parallelism splits the layers, also across nodes)
- `engine_args`: a mapping of further `vllm.LLM` keyword arguments, passed through
- `compilation_config`: vLLM's compilation settings (a mapping of `CompilationConfig` fields, or its
  integer mode), passed to `vllm.LLM`; with `enforce_eager: false` (vLLM's default) the engine
  compiles the model when it starts, and the seconds vLLM reports for it are `compile_s()`
- `batch_invariant`: true runs the engine with `VLLM_BATCH_INVARIANT=1` (outputs that do not depend
  on batch composition, where vLLM's build supports it; where it does not, vLLM's start fails with
  its reason and the variant is refused). `enforce_eager`, `compilation_config` and
  `batch_invariant` are the variant's compile layer: change category `compile`
- `cache_dir`: where the embedded model is converted (as for the transformers backend)
- `trust_remote_code`: not supported (a suite must not run code shipped with a model)

Variant fields used: `model` (a local directory, a hub id with `revision`, or "embedded");
`quantization` `{method: gptq|awq|fp8|bitsandbytes|compressed-tensors|..., checkpoint: DIR_OR_ID,
revision: REV, kv_cache_dtype: fp8, kernel: marlin}`, or `{method: llm-compressor, scheme: W8A8,
...}` (the checkpoint is built on the CPU first, as for the transformers backend, then served)
(gptq and awq need a quantized checkpoint: `checkpoint`, else `model` must be one; `kernel:
marlin` asks for vLLM's Marlin kernels, `gptq_marlin`/`awq_marlin`, which can change outputs
against the plain ones); `speculative` `{method: ngram, num_tokens: 5, prompt_lookup_max: 4,
prompt_lookup_min: 1}` (`prompt_lookup` with `max_ngram`, the transformers backend's spelling,
means the same), `{method: draft, model: DIR, num_tokens: 5, draft_tensor_parallel_size: 1}`,
`{method: eagle|eagle3|mlp_speculator, model: DIR, num_tokens: 3}` (a trained draft head) or
`{method: mtp, num_tokens: 1}` (the model's own multi-token-prediction layers).

Each request carries its own `SamplingParams(seed=Request.sample_seed())`, so a sample depends on
its seed, not on its batch. Greedy requests use temperature 0.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import models
from ..cases.compile_options import check_vllm_compile
from ..errors import EvalsuiteError
from ..models import compressed
from . import vllm_env
from .base import Backend, Generation, Request, check_options
from .toolcalls import TOOL_CHAT_TEMPLATE, parse_text_calls
from .vllm_metrics import from_samples, metrics_delta

_PASSED = ("max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs", "enforce_eager", "seed")
_OPTIONS = {
    "dtype",
    "gpu_memory_utilization",
    "cpu_kvcache_space_gib",
    "engine_args",
    "cache_dir",
    "trust_remote_code",
    "compilation_config",
    "batch_invariant",
    *_PASSED,
}
_QUANT_KEYS = {"method", "checkpoint", "revision", "kv_cache_dtype", "kernel"}
#: llm-compressor settings (the checkpoint evalsuite builds): evalsuite.models.compressed
_LLMC_KEYS = {"scheme", "group_size", "ignore", "algorithm", "calibration", "calibration_samples", "dampening_frac"}
_KERNELS = {"marlin": {"gptq": "gptq_marlin", "awq": "awq_marlin"}}
#: draft-head methods that need a `model` (the head's checkpoint), as vLLM names them
_HEAD_METHODS = ("eagle", "eagle3", "mlp_speculator")
#: evalsuite's spellings -> vLLM's `quantization` names (others are passed as given)
_QUANT_NAMES = {
    "bnb": "bitsandbytes",
    "bitsandbytes": "bitsandbytes",
    "gptq": "gptq",
    "awq": "awq",
    "fp8": "fp8",
    "compressed-tensors": "compressed-tensors",
    "llm-compressor": "compressed-tensors",
    "llmcompressor": "compressed-tensors",
}
_PRECOMPUTED = {"gptq", "awq", "gptq_marlin", "awq_marlin", "compressed-tensors", "marlin"}  #: need a quantized checkpoint
_DEFAULT_SPEC_TOKENS = 5


def quantization_args(q: dict | None) -> tuple[dict, str | None]:
    """vLLM `LLM` keyword arguments for a variant's quantization, and the checkpoint to load instead."""
    if not q:
        return {}, None
    method = str(q.get("method") or "").lower()
    unknown = set(q) - _QUANT_KEYS - (_LLMC_KEYS if method in ("llm-compressor", "llmcompressor") else set())
    if unknown:
        raise EvalsuiteError(f"unknown vllm quantization setting(s) {sorted(unknown)}; known: {', '.join(sorted(_QUANT_KEYS))}")
    if method in ("llm-compressor", "llmcompressor"):
        compressed.llmcompressor_settings(q)  # validated before anything starts
    if not method and not q.get("kv_cache_dtype"):
        raise EvalsuiteError("quantization needs a `method` (gptq, awq, fp8, bitsandbytes...) or a `kv_cache_dtype`")
    args: dict[str, Any] = {}
    if method:
        args["quantization"] = _QUANT_NAMES.get(method, method)
    kernel = q.get("kernel")
    if kernel is not None:
        name = _KERNELS.get(str(kernel), {}).get(args.get("quantization", ""))
        if name is None:
            raise EvalsuiteError(f"quantization kernel {kernel!r} does not apply to method {method!r}; known: marlin (for gptq and awq)")
        args["quantization"] = name
    if q.get("kv_cache_dtype"):
        args["kv_cache_dtype"] = str(q["kv_cache_dtype"])
    return args, q.get("checkpoint")


def speculative_config(spec: dict | None, resolve=lambda m: m) -> dict | None:
    """vLLM's `speculative_config` for a variant's speculative settings (`resolve` maps a draft model to a path)."""
    if not spec:
        return None
    method = spec.get("method")
    tokens = int(spec.get("num_tokens", _DEFAULT_SPEC_TOKENS))
    if method in ("ngram", "prompt_lookup"):
        cfg: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": tokens}
        lookup_max = spec.get("prompt_lookup_max", spec.get("max_ngram"))
        if lookup_max is not None:
            cfg["prompt_lookup_max"] = int(lookup_max)
        if spec.get("prompt_lookup_min") is not None:
            cfg["prompt_lookup_min"] = int(spec["prompt_lookup_min"])
        return cfg
    if method in ("draft", *_HEAD_METHODS):
        draft = spec.get("model") or (spec.get("draft") or {}).get("model")
        if not draft:
            raise EvalsuiteError(f"speculative method {method} needs `model` (the {'draft model' if method == 'draft' else 'draft head'} directory)")
        cfg = {"method": "draft_model" if method == "draft" else method, "model": str(resolve(draft)), "num_speculative_tokens": tokens}
        if spec.get("draft_tensor_parallel_size") is not None:
            cfg["draft_tensor_parallel_size"] = int(spec["draft_tensor_parallel_size"])
        return cfg
    if method == "mtp":
        return {"method": "mtp", "num_speculative_tokens": tokens}
    raise EvalsuiteError(
        f"unknown speculative method {method!r} for the vllm backend; available: ngram (or prompt_lookup), draft, {', '.join(_HEAD_METHODS)}, mtp"
    )


class VLLMBackend(Backend):
    """Generation with `vllm.LLM`, in this process or in a worker (`vllm_env`); the engine starts on the first `generate`."""

    name = "vllm"

    def __init__(self, variant):
        self.variant = variant
        self.options = check_options(variant, "vllm", _OPTIONS)
        check_vllm_compile(self.options, variant.name)
        self.quant_args, checkpoint = quantization_args(variant.quantization)
        self.cache_dir = self.options.get("cache_dir")
        self.spec_config = speculative_config(variant.speculative, self._resolve)  # validated before any import
        self.python = vllm_env.locate()  #: None: vLLM in this process; else the worker's interpreter
        self.resolved = models.resolve_model(variant.model, getattr(variant, "revision", None), self.cache_dir)
        self._llmc: dict | None = None  #: the llm-compressor checkpoint's identity, when evalsuite builds one
        if checkpoint:
            q = variant.quantization or {}
            self.model_dir = models.resolve_model_dir(str(checkpoint), self.cache_dir, q.get("revision"), field="quantization.checkpoint")
        elif str((variant.quantization or {}).get("method") or "").lower() in ("llm-compressor", "llmcompressor"):
            self.model_dir, self._llmc, _, _ = compressed.llmcompressor_plan(self.resolved.path, variant.quantization, self.cache_dir)
        else:
            self.model_dir = self.resolved.path
        self.engine: vllm_env.EngineHandle | None = None
        self._load_error: EvalsuiteError | None = None
        self._peak_mb: float | None = None
        self._identity: dict | None = None
        self._metrics_before: dict | None = None  #: vLLM's counters when the engine had started

    def _resolve(self, model: str) -> Path:
        spec = self.variant.speculative or {}
        revision = spec.get("revision") or (spec.get("draft") or {}).get("revision")
        return models.resolve_model_dir(model, self.options.get("cache_dir"), revision, field="speculative.model")

    def engine_args(self) -> dict:
        """Keyword arguments for `vllm.LLM`."""
        args: dict[str, Any] = {"model": str(self.model_dir), "dtype": self.options.get("dtype", "auto")}
        if self.options.get("gpu_memory_utilization") is not None:
            args["gpu_memory_utilization"] = float(self.options["gpu_memory_utilization"])
        for k in _PASSED:
            if self.options.get(k) is not None:
                args[k] = self.options[k]
        if self.options.get("compilation_config") is not None:
            args["compilation_config"] = self.options["compilation_config"]
        args.update(self.quant_args)
        if self.spec_config:
            args["speculative_config"] = self.spec_config
        args.update(self.options.get("engine_args") or {})
        return args

    def fingerprint(self) -> str:
        if self._identity is None:
            model = self._llmc if self._llmc is not None else models.model_dir_identity(self.model_dir, self.cache_dir)
            ident: dict[str, Any] = {
                "model": model,
                "engine": {k: v for k, v in self.engine_args().items() if k != "model"},
                "env": self._engine_env(),
                # vLLM's version and device as its environment reports them (the worker's, not this process's)
                "vllm": vllm_env.probe(self.python),
            }
            if self.python is None:
                ident["libraries"] = models.library_identity("vllm", "torch")
            if self.resolved.source == "hub":
                ident["source"] = self.resolved.identity()
            if self.spec_config and "model" in self.spec_config:
                ident["engine"]["speculative_config"] = dict(self.spec_config, model=models.model_dir_identity(Path(self.spec_config["model"]), self.cache_dir))
            self._identity = ident
        return self.variant.fingerprint(self._identity)

    def engine_identity(self) -> dict:
        """The engine for the report's engine column: vLLM's version and device as its environment
        reports them, and the engine arguments it starts with (a draft model by its folder's name)."""
        probe = vllm_env.probe(self.python) or {}
        args = {k: v for k, v in self.engine_args().items() if k != "model"}
        if isinstance(args.get("speculative_config"), dict) and args["speculative_config"].get("model"):
            args["speculative_config"] = dict(args["speculative_config"], model=Path(str(args["speculative_config"]["model"])).name)
        if self.options.get("batch_invariant"):
            args["batch_invariant"] = True  # an environment variable of the engine, not an argument: shown with them
        return {"engine": "vllm", "dist": probe.get("dist"), "version": probe.get("version"), "device": probe.get("device"), "settings": args}

    def environment(self) -> dict:
        """vLLM's environment (`.venv-vllm`, or this process where vllm imports here), not evalsuite's."""
        return vllm_env.environment(self.python)

    def load(self) -> vllm_env.EngineHandle:
        """Start the engine once; a failed start is remembered (each batch then fails at once with vLLM's reason)."""
        if self._load_error is not None:
            raise self._load_error
        if self.engine is None:
            if self._llmc is not None:  # built once on the CPU, cached, then served
                compressed.llmcompressor_checkpoint(self.resolved.path, self.variant.quantization, self.cache_dir)
            try:
                self.engine = vllm_env.start_engine(self.python, self.engine_args(), self._engine_env())
            except EvalsuiteError as exc:
                self._load_error = EvalsuiteError(f"variant {self.variant.name!r}: {exc}")
                self.load_error = str(self._load_error)  # the variant cannot be judged; the others go on
                raise self._load_error from None
            self._metrics_before = self._read_metrics()
        return self.engine

    def _read_metrics(self) -> dict | None:
        if self.engine is None:
            return None
        try:
            samples = self.engine.metrics()
        except EvalsuiteError:
            return None
        return None if samples is None else from_samples(samples)

    def engine_metrics(self) -> dict | None:
        """What vLLM's own counters say of this variant since the engine started: requests, mean
        TTFT and queue time, prefix-cache hits, preemptions, speculative acceptance (None: no engine)."""
        return metrics_delta(self._metrics_before, self._read_metrics())

    def _engine_env(self) -> dict:
        space = self.options.get("cpu_kvcache_space_gib")
        env = {} if space is None else {"VLLM_CPU_KVCACHE_SPACE": str(space)}
        if self.options.get("batch_invariant"):
            env["VLLM_BATCH_INVARIANT"] = "1"
        return env

    def compile_s(self) -> float | None:
        """The seconds vLLM reports for compiling the model when its engine started (None: it did
        not compile, `enforce_eager: true`, or the engine has not started)."""
        return None if self.engine is None else self.engine.compile_s()

    def engine_info(self) -> dict:
        """What the engine reports about itself (version, device, dtype, kernel, engine arguments)."""
        return dict(self.load().info)

    def passes_tools(self) -> bool:
        """Tools go to `llm.chat(tools=...)`, with TOOL_CHAT_TEMPLATE where the model's template has none."""
        return True

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        engine = self.load()
        payload = [
            {
                "messages": [{"role": role, "content": content} for role, content in r.messages],
                "max_tokens": r.max_new_tokens,
                "temperature": 0.0 if r.greedy else r.temperature,
                "top_p": 1.0 if r.greedy else r.top_p,
                "seed": r.sample_seed(),
                **({"tools": r.tool_list(), "tool_template": TOOL_CHAT_TEMPLATE} if r.tools is not None else {}),
            }
            for r in requests
        ]
        t0 = time.perf_counter()
        outputs = engine.generate(payload)
        latency = time.perf_counter() - t0
        self._note_memory()
        return [self._generation(req, out, latency, requests, outputs) for req, out in zip(requests, outputs)]

    def _generation(self, req: Request, out: dict, latency: float, requests: Sequence[Request], outputs: list[dict]) -> Generation:
        total_new = sum(len(o.get("token_ids") or []) for o in outputs)
        ids = list(out.get("token_ids") or [])
        info = self.engine.info if self.engine is not None else {}
        extra: dict[str, Any] = {
            "token_ids": ids,
            "batch_tokens_per_s": round(total_new / latency, 3) if latency > 0 else None,
            "engine_s": out.get("latency_s"),  # the batch's `llm.chat` time in the engine (latency adds the pipe)
            "ttft_source": out.get("ttft_source"),
            "queue_s": out.get("queue_s"),
            "preemptions": out.get("preemptions"),
            "engine": {k: info.get(k) for k in ("vllm", "device", "dtype", "kernel", "kv_cache_dtype")},
        }
        if self.spec_config:
            extra["speculative"] = self.spec_config["method"]
        common: dict[str, Any] = {
            "case_id": req.case_id,
            "variant": self.variant.name,
            "sample": req.sample,
            "prompt_tokens": out.get("prompt_tokens"),
            "new_tokens": len(ids),
            "latency_s": latency,
            "batch_size": len(requests),
            "extra": extra,
        }
        if out.get("error"):
            return Generation(**common, error=f"vLLM refused the request: {out['error']}", finish_reason="error")
        timeout = self.variant.generation.timeout_s
        if timeout is not None and latency > timeout:  # an offline batch cannot be cut short
            return Generation(**common, error=f"timed out after {timeout}s", timeout=True, finish_reason="timeout")
        return Generation(
            **common,
            text=out["text"],
            tool_calls=parse_text_calls(out["text"]) if req.tools is not None else None,  # the Hermes format the tool template asks for
            ttft_s=out.get("ttft_s"),
            tokens_per_s=len(ids) / latency if latency > 0 else None,
            finish_reason=out.get("finish_reason"),
        )

    def _note_memory(self) -> None:
        # only in this process and on CUDA: vLLM's engine may run in a child process (V1), so the
        # device-wide use (all processes) is the honest figure; a CPU worker reports none
        torch = sys.modules.get("torch")
        if self.python is not None or torch is None or not torch.cuda.is_available():
            return
        mb = torch.cuda.max_memory_allocated() / 2**20
        if mb <= 0:
            free, total = torch.cuda.mem_get_info()
            mb = (total - free) / 2**20
        self._peak_mb = max(self._peak_mb or 0.0, mb)

    def peak_memory_mb(self) -> float | None:
        """Peak GPU memory during generation (includes the KV cache vLLM preallocates); None on CPU."""
        return self._peak_mb

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()
        gc.collect()
