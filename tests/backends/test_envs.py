"""The environment cache (evalsuite.backends.envs): the digest, a build once under a lock with its
marker written last, a half-built folder never used, a failed build naming the requirements and
pip's last lines. pip itself is replaced by small commands (the real build is tests/e2e/test_upgrade_real.py)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from evalsuite.backends import envs
from evalsuite.backends.envs import EnvBuildError, EnvSpec
from evalsuite.errors import EvalsuiteError

#: a fake build's interpreter: a script that runs this one (a symlink would lose this venv's site-packages)
_WRAP = f"def _wrap(path):\n    import os, sys\n    open(path, 'w').write('#!/bin/sh\\nexec {sys.executable} \"$@\"\\n')\n    os.chmod(path, 0o755)\n"


@pytest.fixture
def envs_dir(tmp_path, monkeypatch):
    root = tmp_path / "envs"
    monkeypatch.setenv(envs.ENVS_VAR, str(root))
    return root


@pytest.fixture
def fake_build(monkeypatch):
    """Builds are this interpreter linked into the folder (no pip); returns the list of folders built."""
    built: list[Path] = []

    def commands(spec, target):
        built.append(target)
        script = _WRAP + f"import os; os.makedirs({str(target / 'bin')!r}, exist_ok=True); _wrap({str(target / 'bin' / 'python')!r})"
        return [[sys.executable, "-c", script]]

    monkeypatch.setattr(envs, "build_commands", commands)
    return built


@pytest.mark.parametrize(
    "req, name",
    [("transformers==5.25.0", "transformers"), ("Transformers[torch]>=5", "transformers"), ("tokenizers_x.y ~= 1.0", "tokenizers-x-y"), ("torch", "torch")],
)
def test_requirement_names_are_normalized(req, name):
    assert envs.requirement_name(req) == name


def test_the_digest_is_what_is_installed_in_any_order():
    a = EnvSpec.of(["transformers==5.25.0", "tokenizers==0.22.1"])
    assert a.digest == EnvSpec.of(["tokenizers==0.22.1", " transformers==5.25.0", "transformers==5.25.0"]).digest
    assert a.digest != EnvSpec.of(["transformers==5.24.0", "tokenizers==0.22.1"]).digest
    assert len(a.digest) == 16 and a.libraries() == ("torch", "transformers", "tokenizers")


def test_torch_and_evalsuites_dependencies_come_with_the_requirements():
    spec = EnvSpec.of(["transformers==5.25.0"])
    base = envs.base_requirements()
    assert any(envs.requirement_name(r) == "pyyaml" for r in base)  # evalsuite's own dependencies, no extra
    assert not any(envs.requirement_name(r) == "transformers" for r in base)  # the `models` extra (transformers<5.25) is not installed
    assert envs.DEFAULT_TORCH in spec.install and spec.install[-1] == "transformers==5.25.0"
    pinned = EnvSpec.of(["transformers==5.25.0", "torch==2.14.1", "numpy==2.3.0"])
    assert envs.DEFAULT_TORCH not in pinned.install and "torch==2.14.1" in pinned.install
    assert [r for r in pinned.install if envs.requirement_name(r) == "numpy"] == ["numpy==2.3.0"]  # a named dependency replaces evalsuite's range


def test_an_environment_needs_a_requirement():
    with pytest.raises(EvalsuiteError, match="at least one requirement"):
        EnvSpec.of([" "])


def test_a_build_writes_its_marker_last_and_is_reused(envs_dir, fake_build):
    spec = EnvSpec.of(["transformers==5.25.0"])
    env = envs.ensure_env(spec)
    assert env.complete and env.path == envs_dir / spec.digest and env.python.is_file()
    meta = json.loads((env.path / envs.MARKER).read_text())
    assert meta["requirements"] == ["transformers==5.25.0"] and meta["install"] == list(spec.install) and meta["python"] == spec.python
    from importlib import metadata

    assert meta["libraries"]["transformers"] == metadata.version("transformers")  # read from the built interpreter
    assert envs.ensure_env(spec).path == env.path and len(fake_build) == 1  # built once
    assert [e.digest for e in envs.list_envs()] == [spec.digest] and envs.list_envs()[0].size_bytes() > 0


def test_a_half_built_environment_is_never_used(envs_dir, fake_build):
    spec = EnvSpec.of(["transformers==5.25.0"])
    half = envs_dir / spec.digest
    (half / "bin").mkdir(parents=True)
    (half / "leftover").write_text("a build that was killed")
    assert not envs.built(spec.digest).complete and envs.built_interpreter({"requirements": ["transformers==5.25.0"]}) is None
    assert [(e.digest, e.complete) for e in envs.list_envs()] == [(spec.digest, False)]
    env = envs.ensure_env(spec)
    assert env.complete and not (half / "leftover").exists() and len(fake_build) == 1
    assert envs.built_interpreter({"requirements": ["transformers==5.25.0"]}) == str(env.python)


def test_two_builders_of_one_environment_build_it_once(envs_dir, monkeypatch):
    built: list[Path] = []

    def commands(spec, target):
        built.append(target)
        script = _WRAP + f"import os, time; time.sleep(0.5); os.makedirs({str(target / 'bin')!r}); _wrap({str(target / 'bin' / 'python')!r})"
        return [[sys.executable, "-c", script]]

    monkeypatch.setattr(envs, "build_commands", commands)
    spec = EnvSpec.of(["transformers==5.25.0"])
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(envs.ensure_env(spec).path)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(built) == 1 and len(results) == 2 and len(set(results)) == 1


def test_a_failed_build_names_the_requirements_and_pips_last_lines(envs_dir, monkeypatch):
    pip = (
        "import sys; print('Looking in indexes: ...'); print('ERROR: Could not find a version that satisfies the requirement transformers==0.0.1'); sys.exit(1)"
    )
    monkeypatch.setattr(
        envs, "build_commands", lambda spec, target: [[sys.executable, "-c", _WRAP + f"import os; os.makedirs({str(target)!r})"], [sys.executable, "-c", pip]]
    )
    spec = EnvSpec.of(["transformers==0.0.1"])
    with pytest.raises(EnvBuildError) as info:
        envs.ensure_env(spec)
    msg = str(info.value)
    assert "building the environment for transformers==0.0.1 failed" in msg and "exited with 1" in msg
    assert msg.rstrip().endswith("ERROR: Could not find a version that satisfies the requirement transformers==0.0.1")
    assert not (envs_dir / spec.digest).exists()  # nothing half-built is left to be taken for an environment


def test_environments_are_found_by_digest_prefix_and_removed(envs_dir, fake_build):
    a, b = envs.ensure_env(EnvSpec.of(["transformers==5.25.0"])), envs.ensure_env(EnvSpec.of(["transformers==5.24.0"]))
    assert envs.find_env(a.digest[:6]).digest == a.digest
    with pytest.raises(EvalsuiteError, match="no environment 'zzz'"):
        envs.find_env("zzz")
    envs.remove_env(envs.find_env(a.digest))
    assert [e.digest for e in envs.list_envs()] == [b.digest] and not a.path.exists()


def test_a_named_interpreter_must_exist(tmp_path):
    with pytest.raises(EvalsuiteError, match="environment.python: .*nope is not an executable file"):
        envs.interpreter({"python": str(tmp_path / "nope")})
    assert envs.interpreter({"python": sys.executable}) == (sys.executable, None)


def test_probe_reads_versions_without_importing(tmp_path):
    from importlib import metadata

    found = envs.probe_versions(sys.executable, ["transformers", "no-such-dist-xyz"])
    assert found == {"transformers": metadata.version("transformers"), "no-such-dist-xyz": None}


def test_specs_to_build_from_a_suite_or_requirements(write, repo):
    specs = envs.specs_to_build([str(repo / "suites" / "upgrade.yaml")])
    assert [s.requirements for s in specs] == [("transformers==5.25.0",)]
    assert envs.specs_to_build(["transformers==5.25.0", "tokenizers==0.22.1"])[0].requirements == ("transformers==5.25.0", "tokenizers==0.22.1")
    with pytest.raises(EvalsuiteError, match="not a pip requirement .*nor a suite file"):
        envs.specs_to_build(["suites/nope.yaml"])
    with pytest.raises(EvalsuiteError, match="no variant has `environment"):
        envs.specs_to_build([str(repo / "suites" / "fake.yaml")])
