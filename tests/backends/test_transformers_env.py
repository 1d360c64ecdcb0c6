"""The transformers backend in a worker of a variant's own environment (evalsuite.backends.transformers_env),
over the real pipe: `environment: {python: sys.executable}` runs the worker in evalsuite's own venv on a
tiny random Llama, so its outputs must be the in-process backend's, token for token."""

from __future__ import annotations

import os
import signal
import stat
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from evalsuite.backends.base import GenerationSettings, make_backend  # noqa: E402
from evalsuite.backends.transformers_env import TransformersWorkerBackend  # noqa: E402
from evalsuite.cases.suite import Variant  # noqa: E402
from evalsuite.errors import EvalsuiteError  # noqa: E402
from tests.backends.test_transformers import _requests, _save_tiny  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def _variant(model_dir, cache_dir, environment=None, name="v"):
    gen = GenerationSettings(max_new_tokens=10, batch_size=4)
    return Variant(
        name, backend="transformers", model=str(model_dir), options={"device": "cpu", "cache_dir": cache_dir}, generation=gen, environment=environment
    )


@pytest.fixture(scope="module")
def worker(tiny_dir, cache_dir):
    be = make_backend(_variant(tiny_dir, cache_dir, {"python": sys.executable}))
    yield be
    be.close()


def test_the_registry_builds_the_worker_backend_only_for_an_environment(tiny_dir, cache_dir, worker):
    from evalsuite.backends.transformers import TransformersBackend

    assert isinstance(worker, TransformersWorkerBackend)
    assert isinstance(make_backend(_variant(tiny_dir, cache_dir)), TransformersBackend)


def test_the_worker_generates_what_the_in_process_backend_does(tiny_dir, cache_dir, worker):
    local = make_backend(_variant(tiny_dir, cache_dir))
    try:
        reqs = _requests(5)
        mine, theirs = worker.generate(reqs), local.generate(reqs)
    finally:
        local.close()
    assert [(g.case_id, g.sample, g.variant) for g in mine] == [(r.case_id, r.sample, "v") for r in reqs]
    assert [g.text for g in mine] == [g.text for g in theirs] and all(g.ok for g in mine)
    assert [g.extra["token_ids"] for g in mine] == [g.extra["token_ids"] for g in theirs]
    assert mine[0].batch_size == 5 and mine[0].latency_s and mine[0].extra["cost"]  # the same records, built by the same code
    assert worker.model_memory_mb() and worker.peak_memory_mb() and worker.load_s is not None


def test_identity_and_environment_are_read_from_the_worker(tiny_dir, cache_dir, worker):
    from importlib import metadata

    local = make_backend(_variant(tiny_dir, cache_dir))
    ident = worker.weights_identity()
    assert ident is not None
    assert ident["model"] == local.weights_identity()["model"]  # the same files
    assert ident["libraries"]["transformers"] == metadata.version("transformers")  # as the worker's environment reports it
    assert ident["environment"]["python"] and ident["environment"]["libraries"]["torch"] == metadata.version("torch")
    assert worker.fingerprint() != local.fingerprint()  # `environment:` is part of the spec
    engine = worker.engine_identity()
    assert engine is not None and engine["version"] == metadata.version("transformers") and engine["environment"] == f"python {sys.executable}"
    env = worker.environment()
    assert env["libraries"] == {"torch": metadata.version("torch"), "transformers": metadata.version("transformers")} and env["device"] == "cpu"


def test_environment_asks_the_interpreter_without_starting_a_model(tiny_dir, cache_dir):
    be = make_backend(_variant(tiny_dir, cache_dir, {"python": sys.executable}))
    try:
        env = be.environment()
        assert env["libraries"]["transformers"] and be.worker is None  # a one-off question, no worker kept
    finally:
        be.close()


