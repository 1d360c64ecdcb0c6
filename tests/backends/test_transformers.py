"""The transformers backend on a tiny randomly initialised Llama built offline in the test."""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from evalsuite.backends.base import GenerationSettings, Request  # noqa: E402
from evalsuite.cases.suite import Variant  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "employees connect to the network with the vpn client",
    "the starter plan costs twenty nine dollars per user per month",
    "write a python function that adds two numbers and returns the sum",
    "reply with one json object only and no prose",
    "the answer is in the documents below cite every fact",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE(unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tk.train_from_iterator(SENTENCES * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _save_tiny(path, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def _variant(model_dir, cache_dir, name="base", batch_size=4, max_new_tokens=12, temperature=0.0, **kw):
    gen = GenerationSettings(max_new_tokens=max_new_tokens, temperature=temperature, batch_size=batch_size)
    return Variant(name, backend="transformers", model=str(model_dir), options={"device": "cpu", "cache_dir": cache_dir}, generation=gen, **kw)


def _backend(variant):
    from evalsuite.backends.transformers import TransformersBackend

    return TransformersBackend(variant)


def _requests(n=4, max_new_tokens=12, temperature=0.0):
    prompts = [
        "fox",
        "the starter plan costs how much per user",
        "write a python function that adds two numbers and returns the sum, then explain it",
        "vpn client",
        "reply with one json object",
        "cite every fact in the documents below, the answer is there",
    ]
    return [Request(f"c{i}", (("system", "answer briefly"), ("user", prompts[i % len(prompts)])), 0, max_new_tokens, temperature) for i in range(n)]


@pytest.fixture(scope="module")
def greedy(tiny_dir, cache_dir):
    be = _backend(_variant(tiny_dir, cache_dir))
    yield be
    be.close()


def test_registered_lazily():
    from evalsuite.backends import BACKENDS

    assert "transformers" in BACKENDS


def test_batch_returns_one_generation_per_request_in_order_with_metrics(greedy):
    reqs = _requests(4)
    gens = greedy.generate(reqs)
    assert [g.case_id for g in gens] == [r.case_id for r in reqs]
    for g in gens:
        assert g.ok and g.batch_size == 4
        assert g.prompt_tokens and g.prompt_tokens > 0
        assert 0 < g.new_tokens <= 12
        assert g.latency_s > 0 and g.ttft_s is not None and 0 < g.ttft_s <= g.latency_s
        assert g.tokens_per_s and g.tokens_per_s > 0
        assert g.finish_reason in ("stop", "length")
        assert len(g.extra["token_ids"]) == g.new_tokens
        assert g.extra["ttft_source"] == "first_step"
    # prompts of different lengths: the shorter ones were padded, yet counted without padding
    assert len({g.prompt_tokens for g in gens}) > 1


def test_single_request_measures_ttft_with_a_streamer(greedy):
    (g,) = greedy.generate(_requests(1))
    assert g.extra["ttft_source"] == "streamer"
    assert 0 < g.ttft_s < g.latency_s


def test_left_padding_and_pad_token(greedy):
    greedy.load()
    enc = greedy.encode(_requests(3))
    mask = enc["attention_mask"]
    assert greedy.tokenizer.padding_side == "left" and greedy.tokenizer.pad_token_id is not None
    # left padding: every row ends with real tokens, padding only at the start
    assert bool(mask[:, -1].all())
    assert not bool(mask[:, 0].all())


def test_batched_and_unbatched_greedy_outputs_compared(greedy, capsys):
    """Batch composition (left padding) may change greedy outputs numerically: measure, don't hide."""
    reqs = _requests(6, max_new_tokens=16)
    batched = greedy.generate(reqs)
    single = [greedy.generate([r])[0] for r in reqs]
    mismatches = [r.case_id for r, a, b in zip(reqs, batched, single) if a.extra["token_ids"] != b.extra["token_ids"]]
    with capsys.disabled():
        print(f"\n[finding] batched vs unbatched greedy (tiny fp32 Llama, batch 6, 16 tokens): {len(mismatches)}/{len(reqs)} differ {mismatches}")
    assert len(batched) == len(single) == len(reqs)
    # the comparison ran over real outputs
    assert all(b.new_tokens > 0 for b in batched)


def test_same_seed_same_sample_and_samples_differ(tiny_dir, cache_dir):
    be = _backend(_variant(tiny_dir, cache_dir, temperature=1.0))
    base = _requests(1, max_new_tokens=16, temperature=1.0)[0]
    samples = [dataclasses.replace(base, sample=i) for i in range(3)]
    a = be.generate(samples)
    b = be.generate(samples)
    assert [g.extra["token_ids"] for g in a] == [g.extra["token_ids"] for g in b]
    assert len({tuple(g.extra["token_ids"]) for g in a}) == 3
    # a sample depends on its seed only, not on the batch it was generated in
    alone = be.generate([samples[1]])[0]
    assert alone.extra["token_ids"] == a[1].extra["token_ids"]
    # a different suite seed gives a different sample
    other = be.generate([dataclasses.replace(samples[0], seed=99)])[0]
    assert other.extra["token_ids"] != a[0].extra["token_ids"]
    be.close()


def test_max_new_tokens_gives_length_finish(greedy):
    (g,) = greedy.generate(_requests(1, max_new_tokens=3))
    assert g.new_tokens <= 3
    assert g.finish_reason == ("length" if g.new_tokens == 3 else "stop")


def test_fingerprint_changes_with_weights_quantization_speculative(tiny_dir, cache_dir, tmp_path):
    fp = _backend(_variant(tiny_dir, cache_dir)).fingerprint()
    assert fp == _backend(_variant(tiny_dir, cache_dir)).fingerprint()
    # same files, different weights
    other = _save_tiny(tmp_path / "other", seed=1)
    assert _backend(_variant(other, cache_dir)).fingerprint() != fp
    seen = {fp}
    for kw in (
        {"quantization": {"method": "bnb", "bits": 8}},
        {"quantization": {"method": "bnb", "bits": 4, "quant_type": "nf4"}},
        {"speculative": {"method": "prompt_lookup", "num_tokens": 10}},
        {"speculative": {"method": "prompt_lookup", "num_tokens": 5}},
        {"speculative": {"method": "draft", "draft": {"quantization": {"method": "bnb", "bits": 4}}}},
    ):
        f = _backend(_variant(tiny_dir, cache_dir, **kw)).fingerprint()
        assert f not in seen, kw
        seen.add(f)


def test_fingerprint_follows_file_content(tmp_path, cache_dir):
    d = _save_tiny(tmp_path / "m", seed=3)
    fp = _backend(_variant(d, cache_dir)).fingerprint()
    cfg = json.loads((d / "config.json").read_text())
    cfg["rms_norm_eps"] = 1e-5 if cfg.get("rms_norm_eps") != 1e-5 else 1e-6
    (d / "config.json").write_text(json.dumps(cfg))
    assert _backend(_variant(d, cache_dir)).fingerprint() != fp


@pytest.mark.parametrize(
    "options, message",
    [
        ({"device": "tpu"}, "unknown device"),
        ({"dtype": "int3"}, "unknown dtype"),
        ({"trust_remote_code": True}, "not supported"),
        ({"colour": "blue"}, "unknown transformers option"),
    ],
)
def test_bad_options_fail_helpfully(tiny_dir, options, message):
    v = dataclasses.replace(_variant(tiny_dir, None), options=options)
    with pytest.raises(EvalsuiteError, match=message):
        _backend(v)


def test_unknown_speculative_and_quantization_methods(tiny_dir, cache_dir):
    with pytest.raises(EvalsuiteError, match="speculative method"):
        _backend(_variant(tiny_dir, cache_dir, speculative={"method": "medusa"}))
    with pytest.raises(EvalsuiteError, match=r"quantization method 'qaq' \(did you mean [^)]*awq"):
        _backend(_variant(tiny_dir, cache_dir, quantization={"method": "qaq"}))


def test_missing_model_dir(tmp_path):
    be = _backend(_variant(tmp_path / "nope", None))
    with pytest.raises(EvalsuiteError, match="not found"):
        be.fingerprint()


@pytest.mark.parametrize("spec", [{"method": "prompt_lookup", "num_tokens": 4}, {"method": "draft", "num_tokens": 3}])
def test_speculative_greedy_equals_baseline_one_by_one(greedy, tiny_dir, cache_dir, spec):
    reqs = _requests(3, max_new_tokens=12)
    base = [greedy.generate([r])[0] for r in reqs]
    be = _backend(_variant(tiny_dir, cache_dir, speculative=spec))
    gens = be.generate(reqs)  # a batch of 3 is generated one by one inside
    assert all(g.batch_size == 1 for g in gens)
    assert [g.extra["token_ids"] for g in gens] == [g.extra["token_ids"] for g in base]
    be.close()


def test_timeout_marks_unfinished_rows(tiny_dir, cache_dir):
    v = _variant(tiny_dir, cache_dir, max_new_tokens=200)
    v = dataclasses.replace(v, generation=dataclasses.replace(v.generation, timeout_s=0.0))
    be = _backend(v)
    be.load()
    gens = be.generate(_requests(2, max_new_tokens=200))
    for g in gens:
        assert (g.timeout and g.error and g.finish_reason == "timeout") or g.finish_reason == "stop"
    be.close()


def test_memory_reports(greedy):
    greedy.load()
    assert greedy.peak_memory_mb() > 0
    assert 0 < greedy.model_memory_mb() < 50


def tiny_suite(tmp_path, tiny_dir, name: str, max_new_tokens: int, extra: str = ""):
    """A suite file: the example cases, the tiny model as the greedy baseline, `extra` variants."""
    import pathlib

    casesets = pathlib.Path(__file__).resolve().parents[2] / "casesets"
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"""
schema_version: 1
name: {name}
casesets: [{{path: {casesets}, tags: [example]}}]
generation: {{max_new_tokens: {max_new_tokens}, temperature: 0, batch_size: 2}}
variants:
  - name: baseline
    baseline: true
    backend: transformers
    model: {tiny_dir}
    options: {{device: cpu, cache_dir: {tmp_path / "mcache"}}}
"""
        + extra
    )
    return suite


def test_runner_end_to_end_on_tiny_model(tiny_dir, tmp_path):
    """The runner drives the backend: batches, cache, summary with peak memory from the backend."""
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    suite = tiny_suite(
        tmp_path,
        tiny_dir,
        "tiny",
        8,
        extra="""
  - name: lookup
    speculative: {method: prompt_lookup, num_tokens: 4}
""",
    )
    s = load_suite(suite)
    opts = RunOptions(limit=1, progress=False, score=False, cache_path=str(tmp_path / "gen.sqlite"), runs_dir=str(tmp_path / "runs"))
    res = run_suite(s, opts)
    assert res.errors == 0 and res.generated > 0
    assert res.variants["baseline"]["peak_memory_source"] == "backend"
    again = run_suite(s, opts)
    assert again.generated == 0 and again.cached == res.generated


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (no GPU on this machine)")
def test_cuda_batch(tiny_dir, cache_dir):
    v = dataclasses.replace(_variant(tiny_dir, cache_dir), options={"device": "cuda", "cache_dir": cache_dir})
    be = _backend(v)
    gens = be.generate(_requests(3))
    assert all(g.ok and g.extra["device"] == "cuda" for g in gens)
    assert be.peak_memory_mb() > 0
    be.close()


def test_logit_agreement_identical_and_different_models(greedy, tiny_dir, cache_dir, tmp_path):
    from evalsuite.scoring.logits import KL_METRIC, TOP1_METRIC, logit_agreement, to_score_records

    reqs = _requests(2, max_new_tokens=8)
    outs = greedy.generate(reqs)
    conts = [g.extra["token_ids"] for g in outs]
    same = logit_agreement(greedy, _backend(_variant(tiny_dir, cache_dir)), reqs, conts)
    assert all(r["kl_mean"] < 1e-6 and r["top1_agreement"] == 1.0 and r["first_disagreement"] is None and r["baseline_margin"] is None for r in same)
    # the baseline's own greedy continuation: its top token agrees with itself at every position
    other = _backend(_variant(_save_tiny(tmp_path / "o", seed=7), cache_dir))
    diff = logit_agreement(greedy, other, reqs, [g.text for g in outs])
    assert all(r["kl_mean"] > 0 and 0.0 <= r["top1_agreement"] <= 1.0 and r["positions"] > 0 for r in diff)
    # where the top tokens first differ, the baseline's margin over the variant's token is recorded (>= 0: it is the baseline's top)
    assert all((r["first_disagreement"] is None) == (r["baseline_margin"] is None) for r in diff)
    assert all(r["baseline_margin"] >= 0 for r in diff if r["baseline_margin"] is not None)
    recs = to_score_records("other", diff, {})
    assert all("baseline_margin" in r.details for r in recs)
    assert {r.metric for r in recs} == {KL_METRIC, TOP1_METRIC}
    assert all(r.higher_is_better is (r.metric == TOP1_METRIC) for r in recs)
    with pytest.raises(EvalsuiteError):
        logit_agreement(greedy, other, reqs, conts[:1])


def test_gptq_on_the_fly_quantizes_once_and_generates(tiny_dir, tmp_path):
    """GPTQ through gptqmodel on the tiny model: quantized once, cached, then loaded with the CPU kernel."""
    pytest.importorskip("gptqmodel")
    cache = str(tmp_path / "gcache")
    import pathlib

    casesets = pathlib.Path(__file__).resolve().parents[2] / "casesets"
    q = {"method": "gptq", "bits": 4, "group_size": 32, "calibration": str(casesets), "calibration_samples": 8}
    v = dataclasses.replace(_variant(tiny_dir, cache), quantization=q)
    be = _backend(v)
    fp = be.fingerprint()
    gens = be.generate(_requests(2, max_new_tokens=6))
    assert all(g.ok and g.new_tokens > 0 for g in gens)
    be.close()
    ckpts = [p for p in (tmp_path / "gcache" / "models").iterdir() if p.name.startswith("gptq-")]
    assert len(ckpts) == 1 and (ckpts[0] / "evalsuite-gptq.json").is_file()
    again = _backend(v)
    assert again.fingerprint() == fp
    again.generate(_requests(1, max_new_tokens=4))
    assert [p for p in (tmp_path / "gcache" / "models").iterdir() if p.name.startswith("gptq-")] == ckpts
    again.close()


_WARM_PROBE = """
import json, sys
from evalsuite.run.runner import RunOptions
from evalsuite.scoring.pipeline import run_suite
from evalsuite.cases.suite import load_suite
res = run_suite(load_suite(sys.argv[1]), RunOptions(limit=int(sys.argv[2]), progress=False, score=False, cache_path=sys.argv[3], runs_dir=sys.argv[4]))
print(json.dumps({"generated": res.generated, "cached": res.cached, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def test_warm_run_never_imports_torch_and_a_miss_loads_the_model(tiny_dir, tmp_path):
    """Every generation cached: the backend is built and fingerprinted without torch or transformers.
    One cache miss: torch is imported and the model loaded, as before."""
    import subprocess
    import sys

    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    suite = tiny_suite(tmp_path, tiny_dir, "tiny-warm", 4)
    cache, runs = str(tmp_path / "gen.sqlite"), str(tmp_path / "runs")
    cold = run_suite(load_suite(suite), RunOptions(limit=1, progress=False, score=False, cache_path=cache, runs_dir=runs))
    assert cold.generated > 0 and cold.errors == 0

    def probe(limit: int) -> dict:
        out = subprocess.run([sys.executable, "-c", _WARM_PROBE, str(suite), str(limit), cache, runs], capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    warm = probe(1)
    assert warm == {"generated": 0, "cached": cold.generated, "torch": False, "transformers": False}
    more = probe(2)  # one more case per scenario: misses, so the model loads and generates them
    assert more["generated"] > 0 and more["cached"] == cold.generated and more["torch"] and more["transformers"]


def test_cuda_probe_without_gpu_nodes_does_not_import_torch(monkeypatch):
    """No GPU device node: CUDA is unavailable without asking torch; with one, torch is asked."""
    import sys

    from evalsuite.backends import transformers as tb

    asked = []
    monkeypatch.setattr(tb, "_torch", lambda: asked.append(1) or torch)
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(tb.os.path, "exists", lambda p: False)
    monkeypatch.setattr(tb.glob, "glob", lambda pattern: [])
    assert tb._cuda_available() is False and asked == []
    monkeypatch.setattr(tb.os.path, "exists", lambda p: p == "/dev/nvidiactl")
    assert tb._cuda_available() is torch.cuda.is_available() and asked == [1]


def test_native_tools_go_through_the_tool_template_and_calls_are_parsed(greedy, monkeypatch):
    """`tools: native`: a request's tools are rendered by the chat template's `tools` (the documented
    TOOL_CHAT_TEMPLATE, since the model's own has none) and the calls in the output are parsed."""
    import json

    from evalsuite.backends import transformers as tf_backend

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    plain = Request("c0", (("system", "answer briefly"), ("user", "fox")), 0, 6)
    native = dataclasses.replace(plain, tools=json.dumps(tools))
    greedy.load()
    text = greedy.prompt_text(native)
    assert "<tools>" in text and '"get_weather"' in text and "answer briefly" in text
    assert "<tools>" not in greedy.prompt_text(plain)
    (g_plain,) = greedy.generate([plain])
    assert g_plain.tool_calls is None
    # the model is random: script its decoded text to see the parse (the tokens are real, the text is not)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    monkeypatch.setattr(greedy.tokenizer, "decode", lambda ids, **kw: call)
    (g,) = greedy.generate([native])
    assert [(c.name, c.arguments) for c in g.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert tf_backend.TOOL_CHAT_TEMPLATE  # the fallback template the backend documents
