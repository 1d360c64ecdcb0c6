"""The variant matrix row (evalsuite.models.describe): method, bits, scheme, library, checkpoint revision."""

from __future__ import annotations

import pytest

from evalsuite.models.describe import describe_quantization, matrix_text, variant_matrix, weights_summary


def v(**kw):
    return {"name": "x", "backend": "transformers", "model": "Org/M", "options": {"device": "cpu", "dtype": "float32"}} | kw


@pytest.mark.parametrize(
    "variant, expect",
    [
        (v(), {"method": "none", "bits": 32, "scheme": None, "library": None}),
        (v(quantization={"method": "bnb", "bits": 8}), {"method": "bnb", "bits": 8, "scheme": "LLM.int8", "library": "bitsandbytes"}),
        (v(quantization={"method": "bitsandbytes", "bits": 4, "quant_type": "nf4"}), {"method": "bnb", "bits": 4, "scheme": "nf4"}),
        (v(quantization={"method": "gptq", "bits": 4, "group_size": 64}), {"method": "gptq", "bits": 4, "group_size": 64, "library": "gptqmodel"}),
        (v(quantization={"method": "awq"}), {"method": "awq", "bits": 4, "group_size": 128, "scheme": "GEMM, zero point"}),
        (
            v(quantization={"method": "llm-compressor", "scheme": "w4a16", "group_size": 64}),
            {"method": "llm-compressor", "bits": 4, "group_size": 64, "scheme": "W4A16 (rtn)", "library": "llmcompressor"},
        ),
        (v(quantization={"method": "llm-compressor", "scheme": "FP8_DYNAMIC"}), {"bits": 8, "group_size": None, "scheme": "FP8_DYNAMIC (rtn)"}),
        (
            v(quantization={"method": "compressed-tensors", "checkpoint": "Org/M-W8A8", "revision": "v2"}),
            {"method": "compressed-tensors", "checkpoint": "Org/M-W8A8", "revision": "v2", "library": "compressed-tensors"},
        ),
        (v(quantization={"method": "torchao", "scheme": "int8_dynamic"}), {"method": "torchao", "bits": 8, "scheme": "int8_dynamic", "library": "torchao"}),
        (v(quantization={"method": "hqq", "bits": 3}), {"method": "hqq", "bits": 3, "group_size": 64, "library": "hqq"}),
        (v(speculative={"method": "prompt_lookup", "num_tokens": 10}), {"method": "none", "speculative": "prompt_lookup"}),
        (v(backend="vllm", quantization={"method": "fp8"}), {"method": "fp8", "library": "vllm"}),
    ],
)
def test_rows(variant, expect):
    row = describe_quantization(variant)
    assert {k: row[k] for k in expect} == expect
    assert set(row) == {
        "name",
        "backend",
        "method",
        "bits",
        "scheme",
        "group_size",
        "library",
        "library_version",
        "checkpoint",
        "revision",
        "commit",
        "speculative",
    }


def test_revision_and_commit_from_the_weights_identity():
    ident = {"source": {"source": "hub", "repo_id": "Org/M", "commit": "a" * 40}, "libraries": {"torchao": "9.9"}}
    row = describe_quantization(v(revision="main", quantization={"method": "torchao"}), ident)
    assert row["revision"] == "main" and row["commit"] == "a" * 40 and row["library_version"] == "9.9"
    ct = {"compressed-tensors": {"source": {"source": "hub", "commit": "b" * 40}}}
    row = describe_quantization(v(revision="main", quantization={"method": "compressed-tensors", "checkpoint": "Org/C", "revision": "v3"}), ct)
    assert row["revision"] == "v3" and row["commit"] == "b" * 40, "a published checkpoint's own revision and commit"


def test_library_version_from_the_installed_package():
    row = describe_quantization(v(quantization={"method": "hqq"}))
    pytest.importorskip("hqq")
    assert row["library_version"]


def test_weights_summary_keeps_commits_and_libraries_not_file_hashes():
    ident = {
        "model": {"files": {"model.safetensors": "f" * 64}},
        "source": {"source": "hub", "repo_id": "Org/M", "commit": "a" * 40},
        "compressed-tensors": {"checkpoint": {"files": {}}, "source": {"source": "hub", "commit": "b" * 40}},
        "libraries": {"compressed-tensors": "0.20"},
        "device": "cpu",
    }
    s = weights_summary(ident)
    assert s == {"source": ident["source"], "libraries": {"compressed-tensors": "0.20"}, "compressed-tensors": {"source": {"source": "hub", "commit": "b" * 40}}}
    assert weights_summary(None) == {}


def test_variant_matrix_reads_the_signature_and_matrix_text_says_it_in_words():
    variants = [
        v(name="base", revision="main"),
        v(name="ct", quantization={"method": "compressed-tensors", "checkpoint": "Org/C", "revision": "v3"}),
        v(name="hqq", quantization={"method": "hqq", "bits": 4}, speculative={"method": "prompt_lookup"}),
    ]
    sig = {
        "libraries": {"hqq": "0.2.8"},
        "weights": {"base": {"source": {"commit": "a" * 40}}, "ct": {"compressed-tensors": {"source": {"commit": "b" * 40}}, "libraries": {"compressed-tensors": "0.20"}}},
    }
    m = variant_matrix(variants, sig)
    assert m["base"]["commit"] == "a" * 40 and m["ct"]["commit"] == "b" * 40 and m["hqq"]["library_version"] == "0.2.8"
    assert matrix_text(m["base"]) == f"unquantized (32-bit) · revision main ({'a' * 10})"
    assert matrix_text(m["ct"]) == f"compressed-tensors published checkpoint · compressed-tensors 0.20 · Org/C@v3 ({'b' * 10})"
    assert matrix_text(m["hqq"]) == "hqq 4-bit HQQ axis 1 g64 · hqq 0.2.8 · speculative prompt_lookup"
