"""A variant's `kv_cache:`: parsed with the suite, its own change category, in the fingerprint only
when set, refused on a backend that does not take it."""

from __future__ import annotations

import pytest

from evalsuite.cases.suite import Variant, load_suite
from evalsuite.errors import ValidationError

SETS = """
schema_version: 1
name: s
defaults: {scenario: kb_qa, lang: en}
documents:
  - {id: d1, title: T, access: public, text: "The office opens at 9 am."}
cases:
  - {id: k1, kind: grounded, prompt: "When does the office open?", context: [d1], expect: {required_terms: ["9 am"], citations: [d1]}}
"""


def _suite(write, variants: str):
    write("sets/kb.yaml", SETS)
    return write("suite.yaml", "schema_version: 1\nname: t\ncasesets: [sets]\nvariants:\n  - {name: base, baseline: true, backend: fake}\n" + variants)


def test_kv_cache_is_a_change_of_its_own(write):
    s = load_suite(_suite(write, "  - {name: kv-hqq4, kv_cache: {implementation: quantized, backend: hqq, nbits: 4}}\n"))
    v = s.variant("kv-hqq4")
    assert v.kv_cache == {"implementation": "quantized", "backend": "hqq", "nbits": 4}
    assert v.changes == ("kv_cache",) and not s.warnings
    assert v.to_dict()["kv_cache"] == v.kv_cache and "kv_cache" not in s.baseline.to_dict()


def test_the_fingerprint_holds_the_cache_and_is_unchanged_without_one():
    plain = Variant("a", backend="fake")
    assert "kv_cache" not in plain.spec()  # fingerprints made before the field existed stay valid
    fps = {Variant("a", backend="fake", kv_cache=kv).fingerprint() for kv in (None, {"implementation": "offloaded"}, {"backend": "hqq", "nbits": 4}, {"backend": "hqq", "nbits": 2})}
    assert len(fps) == 4


@pytest.mark.parametrize(
    "variant, message",
    [
        ("  - {name: kv, backend: vllm, kv_cache: {backend: fp8}}\n", "the vllm backend does not take `kv_cache` (vLLM's KV-cache dtype is `quantization: {kv_cache_dtype: fp8}`)"),
        ("  - {name: kv, backend: http, kv_cache: {implementation: offloaded}}\n", "the http backend does not take `kv_cache`"),
        ("  - {name: kv, kv_cache: quantized}\n", "expected a mapping"),
    ],
)
def test_kv_cache_refused_where_it_cannot_apply(write, variant, message):
    with pytest.raises(ValidationError) as info:
        load_suite(_suite(write, variant))
    assert any(p.field == "variants[1].kv_cache" and message in p.message and p.line for p in info.value.problems), info.value
