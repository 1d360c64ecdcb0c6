"""The package keeps its shape: layered imports (import-linter contracts in pyproject.toml), no import
cycles anywhere in evalsuite/, and `lint-imports` fails on a planted upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_contracts_hold():
    res = _lint_imports(ROOT, ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 kept, 0 broken" in res.stdout  # the layers, verdict/ without httpx, no cycles


def test_a_planted_http_client_in_the_verdict_layer_breaks_its_contract(tmp_path):
    """verdict/ reaching the load client (and with it httpx), even through a lower layer, is caught."""
    shutil.copytree(ROOT / "evalsuite", tmp_path / "evalsuite", ignore=shutil.ignore_patterns("__pycache__"))
    gate = tmp_path / "evalsuite" / "verdict" / "gate.py"
    gate.write_text(gate.read_text() + "\n\ndef _planted():\n    from ..run import load  # noqa: F401\n")
    res = _lint_imports(tmp_path, tmp_path)
    assert res.returncode != 0
    assert "evalsuite.verdict is not allowed to import httpx" in res.stdout


def test_a_planted_upward_import_breaks_the_layers(tmp_path):
    """A function-level import that climbs a layer (the gate reaching for the report) is caught."""
    shutil.copytree(ROOT / "evalsuite", tmp_path / "evalsuite", ignore=shutil.ignore_patterns("__pycache__"))
    gate = tmp_path / "evalsuite" / "verdict" / "gate.py"
    gate.write_text(gate.read_text() + "\n\ndef _planted():\n    from ..report import model  # noqa: F401\n")
    res = _lint_imports(tmp_path, tmp_path)
    assert res.returncode != 0
    assert "evalsuite.verdict.gate -> evalsuite.report.model" in res.stdout
    assert "BROKEN" in res.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_between_any_modules():
    """Module by module, imports inside functions included (a package importing its own modules
    and being imported back by them counts too)."""
    graph = grimp.build_graph("evalsuite", cache_dir=None)
    assert _cycles(graph) == []
