"""The public API is typed: mypy (and an editor) sees the real signatures through `evalsuite.<name>`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import evalsuite

ROOT = Path(__file__).resolve().parents[1]


def _stub_imports() -> dict[str, str]:
    """name -> "module:attr" of the re-exports of evalsuite/__init__.pyi (the public API's types)."""
    tree = ast.parse((ROOT / "evalsuite" / "__init__.pyi").read_text("utf-8"))
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        assert node.level == 1
        for alias in node.names:
            assert alias.asname in (None, alias.name)  # `x as x`: re-exported under its own name
            out[alias.name] = f"evalsuite.{node.module}:{alias.name}"
    return out


def test_the_stubs_re_exports_are_the_one_list_of_names():
    declared = _stub_imports()
    assert set(declared) == set(evalsuite._EXPORTS)
    for name, target in declared.items():  # the same object, however the module is spelled in _EXPORTS
        module, _, attr = target.partition(":")
        assert getattr(importlib.import_module(module), attr) is getattr(evalsuite, name), name


def test_mypy_sees_the_real_signature_of_run_suite(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # mypy finds `evalsuite` here, this checkout's, before any installed copy
    probe = tmp_path / "probe.py"
    probe.write_text("import evalsuite\nreveal_type(evalsuite.run_suite)\nreveal_type(evalsuite.Verdict)\nreveal_type(evalsuite.judge_run)\n")
    out, err, _ = api.run(["--follow-imports=silent", "--no-error-summary", "--config-file", str(ROOT / "pyproject.toml"), str(probe)])
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == 3, out + err
    run_suite, verdict, judge_run = revealed
    assert "evalsuite.cases.suite.Suite" in run_suite and "-> evalsuite.run.runner.RunResult" in run_suite
    assert "-> evalsuite.verdict.outcome.Verdict" in verdict and "Judgment" in judge_run
    assert all(r.strip('"') != "Any" for r in revealed)
