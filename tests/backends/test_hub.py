"""Models by hub id: resolution through a real hub cache layout built locally (hit, miss offline,
revisions, a moved branch is a new fingerprint), suite parsing of ids and revisions, `check_model`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hubcache import add_snapshot, fake_commit, point_ref  # noqa: E402

from evalsuite import models  # noqa: E402
from evalsuite.cases.suite import load_suite  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402
from evalsuite.models import hub  # noqa: E402

pytest.importorskip("huggingface_hub")
REPO_ID = "evalsuite-test/tiny-chat"


def _model_dir(root: Path, config: dict | None = None) -> Path:
    """A stand-in model directory (config, weights, tokenizer files): resolution never loads it."""
    d = root / "src"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config or {"model_type": "llama", "hidden_size": 64}))
    (d / "model.safetensors").write_bytes(b"weights-v1" * 100)
    (d / "tokenizer.json").write_text("{}")
    (d / "README.md").write_text("not fetched")
    return d


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "evalsuite-cache"))
    return cache


def test_hit_resolves_the_snapshot_of_main(hub_cache, tmp_path):
    commit = fake_commit("v1")
    snap = add_snapshot(hub_cache, REPO_ID, _model_dir(tmp_path), commit)
    r = models.resolve_model(REPO_ID)
    assert r.path == snap and r.source == "hub" and r.commit == commit and r.revision == "main"
    assert r.identity() == {"source": "hub", "repo_id": REPO_ID, "commit": commit}
    assert not (r.path / "README.md").exists()


def test_revision_by_tag_and_by_commit(hub_cache, tmp_path):
    src = _model_dir(tmp_path)
    c1, c2 = fake_commit("v1"), fake_commit("v2")
    add_snapshot(hub_cache, REPO_ID, src, c1)
    add_snapshot(hub_cache, REPO_ID, src, c2, refs=("v2.0",), edit=lambda n, b: b + b"x" if n == "model.safetensors" else b)
    assert models.resolve_model(REPO_ID, "v2.0").commit == c2
    assert models.resolve_model(REPO_ID, c1).commit == c1
    assert models.resolve_model(REPO_ID).commit == c1


def test_miss_offline_names_id_revision_and_the_fetch_command(hub_cache, tmp_path):
    add_snapshot(hub_cache, REPO_ID, _model_dir(tmp_path), fake_commit("v1"))
    with pytest.raises(EvalsuiteError) as exc:
        models.resolve_model("evalsuite-test/tiny-chot", "v3")
    msg = str(exc.value)
    assert "'evalsuite-test/tiny-chot' (revision v3)" in msg and "HF_HUB_OFFLINE" in msg
    assert "hf download evalsuite-test/tiny-chot --revision v3" in msg
    assert "close to it: evalsuite-test/tiny-chat" in msg  # a typo finds the cached model
    with pytest.raises(EvalsuiteError, match=r"revision nope\).*not in the local Hugging Face cache"):
        models.resolve_model(REPO_ID, "nope")  # a revision never fetched


def test_moved_branch_is_a_new_fingerprint(hub_cache, tmp_path):
    pytest.importorskip("transformers")
    from evalsuite.backends.transformers import TransformersBackend
    from evalsuite.cases.suite import Variant

    src = _model_dir(tmp_path)
    c1, c2 = fake_commit("v1"), fake_commit("v2")
    add_snapshot(hub_cache, REPO_ID, src, c1)
    add_snapshot(hub_cache, REPO_ID, src, c2, refs=())  # the same files at a new commit, main not moved yet

    def fp(revision=None):
        v = Variant(name="base", backend="transformers", model=REPO_ID, revision=revision, options={"device": "cpu"}, baseline=True)
        return TransformersBackend(v).fingerprint()

    before = fp()
    assert fp() == before, "the same commit is the same variant"
    point_ref(hub_cache, REPO_ID, "main", c2)
    assert fp() != before, "main moved: a different variant, not a cache hit"
    assert fp(c1) == before, "pinning the old commit finds the old variant again"


def test_snapshot_identity_reads_blob_names_without_hashing(hub_cache, tmp_path, monkeypatch):
    snap = add_snapshot(hub_cache, REPO_ID, _model_dir(tmp_path), fake_commit("v1"))
    monkeypatch.setattr(models.files, "file_sha256", lambda *a, **k: pytest.fail("a hub blob is named by its hash: nothing to hash"))
    ident = models.model_dir_identity(snap)
    assert ident["files"] == 3


def test_local_dir_and_bad_names(tmp_path, hub_cache):
    src = _model_dir(tmp_path)
    assert models.resolve_model(str(src)).source == "local"
    with pytest.raises(EvalsuiteError, match="applies to hub ids, but .* is a local directory"):
        models.resolve_model(str(src), "main")
    with pytest.raises(EvalsuiteError, match="not found, and it is not a hub id"):
        models.resolve_model("./no/such/dir")
    (tmp_path / "noconfig").mkdir()
    with pytest.raises(EvalsuiteError, match="no config.json"):
        models.resolve_model(str(tmp_path / "noconfig"))
    with pytest.raises(EvalsuiteError, match="quantization.checkpoint 'org/x'"):
        models.resolve_model("org/x", field="quantization.checkpoint")


def test_check_model_is_offline_aware(hub_cache, tmp_path):
    add_snapshot(hub_cache, REPO_ID, _model_dir(tmp_path), fake_commit("v1"))
    hit = hub.check_model(REPO_ID)
    assert hit["ok"] and hit["where"] == "cache" and hit["commit"] == fake_commit("v1")
    miss = hub.check_model("org/absent", "v1")
    assert not miss["ok"] and "hf download org/absent --revision v1" in miss["message"]
    assert hub.check_model(str(tmp_path / "src"))["where"] == "local"
    assert not hub.check_model("no-such-thing")["ok"]


def test_suite_keeps_hub_ids_and_parses_revisions(write, tmp_path):
    (tmp_path / "ckpts" / "local").mkdir(parents=True)
    write("cs.yaml", "schema_version: 1\nscenario: kb_qa\ncases:\n  - {id: a, kind: qa, prompt: hi, checks: [{type: contains, value: x}]}\n")
    path = write(
        "suite.yaml",
        """
        schema_version: 1
        casesets: [cs.yaml]
        variants:
          - {name: base, baseline: true, backend: fake, model: Org/Model-7B, revision: v1.0}
          - {name: ct, quantization: {method: compressed-tensors, checkpoint: Org/Model-7B-W8A8, revision: abc}}
          - {name: local-ckpt, quantization: {method: gptq, checkpoint: ckpts/local}}
          - {name: other, model: Org/Other, changes: [backend]}
          - {name: rerun, noise: true, generation: {batch_size: 2}}
        """,
    )
    s = load_suite(path)
    v = {x.name: x for x in s.variants}
    assert v["base"].model == "Org/Model-7B" and v["base"].revision == "v1.0"
    assert v["ct"].quantization["checkpoint"] == "Org/Model-7B-W8A8" and v["ct"].revision == "v1.0"
    assert v["local-ckpt"].quantization["checkpoint"] == str(tmp_path / "ckpts" / "local")
    assert v["other"].revision is None, "a variant's own model does not take the baseline's revision"
    assert v["other"].changes == ("backend",)
    assert v["base"].to_dict()["revision"] == "v1.0" and "revision" not in v["base"].spec()  # the commit is in the weights identity
    assert v["ct"].changes == ("quantization",)


CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: d1, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'How long does a VPN session last?', context: [d1]}
  - {id: q2, prompt: 'What lasts 12 hours?', context: [d1]}
"""


