"""A variant's compile layer (`compile`, `attn_implementation`, vLLM's `enforce_eager`,
`compilation_config`, `batch_invariant`): validated when the suite loads with the variant and the
field named, its own change category, `batch_size` a category of its own too."""

from __future__ import annotations

import pytest

from evalsuite.cases.compile_options import TorchCompile, parse_attn, parse_compile, split_compile
from evalsuite.cases.options import GenerationSettings
from evalsuite.cases.suite import CHANGE_CATEGORIES, Variant, compute_changes, load_suite
from evalsuite.errors import EvalsuiteError, ValidationError

SETS = """
schema_version: 1
name: s
defaults: {scenario: kb_qa, lang: en}
documents:
  - {id: d1, title: T, access: public, text: "The office opens at 9 am."}
cases:
  - {id: k1, kind: grounded, prompt: "When does the office open?", context: [d1], expect: {required_terms: ["9 am"], citations: [d1]}}
"""


def _suite(write, baseline: str, variants: str):
    write("sets/kb.yaml", SETS)
    return write("suite.yaml", "schema_version: 1\nname: t\ncasesets: [sets]\nvariants:\n" + baseline + variants)


TF_BASE = "  - {name: base, baseline: true, backend: transformers, model: embedded, options: {device: cpu}}\n"
VLLM_BASE = "  - {name: base, baseline: true, backend: vllm, model: embedded, options: {dtype: bfloat16}}\n"


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, None),
        ({}, TorchCompile()),
        ({"mode": "reduce-overhead"}, TorchCompile(mode="reduce-overhead")),
        ({"mode": "max-autotune", "fullgraph": True, "max_cache_len": 1024}, TorchCompile(mode="max-autotune", fullgraph=True, max_cache_len=1024)),
    ],
)
def test_compile_settings_parse(raw, expected):
    assert parse_compile(raw, "v") == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"mode": "fast"}, "options.compile.mode: unknown mode 'fast'"),
        ({"mode": "reduce_overhead"}, "(did you mean 'reduce-overhead'?)"),
        ({"modes": "default"}, "options.compile.modes: unknown setting (did you mean 'mode'?)"),
        ({"fullgraph": "yes"}, "options.compile.fullgraph: expected true or false"),
        ({"max_cache_len": 0}, "options.compile.max_cache_len: expected a positive integer"),
        ("default", "options.compile: expected a mapping"),
    ],
)
def test_bad_compile_settings_name_the_variant_and_field(raw, message):
    with pytest.raises(EvalsuiteError) as e:
        parse_compile(raw, "c-bad")
    assert str(e.value).startswith("variant 'c-bad': ") and message in str(e.value)


def test_attention_implementations_are_transformers_names():
    assert parse_attn("sdpa", "v") == "sdpa" and parse_attn(None, "v") is None
    with pytest.raises(EvalsuiteError, match=r"variant 'a': options.attn_implementation: unknown implementation 'flash'.*available: eager, sdpa"):
        parse_attn("flash", "a")


@pytest.mark.parametrize(
    "base, variant, field, message",
    [
        (TF_BASE, "  - {name: c, options: {device: cpu, compile: {mode: turbo}}}\n", "variants[1].options.compile.mode", "unknown mode 'turbo'"),
        (
            TF_BASE,
            "  - {name: a, options: {device: cpu, attn_implementation: flex_atention}}\n",
            "variants[1].options.attn_implementation",
            "(did you mean 'flex_attention'?)",
        ),
        (
            TF_BASE,
            "  - {name: c, options: {device: cpu, enforce_eager: false}}\n",
            "variants[1].options.enforce_eager",
            "the transformers backend does not take `enforce_eager`",
        ),
        (
            TF_BASE,
            "  - {name: c, options: {device: cpu, compile: {}}, kv_cache: {backend: hqq, nbits: 4}}\n",
            "variants[1].options.compile",
            "cannot be combined with `kv_cache`",
        ),
        (VLLM_BASE, "  - {name: c, options: {compile: {mode: default}}}\n", "variants[1].options.compile", "vLLM compiles unless `enforce_eager: true`"),
        (VLLM_BASE, "  - {name: c, options: {batch_invariant: 1}}\n", "variants[1].options.batch_invariant", "expected true or false"),
        (VLLM_BASE, "  - {name: c, options: {compilation_config: fast}}\n", "variants[1].options.compilation_config", "expected a mapping"),
        (
            VLLM_BASE,
            "  - {name: c, options: {enforce_eager: true, compilation_config: {mode: 3}}}\n",
            "variants[1].options.compilation_config",
            "enforce_eager: true",
        ),
    ],
)
def test_bad_compile_layer_refused_when_the_suite_loads(write, base, variant, field, message):
    with pytest.raises(ValidationError) as info:
        load_suite(_suite(write, base, variant))
    found = [p for p in info.value.problems if p.field == field]
    assert found and message in found[0].message and found[0].line and found[0].case_id in ("c", "a"), info.value


