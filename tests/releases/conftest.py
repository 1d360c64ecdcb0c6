"""A stored run (fake backend) with variants whose release paths differ, for the release ledger tests.

- `good-a`, `good-b`: answer like the baseline; each names a model directory (a config and a weights
  file), so their identity is file hashes that a test can change;
- `tweak`: one answer rephrased, still correct: flagged for review (low similarity), passes the gate;
- `bad`: drops a citation on one case: a pass->fail flip, a regression at pilot and production unless
  a reviewer accepts it (dev only warns).

Model files are hashed into a cache of the test session's own ($EVALSUITE_CACHE_DIR), never the user's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # verdict_synth

from verdict_synth import write_sets, write_suite  # noqa: E402

RUBRIC = """\
schema_version: 1
name: releases-test
rules:
  - name: kb-citation-recall
    scenario: kb_qa
    metric: citations.recall
    max_flips: 0
stages:
  dev:
    rules:
      kb-citation-recall: {severity: warn}   # dev tolerates the flip that blocks pilot and production
review:
  min_similarity: 99
  max_open: 100
"""
BAD_CASE, TWEAK_CASE = "kb-004", "kb-005"
CHANGES = ["quantization", "backend"]  # the scripted outputs are backend options: declared, so no one-variable warning


def model_dir(path: Path, weights: bytes) -> Path:
    """A model directory as evalsuite.models hashes it: a config and a weights file."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "llama"}', "utf-8")
    (path / "model.safetensors").write_bytes(weights)
    return path


def make_suite(root: Path) -> Path:
    base = write_sets(root, n_kb=10)
    (root / "rubric.yaml").write_text(RUBRIC, "utf-8")
    bad = dict(base, **{BAD_CASE: "Service 4 restarts every 6 hours."})
    tweak = dict(base, **{TWEAK_CASE: "Every 7 hours, service 5 restarts [doc-005]."})
    variants = [
        {"name": "good-a", "backend": "fake", "model": str(model_dir(root / "models" / "a", b"weights a")), "quantization": {"method": "bnb", "bits": 8},
         "changes": CHANGES, "options": {"outputs": base, "default": "no output"}},
        {"name": "good-b", "backend": "fake", "model": str(model_dir(root / "models" / "b", b"weights b")), "quantization": {"method": "bnb", "bits": 4},
         "changes": CHANGES, "options": {"outputs": base, "default": "no output"}},
        {"name": "tweak", "backend": "fake", "quantization": {"method": "gptq", "bits": 4}, "changes": CHANGES, "options": {"outputs": tweak, "default": "no output"}},
        {"name": "bad", "backend": "fake", "quantization": {"method": "bnb", "bits": 4, "quant_type": "nf4"}, "changes": CHANGES, "options": {"outputs": bad, "default": "no output"}},
    ]
    return write_suite(root, base, variants, name="rel", rubric=str(root / "rubric.yaml"))


def run_suite_at(suite: Path):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    return run_suite(load_suite(suite), RunOptions(progress=False)).store


@pytest.fixture(scope="session", autouse=True)
def model_hash_cache(tmp_path_factory):
    """File hashes go to a cache of this session's own (gate subprocesses inherit it)."""
    import os

    old = os.environ.get("EVALSUITE_CACHE_DIR")
    os.environ["EVALSUITE_CACHE_DIR"] = str(tmp_path_factory.mktemp("model-cache"))
    yield
    if old is None:
        os.environ.pop("EVALSUITE_CACHE_DIR", None)
    else:
        os.environ["EVALSUITE_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def release_run(tmp_path_factory):
    """The stored run, at <root>/out/runs/<id> (its default ledger: <root>/out/releases.sqlite, untouched by the tests)."""
    root = tmp_path_factory.mktemp("releases")
    suite = make_suite(root)
    store = run_suite_at(suite)
    return {"root": root, "suite": suite, "store": store, "rubric": root / "rubric.yaml", "runs_dir": store.dir.parent}


@pytest.fixture
def paths(tmp_path):
    """A fresh ledger and review queue for one test."""
    return {"ledger": tmp_path / "releases.sqlite", "queue": tmp_path / "review.sqlite"}
