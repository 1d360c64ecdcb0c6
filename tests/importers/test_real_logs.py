"""Real logs made here, not fixtures: lm-eval (its HF backend) run on a local JSONL task with the embedded model,
a rerun of it (the noise floor) and its 4-bit RTN copy; Inspect (its Hugging Face provider, offline) on a
small local task (say a word back) with the same two models. Each is imported, gated (flips and McNemar p), reported and
flagged into the review queue. About 3 minutes on 2 cores (make test-slow)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.judge import judge_run
from evalsuite.review.api import list_items
from evalsuite.run.store import RunStore

pytestmark = pytest.mark.slow
runner = CliRunner()
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
BIN = Path(sys.executable).parent


def _rows(n: int, seed: int) -> list[dict]:
    r = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = r.randint(1, 30), r.randint(1, 30)
        choices = sorted({a + b, a + b + 1, a + b - 1, a + b + r.randint(2, 6)})
        out.append({"question": f"What is {a} plus {b}?", "choices": [str(c) for c in choices], "answer": choices.index(a + b), "target": str(a + b)})
    return out


def _write_tasks(d: Path) -> None:
    for name, n in (("mc", 80), ("gen", 12)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in _rows(n, seed=len(name))))
    common = 'dataset_path: json\ntest_split: test\ndoc_to_text: "Question: {{question}}\\nAnswer:"\nmetadata: {version: 1.0}\n'
    (d / "arith_mc.yaml").write_text(
        f"task: arith_mc\ndataset_kwargs: {{data_files: {{test: {d / 'mc.jsonl'}}}}}\n{common}output_type: multiple_choice\n"
        'doc_to_choice: "{{choices}}"\ndoc_to_target: "{{answer}}"\nmetric_list: [{metric: acc, aggregation: mean, higher_is_better: true}]\n'
    )
    (d / "arith_gen.yaml").write_text(
        f"task: arith_gen\ndataset_kwargs: {{data_files: {{test: {d / 'gen.jsonl'}}}}}\n{common}output_type: generate_until\n"
        'doc_to_target: "{{target}}"\ngeneration_kwargs: {until: ["\\n"], max_gen_toks: 8, do_sample: false}\n'
        "metric_list: [{metric: exact_match, aggregation: mean, higher_is_better: true, ignore_case: true, ignore_punctuation: true}]\n"
    )
    words = ["apple", "river", "garden", "yellow", "window", "doctor", "planet", "silver", "orange", "castle", "pencil", "summer"]
    (d / "inspect_task.py").write_text(
        textwrap.dedent(f"""
        from inspect_ai import Task, task
        from inspect_ai.dataset import Sample
        from inspect_ai.scorer import includes
        from inspect_ai.solver import generate

        @task
        def copy():
            words = {words!r}
            return Task(dataset=[Sample(id=i, input=f"Say the word '{{w}}' and nothing else.", target=w) for i, w in enumerate(words)],
                        solver=generate(), scorer=includes(), epochs=2)
        """)
    )


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def models():
    from evalsuite.models import ensure_embedded_model
    from evalsuite.models.rtn import rtn_copy

    base = ensure_embedded_model()
    return {"base": base, "rtn4": rtn_copy(base, bits=4, group_size=32)}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    _write_tasks(d)
    return d


@pytest.fixture(scope="module")
def lm_logs(models, tasks):
    """lm-eval's logs of both models, and a rerun of the baseline (the noise floor)."""
    out = {}
    for name, path in [*models.items(), ("rerun", models["base"])]:
        out[name] = tasks / "lm" / name
        args = ["--model", "hf", "--model_args", f"pretrained={path},dtype=float32", "--tasks", "arith_mc,arith_gen", "--include_path", str(tasks)]
        _run([str(BIN / "lm_eval"), *args, "--log_samples", "--output_path", str(out[name]), "--batch_size", "16", "--device", "cpu"], tasks)
    return out


@pytest.fixture(scope="module")
def inspect_logs(models, tasks):
    """Inspect's logs of both models (its Hugging Face provider, offline)."""
    out = {}
    for name, path in models.items():
        logdir = tasks / "inspect" / name
        _run([str(BIN / "inspect"), "eval", "inspect_task.py", "--model", "hf/local", "-M", f"model_path={path}", "-M", "device=cpu", "--max-tokens", "8"]
             + ["--display", "none", "--log-dir", str(logdir)], tasks)  # fmt: skip
        out[name] = next(logdir.glob("*.eval"))
    return out