def test_a_run_from_the_hub_cache_records_the_commit_never_the_token(hub_cache, tmp_path, monkeypatch):
    """A tiny real model served from the hub cache generates; the run's signature names the hub id,
    revision and commit; HF_TOKEN (read by huggingface_hub alone) is in no file of the run."""
    pytest.importorskip("transformers")
    from backends.test_transformers import _save_tiny
    from evalsuite.judge import judge_run
    from evalsuite.report.api import write_report
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    monkeypatch.setenv("HF_TOKEN", "hf_secretsecretsecret")
    add_snapshot(hub_cache, REPO_ID, _save_tiny(tmp_path / "tiny"), fake_commit("v1"))
    (tmp_path / "cs.yaml").write_text(CASES)
    (tmp_path / "suite.yaml").write_text(
        f"schema_version: 1\ncasesets: [cs.yaml]\ngeneration: {{max_new_tokens: 6, batch_size: 1}}\nvariants:\n"
        f"  - {{name: base, baseline: true, backend: transformers, model: {REPO_ID}, revision: main, options: {{device: cpu}}}}\n"
        "  - {name: rerun, noise: true, generation: {batch_size: 2}}\n"
    )
    res = run_suite(load_suite(tmp_path / "suite.yaml"), RunOptions(progress=False, runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite")))
    assert res.errors == 0 and res.generated == 4
    text = "\n".join(f.read_text("utf-8", errors="replace") for f in Path(res.run_dir).rglob("*") if f.is_file())
    assert "hf_secret" not in text
    assert REPO_ID in text
    # the variant matrix: the commit `main` resolved to, from the run's signature, in both reports
    assert res.store.signature["weights"]["base"]["source"]["commit"] == fake_commit("v1")
    rep = write_report(judge_run(res.store), out_dir=tmp_path / "report", plots=False)
    md = Path(rep.markdown).read_text("utf-8")
    assert f"revision main ({fake_commit('v1')[:10]})" in md, md
    html = Path(rep.html).read_text("utf-8")
    assert f"@ main ({fake_commit('v1')[:10]})" in html


def test_the_release_identity_resolves_the_pinned_revision(hub_cache, tmp_path):
    """A rollback checks the files of the revision the suite pinned, not of wherever `main` is now."""
    from evalsuite.releases.identity import variant_identity

    src = _model_dir(tmp_path)
    add_snapshot(hub_cache, REPO_ID, src, fake_commit("v1"), refs=("main", "v1"))
    add_snapshot(hub_cache, REPO_ID, src, fake_commit("v2"), refs=("main",), edit=lambda n, b: b + b"!" if n == "model.safetensors" else b)
    pinned = variant_identity({"backend": "transformers", "model": REPO_ID, "revision": "v1"}, "fp")["artefacts"]["model"]
    moved = variant_identity({"backend": "transformers", "model": REPO_ID}, "fp")["artefacts"]["model"]
    assert "error" not in pinned and fake_commit("v1") in pinned["path"], pinned
    assert fake_commit("v2") in moved["path"]
    assert {k: x for k, x in moved.items() if k != "path"} != {k: x for k, x in pinned.items() if k != "path"}, "other weights, other identity"
