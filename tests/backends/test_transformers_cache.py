"""KV-cache variants of the transformers backend on a tiny random Llama: the cache `generate` builds,
the fingerprint, the library's refusals, and the per-generation cost records."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from backends.test_transformers import _backend, _requests, _save_tiny, _variant  # noqa: E402
from evalsuite.backends.transformers_cache import KVCacheSettings, parse_kv_cache, refusal  # noqa: E402
from evalsuite.backends.transformers_cost import cache_bytes  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402

HQQ4 = {"implementation": "quantized", "backend": "hqq", "nbits": 4}
HQQ2 = {"implementation": "quantized", "backend": "hqq", "nbits": 2}
FP8 = {"implementation": "quantized", "backend": "fp8"}
OFFLOADED = {"implementation": "offloaded"}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _save_tiny(tmp_path_factory.mktemp("tinykv") / "model")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cachekv"))


def _kv_backend(tiny_dir, cache_dir, kv_cache, **kw):
    return _backend(_variant(tiny_dir, cache_dir, kv_cache=kv_cache, batch_size=1, **kw))


@pytest.fixture(scope="module")
def baseline(tiny_dir, cache_dir):
    be = _kv_backend(tiny_dir, cache_dir, None)
    yield be
    be.close()


@pytest.mark.parametrize(
    "raw, implementation, config",
    [
        (None, "dynamic", {}),
        ({"implementation": "offloaded"}, "offloaded", {}),
        (HQQ4, "quantized", {"backend": "hqq", "nbits": 4}),
        ({"backend": "HQQ", "nbits": 2, "residual_length": 16}, "quantized", {"backend": "hqq", "nbits": 2, "residual_length": 16}),
        (FP8, "quantized", {"backend": "fp8"}),
    ],
)
def test_kv_cache_settings_parse(raw, implementation, config):
    s = parse_kv_cache(raw, "v")
    assert (s.implementation, s.config) == (implementation, config)
    kwargs = s.generate_kwargs()
    assert kwargs.get("cache_implementation") == (None if implementation == "dynamic" else implementation)
    assert kwargs.get("cache_config", {}) == config


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"implementation": "quantised"}, "kv_cache.implementation: unknown cache 'quantised' (did you mean 'quantized'?)"),
        ({"implementation": "quantized"}, "kv_cache.backend: a quantized cache needs a backend"),
        ({"backend": "hqq", "bits": 4}, "kv_cache.bits: unknown setting (did you mean 'nbits'?)"),
        ({"backend": "hqq", "nbits": "four"}, "kv_cache.nbits: expected an integer"),
        ({"implementation": "offloaded", "nbits": 4}, "kv_cache.nbits: only a quantized cache takes"),
    ],
)
def test_bad_kv_cache_settings_name_the_variant_and_field(raw, field):
    with pytest.raises(EvalsuiteError) as e:
        parse_kv_cache(raw, "kv-bad")
    assert "variant 'kv-bad'" in str(e.value) and field in str(e.value)


def test_each_cache_setting_is_in_the_fingerprint(tiny_dir, cache_dir, baseline):
    fps = {
        name: _kv_backend(tiny_dir, cache_dir, kv).fingerprint()
        for name, kv in [("hqq4", HQQ4), ("hqq2", HQQ2), ("fp8", FP8), ("offloaded", OFFLOADED), ("hqq4-r16", dict(HQQ4, residual_length=16))]
    }
    fps["baseline"] = baseline.fingerprint()
    assert len(set(fps.values())) == len(fps)
    # the library that quantizes the cache is among the fingerprinted library versions
    assert "hqq" in _kv_backend(tiny_dir, cache_dir, HQQ4).weights_identity()["libraries"]
    assert "hqq" not in baseline.weights_identity()["libraries"]


@pytest.mark.parametrize("kv, layer_class", [(HQQ4, "HQQQuantizedLayer"), (HQQ2, "HQQQuantizedLayer"), (FP8, "Fp8QuantizedLayer")])
def test_quantized_cache_is_the_one_generate_uses_and_holds_fewer_bytes(tiny_dir, cache_dir, baseline, kv, layer_class, monkeypatch):
    from transformers import QuantizedCache

    be = _kv_backend(tiny_dir, cache_dir, kv, max_new_tokens=6)
    be.load()
    seen = []
    real = be.model.generate

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out.get("cache"))
        return out

    monkeypatch.setattr(be.model, "generate", spy)
    g = be.generate(_requests(1, 6))[0]
    assert g.ok
    assert isinstance(seen[-1], QuantizedCache) and type(seen[-1].layers[0]).__name__ == layer_class
    base = baseline.generate(_requests(1, 6))[0]
    # same positions cached, fewer bytes: the quantized cache's integers, scales and zero points
    assert g.extra["cost"]["kv_cache_tokens"] == base.extra["cost"]["kv_cache_tokens"]
    assert 0 < g.extra["cost"]["kv_cache_bytes"] < base.extra["cost"]["kv_cache_bytes"]
    be.close()


def test_dynamic_cache_bytes_are_its_tensors(baseline):
    g = baseline.generate(_requests(1, 5))[0]
    cfg = baseline.model.config
    tokens = g.extra["cost"]["kv_cache_tokens"]
    # keys and values, per layer, per KV head, per head dimension, float32
    expected = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * tokens * 4
    assert g.extra["cost"]["kv_cache_bytes"] == expected
    assert tokens == g.prompt_tokens + g.new_tokens - 1  # the last token is sampled, never fed back
    assert cache_bytes(object()) is None


def test_cost_record_per_generation(baseline):
    one = baseline.generate(_requests(1, 4))[0]
    cost = one.extra["cost"]
    assert cost["context_tokens"] == one.prompt_tokens  # one request: no padding
    assert 0 < cost["prefill_s"] <= one.ttft_s <= one.latency_s
    assert cost["peak_memory_mb"] >= one.extra["model_mb"]
    pair = baseline.generate(_requests(3, 4)[1:])
    # a batch's figures are the whole batch's: its padded prompt length times its size
    assert {g.extra["cost"]["context_tokens"] for g in pair} == {2 * max(g.prompt_tokens for g in pair)}
    assert baseline.peak_memory_mb() >= max(g.extra["cost"]["peak_memory_mb"] for g in [one, *pair]) - 0.01


def test_offloaded_cache_without_cuda_is_refused_with_the_library_reason(tiny_dir, cache_dir):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the offloaded cache runs (a refusal needs a CPU-only torch)")
    be = _kv_backend(tiny_dir, cache_dir, OFFLOADED)
    with pytest.raises(EvalsuiteError) as e:
        be.load()
    msg = str(e.value)
    assert "variant 'base'" in msg and "kv_cache.implementation = 'offloaded'" in msg
    assert "CUDA" in msg  # transformers' own reason: it prefetches layers onto a CUDA device


def test_bits_the_library_refuses_are_refused_naming_the_field(tiny_dir, cache_dir):
    be = _kv_backend(tiny_dir, cache_dir, {"backend": "hqq", "nbits": 5})
    with pytest.raises(EvalsuiteError) as e:
        be.load()
    assert "kv_cache.nbits = 5" in str(e.value) and "has to be one of" in str(e.value)


def test_a_missing_cache_library_is_refused_naming_the_backend_field():
    settings = parse_kv_cache({"backend": "quanto", "nbits": 2}, "kv-quanto")
    err = refusal(settings, "kv-quanto", ImportError("You need to install optimum-quanto in order to use KV cache quantization"))
    assert str(err).startswith("variant 'kv-quanto': kv_cache.backend = 'quanto' (quantized quanto 2-bit cache) cannot run here: ImportError: You need")
    assert settings.libraries() == ["optimum-quanto"] and KVCacheSettings().libraries() == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (transformers' offloaded cache prefetches layers to a GPU)")
def test_offloaded_cache_runs_on_cuda_with_the_baseline_greedy_outputs(tiny_dir, cache_dir, monkeypatch):
    from transformers import DynamicCache

    cuda = {"device": "cuda", "cache_dir": cache_dir}
    base = _backend(dataclasses.replace(_variant(tiny_dir, cache_dir, batch_size=1), options=cuda))
    off = _backend(dataclasses.replace(_variant(tiny_dir, cache_dir, kv_cache=OFFLOADED, batch_size=1), options=cuda))
    off.load()
    seen = []
    real = off.model.generate

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out.get("cache") if out.get("cache") is not None else out.get("past_key_values"))
        return out

    monkeypatch.setattr(off.model, "generate", spy)
    reqs = _requests(3, 8)
    got, want = off.generate(reqs), base.generate(reqs)
    assert isinstance(seen[-1], DynamicCache) and getattr(seen[-1], "offloading", None) is True
    assert [g.text for g in got] == [g.text for g in want]  # offloading moves the cache, it does not change it
    assert all(g.extra["cost"]["kv_cache_bytes"] and g.extra["cost"]["peak_memory_mb"] > 0 for g in got)
    assert off.fingerprint() != base.fingerprint()
    base.close()
    off.close()
