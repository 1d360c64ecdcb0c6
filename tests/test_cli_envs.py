"""`evalsuite env list | build | remove` (issue 42) over an environment cache in a temp folder, builds
made by a small command instead of pip (the real build: tests/e2e/test_upgrade_real.py)."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from evalsuite.backends import envs
from evalsuite.cli import app

runner = CliRunner()

#: a fake build's interpreter: a script that runs this one (a symlink would lose this venv's site-packages)
_WRAP = f"def _wrap(path):\n    import os, sys\n    open(path, 'w').write('#!/bin/sh\\nexec {sys.executable} \"$@\"\\n')\n    os.chmod(path, 0o755)\n"


@pytest.fixture
def envs_dir(tmp_path, monkeypatch):
    root = tmp_path / "envs"
    monkeypatch.setenv(envs.ENVS_VAR, str(root))

    def commands(spec, target):
        script = _WRAP + f"import os; os.makedirs({str(target / 'bin')!r}); _wrap({str(target / 'bin' / 'python')!r})"
        return [[sys.executable, "-c", script]]

    monkeypatch.setattr(envs, "build_commands", commands)
    return root


def _run(*args):
    res = runner.invoke(app, list(args))
    return res.exit_code, " ".join(res.output.split())


def test_list_says_where_when_there_are_none(envs_dir):
    code, out = _run("env", "list")
    assert code == 0 and f"no environments under {envs_dir}" in out


def test_build_then_list_then_remove(envs_dir, repo):
    code, out = _run("env", "build", str(repo / "suites" / "upgrade.yaml"))
    digest = envs.EnvSpec.of(["transformers==5.25.0"]).digest
    assert code == 0, out
    assert f"building environment {digest} (transformers==5.25.0)" in out and f"{digest}: built in" in out
    code, out = _run("env", "build", "transformers==5.25.0")
    assert code == 0 and f"{digest}: already built" in out
    (envs_dir / "0123456789abcdef" / "bin").mkdir(parents=True)  # a build that did not finish
    code, out = _run("env", "list")
    assert code == 0 and "2 environment(s)" in out and digest in out and "transformers==5.25.0" in out and "incomplete" in out
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in out
    code, out = _run("env", "remove", digest[:8])
    assert code == 0 and f"removed {digest} (transformers==5.25.0" in out and not (envs_dir / digest).exists()
    code, out = _run("env", "remove", "--all")
    assert code == 0 and "removed 0123456789abcdef (incomplete" in out and envs.list_envs() == []


@pytest.mark.parametrize(
    "args, message",
    [
        (("env", "remove"), "give a digest or --all"),
        (("env", "remove", "abc", "--all"), "give a digest or --all"),
        (("env", "remove", "feedbeef"), "no environment 'feedbeef'"),
        (("env", "build", "transformers=5.25"), "not a pip requirement"),
    ],
)
def test_bad_input_exits_4(envs_dir, args, message):
    code, out = _run(*args)
    assert code == 4 and message in out, out


def test_a_failed_build_exits_4_with_pips_last_lines(envs_dir, monkeypatch):
    fail = "print('ERROR: No matching distribution found for transformers==9.9.9'); raise SystemExit(1)"
    monkeypatch.setattr(envs, "build_commands", lambda spec, target: [[sys.executable, "-c", fail]])
    code, out = _run("env", "build", "transformers==9.9.9")
    assert code == 4 and "building the environment for transformers==9.9.9 failed" in out and "No matching distribution found" in out
