"""The compile layer of the transformers backend on a tiny random Llama: `attn_implementation`
passed to `from_pretrained`, `compile` of the decoding forward, both in the fingerprint and the
engine column, warmed up at load (`compile_s`), and refused with the library's own reason."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from backends.test_transformers import _backend, _requests, _save_tiny, _variant  # noqa: E402
from evalsuite.backends import transformers_compile  # noqa: E402
from evalsuite.backends.transformers_compile import CompileLayer, refusal  # noqa: E402
from evalsuite.cases.compile_options import TorchCompile  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _save_tiny(tmp_path_factory.mktemp("tinycompile") / "model")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cachecompile"))


def _layered(tiny_dir, cache_dir, batch_size=2, **options):
    v = _variant(tiny_dir, cache_dir, batch_size=batch_size)
    return _backend(dataclasses.replace(v, options={**v.options, **options}))


@pytest.fixture(scope="module")
def baseline(tiny_dir, cache_dir):
    be = _layered(tiny_dir, cache_dir)
    yield be
    be.close()


def test_each_compile_setting_is_in_the_fingerprint_and_the_engine(tiny_dir, cache_dir, baseline):
    settings = {
        "compile": {"compile": {"mode": "default"}},
        "compile-ro": {"compile": {"mode": "reduce-overhead"}},
        "eager": {"attn_implementation": "eager"},
        "sdpa": {"attn_implementation": "sdpa"},
    }
    backends = {name: _layered(tiny_dir, cache_dir, **opts) for name, opts in settings.items()}
    fps = {name: be.fingerprint() for name, be in backends.items()} | {"baseline": baseline.fingerprint()}
    assert len(set(fps.values())) == len(fps)
    assert backends["compile"].engine_identity()["settings"] == ["compile=default"]
    assert backends["eager"].engine_identity()["settings"] == ["attn=eager"]
    assert "settings" not in baseline.engine_identity() and baseline.compile_s() is None


def test_generate_kwargs_compile_the_forward_with_a_static_cache():
    from transformers import CompileConfig

    kw = CompileLayer(compile=TorchCompile(mode="max-autotune-no-cudagraphs", max_cache_len=512)).generate_kwargs("cpu")
    assert kw["cache_implementation"] == "static" and kw["max_cache_len"] == 512
    assert isinstance(kw["compile_config"], CompileConfig) and kw["compile_config"].mode == "max-autotune-no-cudagraphs"
    assert kw["compile_config"]._compile_all_devices is True  # transformers compiles on a CPU only when told to
    assert CompileLayer(attn_implementation="eager").generate_kwargs("cpu") == {}
    assert CompileLayer(attn_implementation="eager").load_kwargs() == {"attn_implementation": "eager"}


def test_attention_implementation_is_the_one_loaded_and_warmed_up(tiny_dir, cache_dir, baseline):
    be = _layered(tiny_dir, cache_dir, attn_implementation="eager")
    be.load()
    assert be.model.config._attn_implementation == "eager"
    assert be.compile_s() is not None and be.compile_s() > 0  # the warm-up, apart from load_s
    reqs = _requests(2, 8)
    got, want = be.generate(reqs), baseline.generate(reqs)
    assert all(g.ok for g in got)
    assert [g.extra["token_ids"] for g in got] == [g.extra["token_ids"] for g in want]  # eager and sdpa agree here, in float32
    be.close()


def test_an_attention_implementation_the_library_refuses_refuses_the_variant(tiny_dir, cache_dir, monkeypatch):
    """transformers raising at `from_pretrained` (here made to, as it does for flash attention
    without its package): the variant is refused with that message, for good."""
    import transformers

    real = transformers.AutoModelForCausalLM.from_pretrained
    seen = []

    def refusing(*args, **kwargs):
        seen.append(kwargs.get("attn_implementation"))
        if kwargs.get("attn_implementation") == "flash_attention_2":
            raise ImportError(
                "FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package flash_attn seems to be not installed."
            )
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refusing)
    be = _layered(tiny_dir, cache_dir, attn_implementation="flash_attention_2")
    with pytest.raises(EvalsuiteError) as e:
        be.load()
    msg = str(e.value)
    assert msg.startswith("variant 'base': options.attn_implementation = 'flash_attention_2' cannot run here: ImportError: FlashAttention2 has been toggled on")
    assert be.load_error == msg and seen == ["flash_attention_2"]
    with pytest.raises(EvalsuiteError, match="flash_attn seems to be not installed"):
        be.generate(_requests(1, 4))  # no second try, no fallback to the default attention
    assert seen == ["flash_attention_2"] and be.model is None


def test_a_compile_the_library_skips_is_a_refusal_not_a_fallback(tiny_dir, cache_dir, monkeypatch):
    """transformers skipping compilation (its criteria unmet) would generate uncompiled: refused,
    with the reason, and the uncompiled model is never used."""
    monkeypatch.setattr(transformers_compile, "compiled_seconds", lambda: 0.0)
    monkeypatch.setattr(CompileLayer, "generate_kwargs", lambda self, device: {})  # nothing compiles
    be = _layered(tiny_dir, cache_dir, compile={"mode": "default"})
    with pytest.raises(EvalsuiteError) as e:
        be.load()
    assert "variant 'base': options.compile.mode = 'default' cannot run here: transformers did not compile the forward" in str(e.value)
    assert be.load_error == str(e.value)
    with pytest.raises(EvalsuiteError):
        be.generate(_requests(1, 4))


def test_a_warm_up_the_library_fails_carries_its_message(tiny_dir, cache_dir, monkeypatch):
    """torch raising while compiling (as it does for a CUDA-graph mode on a CPU when told to raise):
    the variant's refusal carries torch's own words and names the field."""
    import transformers

    def failing(self, *args, **kwargs):
        raise RuntimeError("skipping cudagraphs due to cpu device (arg0_1)")

    monkeypatch.setattr(transformers.GenerationMixin, "generate", failing)
    be = _layered(tiny_dir, cache_dir, compile={"mode": "reduce-overhead"})
    with pytest.raises(EvalsuiteError) as e:
        be.load()
    assert (
        str(e.value) == "variant 'base': options.compile.mode = 'reduce-overhead' cannot run here: RuntimeError: skipping cudagraphs due to cpu device (arg0_1)"
    )


@pytest.mark.parametrize(
    "layer, text, field",
    [
        (CompileLayer(compile=TorchCompile()), "RuntimeError: boom", "options.compile.mode = 'default'"),
        (CompileLayer(attn_implementation="flex_attention"), "ValueError: no", "options.attn_implementation = 'flex_attention'"),
        (
            CompileLayer(compile=TorchCompile(), attn_implementation="flex_attention"),
            "torch._inductor: flex_attention lowering failed",
            "options.attn_implementation",
        ),
        (CompileLayer(compile=TorchCompile(), attn_implementation="eager"), "RuntimeError: graph break", "options.compile.mode"),
    ],
)
def test_refusal_names_the_option_it_is_about(layer, text, field):
    assert f"variant 'v': {field}" in str(refusal(layer, "v", text))


@pytest.mark.slow
def test_the_compiled_forward_gives_the_baseline_greedy_outputs(tiny_dir, cache_dir, baseline):
    """A real `torch.compile` (inductor, CPU) of the tiny model: warmed up at load (compile_s), the
    same greedy tokens as the eager baseline, no recompilation for a second batch of the same size."""
    be = _layered(tiny_dir, cache_dir, compile={"mode": "default", "max_cache_len": 128})
    be.load()
    warm = be.compile_s()
    assert warm is not None and warm > 0
    reqs = _requests(4, 8)
    got, want = be.generate(reqs), baseline.generate(reqs)
    assert [g.extra["token_ids"] for g in got] == [g.extra["token_ids"] for g in want]
    again = be.generate(reqs)
    assert not any("recompile_s" in g.extra for g in again)  # steady state: the warm-up covered this shape
    assert be.compile_s() >= warm
    be.close()
