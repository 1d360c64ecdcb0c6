"""A variant's identity: which files it deploys, their hashes, and the check before a rollback."""

from __future__ import annotations

import pytest

from evalsuite.releases.identity import artefact_refs, check_identity, variant_identity

from .conftest import model_dir


@pytest.mark.parametrize(
    ("variant", "refs"),
    [
        ({"backend": "fake"}, {}),
        ({"backend": "fake", "model": "/m/a"}, {"model": "/m/a"}),
        ({"backend": "transformers"}, {"model": "embedded"}),
        ({"backend": "transformers", "model": "/m/a", "quantization": {"method": "gptq", "checkpoint": "/m/a-gptq"}}, {"model": "/m/a", "checkpoint": "/m/a-gptq"}),
        ({"backend": "transformers", "speculative": {"method": "draft", "draft": {"model": "/m/d"}}}, {"model": "embedded", "draft": "/m/d"}),
        ({"backend": "vllm", "model": "/m/a", "speculative": {"method": "draft", "model": "/m/d"}}, {"model": "/m/a", "draft": "/m/d"}),
        ({"backend": "http", "model": "gpt-served"}, {}),  # a remote server's model name is not a file
        ({"backend": "http", "options": {"serve": {"launcher": "transformers"}}}, {"model": "embedded"}),
        ({"backend": "http", "options": {"serve": {"launcher": "llama_cpp", "gguf": "/m/q4.gguf"}}}, {"gguf": "/m/q4.gguf"}),
    ],
)
def test_artefact_refs(variant, refs):
    assert artefact_refs(variant) == refs


def test_a_model_directory_is_identified_by_its_files_and_a_change_is_caught(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "cache"))
    spec = {"backend": "fake", "model": str(model_dir(tmp_path / "m", b"v1"))}
    ident = variant_identity(spec, "fp1")
    art = ident["artefacts"]["model"]
    assert art["files"] == 2 and len(art["sha256"]) == 64 and art["path"] == str(tmp_path / "m")
    assert check_identity(ident, spec, "fp1").ok
    assert check_identity(ident, spec, "fp2").problems == ("fingerprint: fp1 recorded with its identity, fp2 in the ledger",)
    (tmp_path / "m" / "model.safetensors").write_bytes(b"v2")
    (problem,) = check_identity(ident, spec, "fp1").problems
    assert problem.startswith(f"model {spec['model']}: its files changed since it was cleared (sha256 {art['sha256'][:16]}, 2 file(s) then;")
    (tmp_path / "m" / "config.json").unlink()
    assert "is not a transformers model directory (no config.json in " in check_identity(ident, spec, "fp1").problems[0]


def test_a_model_missing_when_recorded_cannot_be_rolled_back_to(tmp_path):
    spec = {"backend": "fake", "model": str(tmp_path / "nowhere")}
    ident = variant_identity(spec, "fp")
    assert "error" in ident["artefacts"]["model"]
    assert "its files were not found when it was cleared" in check_identity(ident, spec, "fp").problems[0]


def test_a_variant_without_files_is_its_fingerprint():
    ident = variant_identity({"backend": "fake"}, "fp")
    check = check_identity(ident, {"backend": "fake"}, "fp")
    assert ident == {"fingerprint": "fp", "backend": "fake", "artefacts": {}} and check.ok
    assert check.summary() == "no model files (backend fake): its identity is its fingerprint fp"
