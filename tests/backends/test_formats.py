"""Quantization formats on a tiny random Llama (seconds): llm-compressor builds and compressed-tensors
loads (also by hub id), torchao and HQQ at load, AWQ built and loaded, and the refusals with their
reasons (torchao int4 and non-GEMM AWQ on CPU, a checkpoint of the wrong format, missing packages)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hubcache import add_snapshot, fake_commit  # noqa: E402

from backends.test_transformers import _backend, _requests, _save_tiny, _variant  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402
from evalsuite.models import awq, compressed, formats, ondemand  # noqa: E402

HAS = {m: importlib.util.find_spec(m) is not None for m in ("llmcompressor", "compressed_tensors", "torchao", "hqq", "gptqmodel")}


def needs(module):
    return pytest.mark.skipif(not HAS[module], reason=f"needs {module} (evalsuite extras: make setup installs it)")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def _generate(variant):
    be = _backend(variant)
    try:
        gens = be.generate(_requests(2, max_new_tokens=6))
        assert all(g.ok and g.new_tokens > 0 for g in gens), [g.error for g in gens]
        return be, gens, be.model_memory_mb()
    finally:
        be.close()


# -- settings (pure) --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, folded",
    [("bitsandbytes", "bnb"), ("LLMCompressor", "llm-compressor"), ("compressed_tensors", "compressed-tensors"), ("HQQ", "hqq"), ("awq", "awq")],
)
def test_method_spellings(method, folded):
    assert formats.quantization_method({"method": method}) == folded


def test_unknown_method_and_scheme_get_close_matches():
    with pytest.raises(EvalsuiteError, match=r"'torchoa' \(did you mean torchao"):
        formats.quantization_method({"method": "torchoa"})
    with pytest.raises(EvalsuiteError, match=r"W8A9.*did you mean W8A8"):
        compressed.llmcompressor_settings({"scheme": "W8A9"})
    with pytest.raises(EvalsuiteError, match=r"int8_weigth_only.*did you mean int8_weight_only"):
        ondemand.torchao_settings({"scheme": "int8_weigth_only"})


def test_llmcompressor_settings():
    s = compressed.llmcompressor_settings({"method": "llm-compressor", "scheme": "w4a16", "group_size": 64}, (576, 1536))
    assert s == {"scheme": "W4A16", "group_size": 64, "ignore": ["lm_head"], "algorithm": "rtn"}
    with pytest.raises(EvalsuiteError, match=r"group_size 128 must divide .* 576 \(try group_size: 64\)"):
        compressed.llmcompressor_settings({"scheme": "W4A16"}, (576, 1536))
    with pytest.raises(EvalsuiteError, match="per channel and takes no group_size"):
        compressed.llmcompressor_settings({"scheme": "W8A8", "group_size": 64})
    with pytest.raises(EvalsuiteError, match="unknown llm-compressor setting"):
        compressed.llmcompressor_settings({"scheme": "W8A8", "bits": 8})


def test_torchao_int4_is_refused_on_cpu_with_the_reason():
    with pytest.raises(EvalsuiteError) as exc:
        ondemand.torchao_settings({"scheme": "int4_weight_only"}, "cpu")
    msg = str(exc.value)
    for reason in ("Torch not compiled with CUDA enabled", "Requires mslk", "does not support device 'cpu'", "TorchAO kernel library is not loaded"):
        assert reason in msg
    assert ondemand.torchao_settings({"scheme": "int4_weight_only", "group_size": 64}, "cuda", "bfloat16") == {"scheme": "int4_weight_only", "group_size": 64}
    with pytest.raises(EvalsuiteError, match="needs dtype bfloat16"):
        ondemand.torchao_settings({"scheme": "int4_weight_only"}, "cuda", "float16")


def test_hqq_and_awq_settings():
    assert ondemand.hqq_settings({"method": "hqq"}) == {"bits": 4, "group_size": 64, "axis": 1}
    with pytest.raises(EvalsuiteError, match="must be one of 1, 2, 3, 4, 8"):
        ondemand.hqq_settings({"bits": 5})
    assert awq.awq_settings({"method": "awq", "group_size": 64}, 576)["group_size"] == 64
    with pytest.raises(EvalsuiteError, match="only apply when evalsuite quantizes"):
        awq.awq_settings({"method": "awq", "checkpoint": "org/x", "bits": 4})
    with pytest.raises(EvalsuiteError, match=r"must divide .* 576"):
        awq.awq_settings({"method": "awq"}, 576)


def test_missing_packages_name_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("llmcompressor", "hqq") else real(name, *a))
    why = formats.missing_requirement({"method": "llm-compressor", "scheme": "W8A8"})
    assert "pip install --no-deps llmcompressor==0.14.0.1" in why
    assert formats.missing_requirement({"method": "hqq"}) == "needs hqq: pip install 'evalsuite[hqq]'"
    with pytest.raises(EvalsuiteError, match="pins transformers<=5.17.0"):
        compressed.require_llmcompressor()


# -- llm-compressor -> compressed-tensors -------------------------------------------------------------
@pytest.fixture(scope="module")
def w8a8(tiny, cache):
    if not (HAS["llmcompressor"] and HAS["compressed_tensors"]):
        pytest.skip("needs llmcompressor and compressed-tensors")
    return compressed.llmcompressor_checkpoint(tiny, {"method": "llm-compressor", "scheme": "W8A8"}, cache)


def test_llmcompressor_builds_once_and_caches(w8a8, tiny, cache):
    qc = compressed.require_compressed_checkpoint(w8a8, "built")
    assert qc["config_groups"]["group_0"]["input_activations"]["dynamic"] is True
    assert (w8a8 / "quantize.log").is_file() and (w8a8 / "tokenizer.json").is_file()
    t = (w8a8 / "model.safetensors").stat().st_mtime_ns
    assert compressed.llmcompressor_checkpoint(tiny, {"method": "llm-compressor", "scheme": "W8A8"}, cache) == w8a8
    assert (w8a8 / "model.safetensors").stat().st_mtime_ns == t, "a cached checkpoint is not rebuilt"
    assert not formats.weight_only(w8a8)


def test_llmcompressor_variant_generates_and_fingerprints_its_settings(w8a8, tiny, cache):
    q = {"method": "llm-compressor", "scheme": "W8A8"}
    be, gens, _ = _generate(_variant(tiny, cache, quantization=q))
    ident = be.weights_identity()
    assert ident["llm-compressor"]["settings"]["scheme"] == "W8A8"
    assert ident["libraries"]["llmcompressor"] and ident["libraries"]["compressed-tensors"]
    other = _backend(_variant(tiny, cache, quantization=dict(q, scheme="FP8_DYNAMIC")))
    assert other.fingerprint() != be.fingerprint()


@needs("llmcompressor")
def test_weight_only_scheme_loads_dequantized(tiny, cache):
    q = {"method": "llm-compressor", "scheme": "W4A16", "group_size": 32}
    ckpt = compressed.llmcompressor_checkpoint(tiny, q, cache)
    assert formats.weight_only(ckpt)
    be, gens, _ = _generate(_variant(tiny, cache, quantization=q))


def test_compressed_tensors_checkpoint_by_hub_id(w8a8, tiny, cache, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    add_snapshot(hub, "org/tiny-W8A8", w8a8, fake_commit("ct"))
    q = {"method": "compressed-tensors", "checkpoint": "org/tiny-W8A8"}
    be, gens, _ = _generate(_variant(tiny, cache, quantization=q))
    assert be.weights_identity()["compressed-tensors"]["source"] == {"source": "hub", "repo_id": "org/tiny-W8A8", "commit": fake_commit("ct")}


def test_compressed_tensors_refuses_another_format(tiny, cache):
    be = _backend(_variant(tiny, cache, quantization={"method": "compressed-tensors", "checkpoint": str(tiny)}))
    with pytest.raises(EvalsuiteError, match="is not a compressed-tensors checkpoint: it has no quantization_config"):
        be.generate(_requests(1))
    with pytest.raises(EvalsuiteError, match="to build one from the baseline use"):
        compressed.checkpoint_settings({"method": "compressed-tensors"})


# -- torchao, hqq -------------------------------------------------------------------------------------
@needs("torchao")
@pytest.mark.parametrize("scheme", ["int8_weight_only", "int8_dynamic"])
def test_torchao_generates_smaller(tiny, cache, scheme):
    _, _, fp32_mb = _generate(_variant(tiny, cache))
    be, gens, mb = _generate(_variant(tiny, cache, quantization={"method": "torchao", "scheme": scheme}))
    assert mb < fp32_mb, "torchao's int8 tensors are counted at their stored size"
    assert be.weights_identity()["torchao"] == {"scheme": scheme} and be.weights_identity()["libraries"]["torchao"]


@needs("hqq")
def test_hqq_generates(tiny, cache):
    be, gens, mb = _generate(_variant(tiny, cache, quantization={"method": "hqq", "bits": 4, "group_size": 32}))
    assert be.weights_identity()["hqq"] == {"bits": 4, "group_size": 32, "axis": 1}
    assert be.weights_identity()["libraries"]["hqq"]


# -- AWQ ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_mha(tmp_path_factory):
    """The tiny Llama with as many key/value heads as heads: gptqmodel's AWQ needs every layer's
    output width to be a multiple of 64."""
    from transformers import AutoConfig, LlamaForCausalLM

    src = _save_tiny(tmp_path_factory.mktemp("tiny-mha") / "model")
    cfg = AutoConfig.from_pretrained(src)
    cfg.num_key_value_heads = cfg.num_attention_heads
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(str(src))
    return src


@pytest.fixture(scope="module")
def awq_ckpt(tiny_mha, cache):
    if not HAS["gptqmodel"]:
        pytest.skip("needs gptqmodel")
    return awq.awq_checkpoint(tiny_mha, {"method": "awq", "bits": 4, "group_size": 32, "calibration_samples": 8}, cache)


def test_awq_built_by_gptqmodel_loads_and_generates_on_cpu(awq_ckpt, tiny_mha, cache):
    assert awq.checkpoint_format(awq_ckpt) == "gemm" and (awq_ckpt / "quantize.log").is_file()
    built = {"method": "awq", "bits": 4, "group_size": 32, "calibration_samples": 8}
    be, gens, _ = _generate(_variant(tiny_mha, cache, quantization=built))  # the cached build, not built again
    assert be.weights_identity()["awq"]["awq_key"] and be.weights_identity()["libraries"]["gptqmodel"]
    be, gens, _ = _generate(_variant(tiny_mha, cache, quantization={"method": "awq", "checkpoint": str(awq_ckpt)}))
    assert be.weights_identity()["awq"]["checkpoint"]["files"] >= 3


def test_awq_quantizer_failure_is_an_error_not_an_exit(tiny, cache):
    """gptqmodel ends its process on a failing step (os._exit): the child dies, evalsuite reports it."""
    with pytest.raises(EvalsuiteError, match=r"(?s)AWQ quantization .* failed \(exit 1\).*oc_batch_size"):
        awq.awq_checkpoint(tiny, {"method": "awq", "bits": 4, "group_size": 32, "calibration_samples": 4}, cache)


def test_awq_non_gemm_packing_is_refused_on_cpu_with_the_reason(awq_ckpt, tiny, cache, tmp_path):
    gemv = tmp_path / "gemv_fast"
    shutil.copytree(awq_ckpt, gemv)
    cfg = json.loads((gemv / "config.json").read_text())
    cfg["quantization_config"].update(version="gemv_fast", format="gemv_fast", checkpoint_format="gemv_fast")
    (gemv / "config.json").write_text(json.dumps(cfg))
    be = _backend(_variant(tiny, cache, quantization={"method": "awq", "checkpoint": str(gemv)}))
    with pytest.raises(EvalsuiteError, match=r"packed as 'gemv_fast'.*CUDA/ROCm only.*GEMM packing only"):
        be.generate(_requests(1))


def test_vllm_takes_compressed_tensors_checkpoints_and_llmcompressor_builds():
    from evalsuite.backends.vllm import quantization_args

    assert quantization_args({"method": "compressed-tensors", "checkpoint": "Org/M-W8A8", "revision": "v1"}) == (
        {"quantization": "compressed-tensors"},
        "Org/M-W8A8",
    )
    assert quantization_args({"method": "llm-compressor", "scheme": "W8A8"}) == ({"quantization": "compressed-tensors"}, None)
    with pytest.raises(EvalsuiteError, match="unknown llm-compressor scheme"):
        quantization_args({"method": "llm-compressor", "scheme": "W9A9"})
    with pytest.raises(EvalsuiteError, match="unknown vllm quantization setting"):
        quantization_args({"method": "compressed-tensors", "scheme": "W8A8"})
