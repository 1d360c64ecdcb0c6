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
    assert "same as base" in text and "fake-int8" in text
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
