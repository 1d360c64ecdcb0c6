"""A command line that answers at once (issue 28, point 9): what `evalsuite --help` and
`evalsuite review annotate` import in a fresh process, read from `python -X importtime`.

Registering a command must not import its implementation, and no command that does not need them
may pull in the heavy libraries (numerics, models, schema validation, YAML, HTTP) or the
run/scoring/case-loading layers. The seconds are `make bench`'s (benchmarks/bench_cli.py); these
tests keep the gain from regressing silently, without timing anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from evalsuite.review.store import NewItem, ReviewStore

ROOT = Path(__file__).resolve().parents[1]

#: libraries no start-up may import: each costs from tens of milliseconds to seconds
HEAVY = ("pandas", "numpy", "scipy", "torch", "transformers", "jsonschema", "httpx", "yaml", "jinja2", "matplotlib", "ray", "vllm", "datasets")
#: what `evalsuite --help` may import of evalsuite itself: the CLI's modules and the two it shares
HELP_MAY_IMPORT = {"evalsuite", "evalsuite.errors", "evalsuite.states"}
#: layers a reviewer's verdict never needs
ANNOTATE_MUST_NOT = ("evalsuite.run", "evalsuite.scoring", "evalsuite.cases", "evalsuite.backends", "evalsuite.judge", "evalsuite.report")


def imported(*args: str) -> tuple[set[str], str]:
    """The modules a fresh `python -m evalsuite.cli ARGS` imports, and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-X", "importtime", "-m", "evalsuite.cli", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    mods = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines() if line.startswith("import time:") and "|" in line}
    mods.discard("imported package")
    assert "evalsuite.cli" in mods  # the parse found the table
    return mods, res.stdout


def heavy_in(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


def test_help_imports_no_heavy_library_and_no_command_implementation():
    mods, out = imported("--help")
    assert "validate" in out and "review" in out  # the help is still complete
    assert heavy_in(mods) == []
    ours = {m for m in mods if m.split(".")[0] == "evalsuite" and not m.startswith("evalsuite.cli")}
    assert ours <= HELP_MAY_IMPORT, sorted(ours - HELP_MAY_IMPORT)


def test_heavy_in_sees_a_heavy_import():
    """The check above can fail: a command that reads YAML does import yaml."""
    mods, _ = imported("validate", "casesets/")
    assert "yaml" in heavy_in(mods)


def test_review_annotate_imports_only_the_review_queue(tmp_path):
    verdict = "regression"
    queue = tmp_path / "review.sqlite"
    item = NewItem(
        run_id="run",
        variant="opt",
        fingerprint="fp",
        case_id="c1",
        scenario="kb_qa",
        kind="k",
        baseline="base",
        reasons=({"code": "flip"},),
        baseline_output="b",
        variant_output="v",
    )
    with ReviewStore(queue) as q:
        q.add_items([item])
    mods, out = imported("review", "annotate", "1", "--verdict", verdict, "--reviewer", "ann", "--queue", str(queue))
    assert f"item #1: {verdict} by ann" in out
    assert heavy_in(mods) == []
    assert sorted(m for m in mods if m.startswith(ANNOTATE_MUST_NOT)) == []
    assert "evalsuite.review.store" in mods