def test_compile_layer_variants_are_one_variable_each(write):
    s = load_suite(
        _suite(
            write,
            TF_BASE,
            "  - {name: compiled, options: {device: cpu, compile: {mode: default}}}\n"
            "  - {name: eager-attn, options: {device: cpu, attn_implementation: eager}}\n"
            "  - {name: batched, generation: {batch_size: 4}}\n"
            "  - {name: compiled-bf16, options: {device: cpu, dtype: bfloat16, compile: {}}}\n",
        )
    )
    assert s.variant("compiled").changes == ("compile",)
    assert s.variant("eager-attn").changes == ("compile",)
    assert s.variant("batched").changes == ("batch",)
    assert s.variant("compiled-bf16").changes == ("backend", "compile")
    assert [w for w in s.warnings if "compiled-bf16" in w] and not [w for w in s.warnings if "'compiled'" in w or "'batched'" in w]
    assert {"compile", "batch"} <= set(CHANGE_CATEGORIES)


def test_another_backends_compile_options_are_part_of_the_backend_change(write):
    """vLLM's `enforce_eager: true` against a transformers baseline is not a compile change (the two
    backends' compile layers are not comparable): the variant changes its backend, and its batch."""
    s = load_suite(
        _suite(
            write,
            TF_BASE,
            "  - {name: on-vllm, backend: vllm, changes: [backend, batch], generation: {batch_size: 4}, options: {dtype: bfloat16, enforce_eager: true}}\n"
            "  - {name: on-vllm-compiled, backend: vllm, options: {dtype: bfloat16, enforce_eager: false}}\n",
        )
    )
    assert s.variant("on-vllm").changes == ("backend", "batch")
    assert s.variant("on-vllm-compiled").changes == ("backend",)
    assert not [w for w in s.warnings if "on-vllm" in w]


def _v(name="v", backend="vllm", options=None, **gen) -> Variant:
    return Variant(name, backend=backend, model="embedded", options=options or {}, generation=GenerationSettings(**gen))


@pytest.mark.parametrize(
    "variant, changes",
    [
        (_v(options={"enforce_eager": False}), ("compile",)),
        (_v(options={"batch_invariant": True}), ("compile",)),
        (_v(options={"engine_args": {"compilation_config": {"mode": 3}}}), ("compile",)),
        (_v(options={"engine_args": {"compilation_config": {"mode": 3}, "max_num_seqs": 4}}), ("backend", "compile")),
        (_v(options={"dtype": "float32"}), ("backend",)),
        (_v(batch_size=8), ("batch",)),
        (_v(max_new_tokens=64), ("generation",)),
        (_v(max_new_tokens=64, batch_size=8), ("generation", "batch")),
        (_v(), ()),
    ],
)
def test_compute_changes_table(variant, changes):
    assert compute_changes(variant, _v("base")) == changes


def test_split_compile_keeps_the_rest_as_it_was():
    assert split_compile({"dtype": "bf16", "compile": {"mode": "default"}}) == ({"dtype": "bf16"}, {"compile": {"mode": "default"}})
    assert split_compile({"engine_args": {"enforce_eager": False}}) == ({}, {"engine_args": {"enforce_eager": False}})
    assert split_compile(None) == ({}, {})