def _cli(*args: str, code: int | None = 0) -> str:
    res = runner.invoke(app, list(args))
    if code is not None:
        assert res.exit_code == code, res.output
    return res.output


def _judge_everything(work: Path, scenario: str, metric: str) -> dict:
    """gate (--json), report and review flag on the run just imported; the figures the closing note gives."""
    store = RunStore.find(work / "reports" / "runs", "last")
    j = judge_run(store)
    assert j.verdict.judgeable, j.verdict.problems
    out = _cli("gate", "last", "--json", "verdict.json", code=None)
    verdict = json.loads((work / "verdict.json").read_text())
    assert verdict["exit_code"] == j.verdict.exit_code and verdict["status"] in ("pass", "regression")
    d = j.comparison.delta("rtn4", scenario, metric)
    assert d is not None and d.pass_fail and d.n > 0 and 0.0 <= d.p_value <= 1.0
    rules = {r["rule"]: r for r in verdict["results"] if r["variant"] == "rtn4"}
    flips_rule = (
        next(r for name, r in rules.items() if name.endswith("-flips") and r["violations"] and r["violations"][0]["scenario"] == scenario) if d.flips else None
    )
    if flips_rule is not None:  # the verdict itself carries the flips and the McNemar p of this metric
        numbers = flips_rule["violations"][0]["numbers"]
        assert (numbers["pass_to_fail"], numbers["fail_to_pass"]) == (len(d.pass_to_fail), len(d.fail_to_pass)) and numbers["p_value"] == pytest.approx(
            d.p_value
        )
    assert "report:" in _cli("report", "last") and (work / "reports" / store.run_id / "report.html").is_file()
    _cli("review", "flag", "last")
    items = [i for i in list_items(work / "reports" / "review.sqlite") if i["run_id"] == store.run_id]
    flipped = {c for c in d.pass_to_fail}
    assert flipped <= {i["case_id"] for i in items}  # every flip is queued, both responses side by side
    for i in items:
        assert i["baseline_output"] == j.comparison.output("base", i["case_id"]) and i["variant_output"] == j.comparison.output("rtn4", i["case_id"])
    figures = {
        "status": verdict["status"],
        "n": d.n,
        "baseline": d.baseline_mean,
        "variant": d.variant_mean,
        "flips": (len(d.pass_to_fail), len(d.fail_to_pass)),
    }
    figures |= {"mcnemar_p": d.p_value, "p_worse": d.p_worse, "queued": len(items), "gate": out.splitlines()[0]}
    print(f"\n{scenario}/{metric}: {figures}")
    return figures


def test_lm_eval_real_logs_imported_gated_reported_flagged(lm_logs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lm = lm_logs
    out = _cli("import", "lm-eval", str(lm["base"]), str(lm["rtn4"]), "--names", "base,rtn4", "--noise", str(lm["rerun"]))
    assert "baseline base, variant(s) rtn4, noise run(s) base-rerun; 92 cases" in out
    store = RunStore.find(tmp_path / "reports" / "runs", "last")
    assert store.signature["source"]["models"]["rtn4"]["model_args"]["pretrained"].split("/")[-1].startswith("rtn-smollm2-135m-instruct-4b-g32")
    # the HF backend is deterministic on CPU: the rerun's noise floor is zero flips
    j = judge_run(store)
    assert j.comparison.noise_floor("lm-eval:arith_mc", "acc").flips == 0
    _judge_everything(tmp_path, "lm-eval:arith_mc", "acc")
    _judge_everything(tmp_path, "lm-eval:arith_gen", "exact_match")


def test_inspect_real_logs_imported_gated_reported_flagged(inspect_logs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ins = inspect_logs
    out = _cli("import", "inspect", str(ins["base"]), str(ins["rtn4"]), "--names", "base,rtn4")
    assert "24 cases" in out  # 12 samples x 2 epochs, paired by epoch
    sig = RunStore.find(tmp_path / "reports" / "runs", "last").signature["source"]
    assert sig["tool"] == "inspect" and sig["tasks"]["copy"]["config"]["epochs"] == 2 and set(sig["logs"]) == {"base", "rtn4"}
    _judge_everything(tmp_path, "inspect:copy", "includes")
