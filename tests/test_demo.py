"""evalsuite.demo on the fake backend (fast: no model), so the demo's plumbing is tested everywhere.

The real demo (suites/demo.yaml on the embedded model) is what `make demo` runs; it takes minutes.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from evalsuite.backends.base import Generation
from evalsuite.demo import DemoOptions, identical_share, missing_requirement, run_demo
from evalsuite.errors import EvalsuiteError
from evalsuite.cases.suite import Variant

REPO = Path(__file__).resolve().parents[1]


def _g(variant, case, text, ids=None, error=None):
    return Generation(case, variant, 0, text=text, error=error, extra={"token_ids": ids} if ids else {})


@pytest.mark.parametrize(
    "gens, expected",
    [
        ([_g("b", "c1", "x"), _g("v", "c1", "x"), _g("b", "c2", "y"), _g("v", "c2", "z")], {"b": (2, 2), "v": (1, 2)}),
        # token ids win over text when both sides have them
        ([_g("b", "c1", "x", [1, 2]), _g("v", "c1", "x", [1, 3])], {"b": (1, 1), "v": (0, 1)}),
        # failed generations are not pairs
        ([_g("b", "c1", "x"), _g("v", "c1", "", error="boom")], {"b": (1, 1)}),
    ],
)
def test_identical_share(gens, expected):
    got = identical_share(gens, "b")
    assert {k: (v["identical"], v["pairs"]) for k, v in got.items()} == expected


def test_missing_requirement(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gptqmodel" else real(name, *a))
    assert missing_requirement(Variant("f", backend="fake")) is None
    why = missing_requirement(Variant("g", backend="transformers", quantization={"method": "gptq", "bits": 4}))
    assert why and "evalsuite[gptq]" in why
    assert missing_requirement(Variant("c", backend="transformers", quantization={"method": "gptq", "checkpoint": "/x"})) is None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hqq" else real(name, *a))
    assert "evalsuite[hqq]" in missing_requirement(Variant("h", backend="transformers", quantization={"method": "hqq", "bits": 4}))


def test_run_demo_on_the_fake_suite(tmp_path):
    out = io.StringIO()
    console = Console(file=out, width=160)
    code = run_demo(REPO / "suites" / "fake.yaml", DemoOptions(profile="quick", runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite")), console=console).exit_code
    text = out.getvalue()
    assert code in (0, 1, 2)
    assert "same" in text and "fake-int8" in text
    # the variant matrix: what the variant's weights are, in words (evalsuite.models.describe)
    assert "weights / decoding" in text and "bnb 8-bit LLM.int8" in text
    assert "demo wall time" in text
    assert list((tmp_path / "runs").iterdir()), "the run is stored"


def test_unknown_profile():
    with pytest.raises(EvalsuiteError, match="unknown demo profile"):
        run_demo(REPO / "suites" / "fake.yaml", DemoOptions(profile="huge"), console=Console(file=io.StringIO()))


def test_a_skipped_variant_shows_its_install_command(tmp_path, monkeypatch):
    """The reason is printed as text: `[llamacpp]` is not swallowed as console markup."""
    import evalsuite.demo as demo

    monkeypatch.setattr(demo, "missing_requirement", lambda v: "needs llama_cpp: pip install 'evalsuite[llamacpp]'" if v.name == "fake-int8" else None)
    out = io.StringIO()
    run_demo(REPO / "suites" / "fake.yaml", DemoOptions(profile="quick", runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite")), console=Console(file=out, width=200))
    assert "skipping variant fake-int8: needs llama_cpp: pip install 'evalsuite[llamacpp]'" in out.getvalue()


SPEED_SUITE = """schema_version: 1
name: speed
casesets:
  - {{path: {casesets}, tags: [example]}}
generation: {{max_new_tokens: 32, temperature: 0, batch_size: 1}}
output_dir: out
variants:
  - name: baseline
    baseline: true
    backend: fake
    options: {{default: "I don't know based on the provided documents.", delay_s: 0.002}}
  # the same outputs, fifteen times slower: a single sequential pass shows latency x15
  - name: slow-int8
    quantization: {{method: bnb, bits: 8}}
    options: {{default: "I don't know based on the provided documents.", delay_s: 0.03}}
  - name: baseline-batch4
    noise: true
    generation: {{batch_size: 4}}
"""

#: what a library's warning looks like in a terminal (transformers, Python's warnings module, torch)
LIBRARY_WARNING = r"\[transformers\]|\b\w*Warning\b|is deprecated|will be removed in"


def test_the_demo_never_warns_on_speed_from_one_sequential_pass(tmp_path, capfd):
    """A variant fifteen times slower in a single sequential pass: the demo's verdict says speed
    cannot be judged (the reason on the rule, one note in the verdict), never `warn performance`;
    `evalsuite gate` on the run says the same; and no library warning reaches the output."""
    import json
    import re

    from typer.testing import CliRunner

    from evalsuite.cli import app

    suite = tmp_path / "speed.yaml"
    suite.write_text(SPEED_SUITE.format(casesets=REPO / "casesets"), "utf-8")
    out = io.StringIO()
    opts = DemoOptions(profile="quick", runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite"))
    judgment = run_demo(suite, opts, console=Console(file=out, width=200))
    text = out.getvalue()
    assert not [line for line in text.splitlines() if line.lstrip().startswith("warn performance")], text
    perf = judgment.verdict.result("slow-int8", "performance")
    assert perf.status == "cannot_judge" and "latency p95 x" in perf.note and "from one sequential pass" in perf.note, perf
    assert "speed (latency, tokens/s) is not judged" in text
    assert judgment.comparison.perf_for("slow-int8").latency_p95_ratio > 5, "the pass itself did see the slowdown"

    gate = CliRunner().invoke(app, ["gate", "last", "--runs-dir", str(tmp_path / "runs"), "--json", str(tmp_path / "v.json")])
    doc = json.loads((tmp_path / "v.json").read_text())
    assert gate.exit_code == judgment.exit_code
    assert {(r["variant"], r["rule"]): r["status"] for r in doc["results"]} == {(r.variant, r.rule): r.status for r in judgment.verdict.results}
    captured = capfd.readouterr()
    assert not re.search(LIBRARY_WARNING, text + captured.out + captured.err), captured.err
