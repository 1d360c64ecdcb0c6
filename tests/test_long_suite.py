"""suites/long.yaml, the documented long-context suite (docs/long-context.md): the baseline, a
quantized KV cache, a trimming budget and GPTQ, each one variable, over long cases of every size
and short cases of the same scenario."""

from __future__ import annotations

from evalsuite.cases.suite import load_suite


def test_the_long_suite_runs_one_variable_per_variant_on_long_and_short_cases(repo):
    suite = load_suite(repo / "suites" / "long.yaml")
    assert not suite.warnings
    changes = {v.name: v.changes for v in suite.variants}
    assert changes == {"baseline": (), "kv-hqq4": ("kv_cache",), "trim-2k": ("context",), "gptq-4bit": ("quantization",)}
    assert suite.variant("kv-hqq4").kv_cache == {"implementation": "quantized", "backend": "hqq", "nbits": 4}
    assert suite.variant("trim-2k").trim is not None and suite.variant("trim-2k").trim.budget_tokens == 2048
    assert suite.generation.batch_size == 1  # one request at a time: each generation is a point of the cost curve
    cases = suite.load_cases()
    long = [c for c in cases if "long" in c.tags]
    sizes = {t for c in long for t in c.tags if t.startswith("ctx-")}
    assert sizes == {"ctx-2k", "ctx-4k", "ctx-7k"}
    short = [c for c in cases if "long" not in c.tags]
    assert short and {c.scenario for c in cases} == {"kb_qa"}
    assert len({v.fingerprint() for v in suite.variants}) == len(suite.variants)


def test_the_suite_is_documented(repo):
    doc = (repo / "docs" / "long-context.md").read_text("utf-8")
    assert "suites/long.yaml" in doc and "kv_cache:" in doc and "context_cost" in doc