def test_a_worker_that_dies_is_started_again_for_the_next_batch(tiny_dir, cache_dir):
    be = make_backend(_variant(tiny_dir, cache_dir, {"python": sys.executable}))
    assert isinstance(be, TransformersWorkerBackend)
    try:
        first = be.generate(_requests(2))
        assert be.worker is not None and be.worker.proc is not None
        os.kill(be.worker.proc.pid, signal.SIGKILL)
        with pytest.raises(EvalsuiteError, match=r"variant 'v': the worker died during a batch of 2: it exited with status -9"):
            be.generate(_requests(2))
        assert be.load_error is None
        again = be.generate(_requests(2))
        assert [g.text for g in again] == [g.text for g in first]
    finally:
        be.close()


def test_an_unknown_message_is_the_workers_error_not_a_crash(worker):
    worker.load()
    assert worker.worker is not None
    answer = worker.worker.ask({"kind": "bogus"})
    assert answer == {"ok": False, "error": "ValueError: unknown message kind 'bogus'"}
    assert worker.generate(_requests(1))[0].ok  # still serving


def _broken_python(tmp_path, body="echo 'ModuleNotFoundError: No module named yaml' >&2; exit 3"):
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_an_environment_that_does_not_start_is_the_variants_load_error(tmp_path, tiny_dir, cache_dir):
    be = make_backend(_variant(tiny_dir, cache_dir, {"python": _broken_python(tmp_path)}, name="broken"))
    fp = be.fingerprint()  # never raises: the run computes every fingerprint before it starts
    assert be.load_error and "variant 'broken': the worker" in be.load_error and "exited with status 3" in be.load_error
    assert "No module named yaml" in be.load_error  # the worker's own last log lines
    assert fp == be.variant.fingerprint({"unavailable": {"python": _broken_python(tmp_path)}})
    assert be.weights_identity() is None and be.engine_identity() is None
    with pytest.raises(EvalsuiteError, match="variant 'broken'"):
        be.generate(_requests(1))


def test_a_run_goes_on_when_a_variants_environment_fails(write, tmp_path, tiny_dir, cache_dir, repo):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.faults import load_failures
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.verdict.compare import compare_run

    broken = _broken_python(tmp_path)
    suite = write(
        "suite.yaml",
        f"""
        schema_version: 1
        name: env-fails
        casesets: ["{repo / "casesets" / "kb_qa" / "examples.yaml"}"]
        generation: {{max_new_tokens: 8, batch_size: 4}}
        variants:
          - {{name: base, baseline: true, backend: transformers, model: "{tiny_dir}", options: {{device: cpu, cache_dir: "{cache_dir}"}}}}
          - {{name: broken, environment: {{python: "{broken}"}}}}
        """,
    )
    result = run_suite(load_suite(suite), RunOptions(progress=False, runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite")))
    gens = list(result.store.generations())
    assert {g.case_id for g in gens if g.variant == "base" and g.ok} == {c.id for c in result.cases}  # the baseline ran
    assert [g for g in gens if g.variant == "broken"] and all(not g.ok for g in gens if g.variant == "broken")
    assert "exited with status 3" in load_failures(result.store)["broken"]
    assert any(p.startswith("variant 'broken': cannot judge") for p in compare_run(result.store).problems)


def test_an_environment_that_does_not_build_is_the_variants_load_error_with_pips_lines(tmp_path, monkeypatch, tiny_dir, cache_dir):
    from evalsuite.backends import envs

    monkeypatch.setenv(envs.ENVS_VAR, str(tmp_path / "envs"))
    fail = "print('ERROR: No matching distribution found for transformers==9.9.9'); raise SystemExit(1)"
    monkeypatch.setattr(envs, "build_commands", lambda spec, target: [[sys.executable, "-c", fail]])
    be = make_backend(_variant(tiny_dir, cache_dir, {"requirements": ["transformers==9.9.9"]}, name="tf-999"))
    be.fingerprint()  # never raises
    assert be.load_error is not None and be.load_error.startswith("variant 'tf-999': building the environment for transformers==9.9.9 failed")
    assert be.load_error.endswith("ERROR: No matching distribution found for transformers==9.9.9")
    assert be.environment() == {"libraries": {}, "python": None, "built": False, "requirements": ["transformers==9.9.9"]}  # not built: says so
    with pytest.raises(EvalsuiteError, match="variant 'tf-999': building the environment"):
        be.load()
