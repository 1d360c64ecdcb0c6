"""The engine column (evalsuite.models.engines): engine, version and settings per variant, for every backend kind."""

from __future__ import annotations

import pytest

from evalsuite.models.engines import engine_row, engine_text, variant_engines

_VLLM_OPTS = {"dtype": "bfloat16", "max_model_len": 2048, "enforce_eager": True, "seed": 0}
#: what VLLMBackend.engine_identity() records (its engine arguments, as the fingerprint holds them)
_VLLM_KV = {"engine": "vllm", "version": "0.32.0", "device": "cpu", "settings": {"dtype": "bfloat16", "max_model_len": 2048, "kv_cache_dtype": "fp8"}}
_VLLM_NGRAM = {
    "engine": "vllm",
    "version": "0.32.0",
    "device": "cpu",
    "settings": {"dtype": "bfloat16", "speculative_config": {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}},
}


def v(backend: str, **kw) -> dict:
    return {"name": "x", "backend": backend} | kw


@pytest.mark.parametrize(
    "variant, engine, libraries, text",
    [
        (v("fake"), {"engine": "fake"}, {}, "fake"),
        (v("fake"), None, {}, "fake"),
        (
            v("transformers", options={"device": "cpu", "dtype": "float32"}, quantization={"method": "bnb", "bits": 8}),
            {"engine": "transformers", "version": "5.24.0", "device": "cpu", "dtype": "float32"},
            {},
            "transformers 5.24.0 · cpu · fp32 · bnb-int8",
        ),
        (
            v("transformers", options={"dtype": "bfloat16"}, speculative={"method": "prompt_lookup", "num_tokens": 10}),
            None,
            {"transformers": "5.24.0"},  # a run that recorded no engine: the run's library version
            "transformers 5.24.0 · bf16 · speculative prompt_lookup k=10",
        ),
        (  # its own environment (issue 42): the version installed there, and what was asked
            v("transformers", options={"device": "cpu"}, environment={"requirements": ["transformers==5.25.0"]}),
            {"engine": "transformers", "version": "5.25.1", "device": "cpu", "dtype": "float32", "environment": "transformers==5.25.0"},
            {"transformers": "5.24.0"},
            "transformers 5.25.1 · cpu · fp32 · env transformers==5.25.0",
        ),
        (v("transformers", environment={"python": "/opt/tf/bin/python"}), None, {}, "transformers ? · auto · env python /opt/tf/bin/python"),
        (
            v("transformers", options={"dtype": "float32"}, quantization={"method": "llm-compressor", "scheme": "W8A8"}),
            {"engine": "transformers", "version": "5.24.0", "device": "cpu", "dtype": "float32"},
            {},
            "transformers 5.24.0 · cpu · fp32 · llm-compressor W8A8 (rtn)",
        ),
        (
            v("vllm", options=_VLLM_OPTS, quantization={"kv_cache_dtype": "fp8"}),
            _VLLM_KV,
            {},
            "vllm 0.32.0 · cpu · bf16 · kv_cache_dtype=fp8 · max_model_len=2048",
        ),
        (v("vllm", options=_VLLM_OPTS), _VLLM_NGRAM, {}, "vllm 0.32.0 · cpu · bf16 · speculative ngram k=5"),
        (
            v("vllm", options=dict(_VLLM_OPTS, engine_args={"enable_prefix_caching": True}), quantization={"method": "llm-compressor", "scheme": "w8a8"}),
            None,  # nothing recorded: the spec says what it can, the version is unknown
            {},
            "vllm ? · bf16 · compressed-tensors W8A8 · max_model_len=2048 · enforce_eager · seed=0 · enable_prefix_caching",
        ),
        (
            v("vllm", options=_VLLM_OPTS, speculative={"method": "draft", "model": "/models/draft-135m", "num_tokens": 3}),
            None,
            {},
            "vllm ? · bf16 · speculative draft k=3 (draft-135m) · max_model_len=2048 · enforce_eager · seed=0",
        ),
        (
            v("http", options={"serve": {"launcher": "vllm", "args": ["--max-num-seqs", "4"]}}),
            {"engine": "vllm", "version": "0.32.0", "device": "cpu"},
            {},
            "vllm server 0.32.0 · cpu · --max-num-seqs 4",
        ),
        (
            v("http", options={"serve": {"launcher": "transformers", "continuous_batching": True}}),
            None,
            {"transformers": "5.24.0"},
            "transformers serve 5.24.0 · continuous batching",
        ),
        (v("http", model="m-awq", options={"base_url": "http://gpu:8000/v1"}), {"engine": "http"}, {}, "http · http://gpu:8000/v1 · model m-awq"),
    ],
)
def test_engine_text_per_backend(variant, engine, libraries, text):
    assert engine_text(engine_row(variant, engine, libraries)) == text


def test_variant_engines_reads_the_signature_and_the_weights_libraries():
    variants = [v("transformers", name="base", options={"dtype": "float32"}), v("vllm", name="kv", options=_VLLM_OPTS, quantization={"kv_cache_dtype": "fp8"})]
    sig = {"engines": {"kv": _VLLM_KV}, "libraries": {"transformers": "5.0"}, "weights": {"base": {"libraries": {"transformers": "5.24.0"}}}}
    assert variant_engines(variants, sig) == {"base": "transformers 5.24.0 · fp32", "kv": "vllm 0.32.0 · cpu · bf16 · kv_cache_dtype=fp8 · max_model_len=2048"}


_TF_ENGINE = {"engine": "transformers", "version": "5.24.0", "device": "cpu", "dtype": "float32"}


@pytest.mark.parametrize(
    "variant, engine, text",
    [
        (
            v("transformers", options={"device": "cpu", "compile": {"mode": "default"}, "attn_implementation": "eager"}),
            _TF_ENGINE,
            "transformers 5.24.0 · cpu · fp32 · compile=default · attn=eager",
        ),
        (
            v("transformers", options={"compile": {"mode": "max-autotune", "fullgraph": True}}),
            _TF_ENGINE,
            "transformers 5.24.0 · cpu · fp32 · compile=max-autotune fullgraph",
        ),
        (v("transformers", options={"attn_implementation": "sdpa", "threads": 2}), _TF_ENGINE, "transformers 5.24.0 · cpu · fp32 · attn=sdpa · threads=2"),
        (
            v("vllm", options={"dtype": "bfloat16", "enforce_eager": False, "compilation_config": {"mode": 3, "cudagraph_mode": "NONE"}}),
            {
                "engine": "vllm",
                "version": "0.32.0",
                "device": "cpu",
                "settings": {"dtype": "bfloat16", "enforce_eager": False, "compilation_config": {"mode": 3, "cudagraph_mode": "NONE"}},
            },
            "vllm 0.32.0 · cpu · bf16 · enforce_eager=false · compilation_config mode=3,cudagraph_mode=NONE",
        ),
        (v("vllm", options={"dtype": "bfloat16", "batch_invariant": True}), None, "vllm ? · bf16 · batch_invariant"),
    ],
)
def test_the_compile_layer_is_in_the_engine_column(variant, engine, text):
    """A compile variant's engine says how its forward runs, so two rows of one engine are told apart."""
    assert engine_text(engine_row(variant, engine, {})) == text
