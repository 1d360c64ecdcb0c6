"""The Ray executor on one local Ray instance (2 CPUs, no dashboard): the acceptance points of scale-out.

- a suite run with `executor: ray` stores the same records as a local run (tiny random Llama);
- a driver killed mid-run resumes into one record per (variant, case, sample), equal to a clean run;
- an actor that dies mid-batch is restarted by Ray, its batch retried, nothing lost or duplicated;
- the code scorers' sandbox jobs run as Ray tasks and score as they do locally.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'evalsuite[ray]'")
pytest.importorskip("ray.data", reason="ray[data] is not installed: pip install 'evalsuite[ray]'")

from evalsuite.run.runner import RunOptions  # noqa: E402

from evalsuite.scoring.pipeline import run_suite
from evalsuite.run.store import RunStore  # noqa: E402
from evalsuite.cases.suite import load_suite  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))  # ray_udf_helpers: imported by name here (fake backend) and in the actors
from ray_udf_helpers import CRASH_MARKER  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local Ray for the module, kept light: the machine is small and shared."""
    marker = tmp_path_factory.mktemp("crash") / "marker"
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", CRASH_MARKER, "RAY_worker_niceness")}
    os.environ["RAY_worker_niceness"] = "0"  # Ray's default 15 starves its workers on a busy shared machine
    # workers inherit the environment of the Ray started here
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), saved["PYTHONPATH"]) if p)
    os.environ[CRASH_MARKER] = str(marker)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield SimpleNamespace(address=ray.get_runtime_context().gcs_address, marker=marker)
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


CASES = """
schema_version: 1
defaults: {{scenario: kb_qa, kind: grounded, lang: en}}
documents:
  - {{id: d1, text: The VPN session lasts 12 hours.}}
cases:
{cases}
"""


def write_suite(root: Path, executor: str, variants: str, *, n_cases: int = 6, generation: str = "{max_new_tokens: 8, samples: 1, batch_size: 2}", casesets: str | None = None) -> Path:
    """A suite under `root`, its own cache and output dir; `executor` and `variants` are YAML text."""
    root.mkdir(parents=True, exist_ok=True)
    if casesets is None:
        lines = "\n".join(f"  - {{id: q{i:03d}, prompt: 'Question {i}?', context: [d1]}}" for i in range(n_cases))
        (root / "cases.yaml").write_text(CASES.format(cases=lines), encoding="utf-8")
        casesets = "[cases.yaml]"
    text = f"schema_version: 1\nname: t\ncasesets: {casesets}\ngeneration: {generation}\noutput_dir: out\ncache: out/cache.sqlite\nexecutor: {executor}\nvariants:\n{variants}"
    (root / "suite.yaml").write_text(text, encoding="utf-8")
    return root / "suite.yaml"


def run(suite: Path, **kw):
    return run_suite(load_suite(suite), RunOptions(progress=False, **{"score": False, **kw}))


def calls(log: Path) -> list[tuple[str, str, int, int]]:
    """(variant, case, sample, pid) of every request the fake backend generated."""
    if not log.exists():
        return []
    return [(v, c, int(s), int(p)) for v, c, s, p in (line.split("\t") for line in log.read_text().splitlines())]


def record_lines(store: RunStore) -> Counter:
    """How many lines generations.jsonl holds per (variant, case, sample)."""
    return Counter((d["variant"], d["case_id"], d["sample"]) for d in map(json.loads, (store.dir / "generations.jsonl").read_text().splitlines()))


def content(store: RunStore) -> list:
    """What a record says about its output (not timings, which differ run to run)."""
    return sorted((g.key(), g.text, g.ok, g.prompt_tokens, g.new_tokens, g.finish_reason, g.batch_size, g.request_hash) for g in store.generations())


RAY_1 = "{kind: ray, num_actors: 1, num_cpus: 1}"


@pytest.mark.slow  # loads torch and the model in a fresh actor: about a minute on a busy 2-core machine
def test_ray_run_stores_the_same_records_as_a_local_run(cluster, tmp_path):
    """Tiny random Llama, greedy, batches of 2 with padding: every stored field that a model decides is equal."""
    from backends.test_transformers import _save_tiny

    model = _save_tiny(tmp_path / "model")
    variants = f"""  - name: base
    baseline: true
    backend: transformers
    model: {model}
    options: {{device: cpu, cache_dir: {tmp_path / 'hf'}}}
"""
    local = run(write_suite(tmp_path / "local", "local", variants, n_cases=5))
    remote = run(write_suite(tmp_path / "ray", RAY_1, variants, n_cases=5))
    assert remote.generated == local.generated == 5 and remote.errors == 0

    def fields(store):
        return sorted((g.key(), g.text, g.prompt_tokens, g.new_tokens, g.finish_reason, g.batch_size, g.request_hash, g.fingerprint, g.extra.get("token_ids")) for g in store.generations())

    assert fields(remote.store) == fields(local.store)
    assert set(record_lines(remote.store).values()) == {1}
    assert any(g.new_tokens for g in remote.store.generations())  # the model really generated
    # and the cache works as in local runs: a second Ray run is served from it entirely
    again = run(tmp_path / "ray" / "suite.yaml")
    assert (again.generated, again.cached) == (0, 5)


FAKE = """  - name: base
    baseline: true
    backend: fake
    options:
      default: "answer {{case_id}} s{{sample}}"
      call_log: {log}
{extra}
"""


def test_killed_driver_resumes_into_one_record_per_case(cluster, tmp_path):
    n = 10
    log = tmp_path / "calls.log"
    suite = write_suite(tmp_path / "run", RAY_1, FAKE.format(log=log, extra="      delay_s: 0.2"), n_cases=n, generation="{max_new_tokens: 8, samples: 1, batch_size: 1}")
    env = dict(os.environ, RAY_ADDRESS=cluster.address, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "evalsuite.cli", "run", str(suite), "--no-score", "-q"], cwd=suite.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = suite.parent / "out" / "runs"
    deadline = time.time() + 120
    stored = lambda: len(RunStore.find(runs, "last").generations()) if list(runs.glob("*/signature.json")) else 0  # noqa: E731
    while stored() < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the driver finished before it could be killed"

    store = RunStore.find(runs, "last")
    stored_before = {g.key() for g in store.generations()}
    assert 3 <= len(stored_before) < n
    assert all(pid != proc.pid for *_, pid in calls(log)), "generation ran in Ray actors, not in the driver"
    calls_before = len(calls(log))

    res = run(suite, resume="last")
    assert res.run_dir == store.dir
    after = {(v, c, s) for v, c, s, _ in calls(log)[calls_before:]}
    assert not stored_before & after, "nothing already stored is generated again"
    lines = record_lines(store)
    assert len(lines) == n and set(lines.values()) == {1}, "exactly one record per (variant, case, sample)"
    clean = run(write_suite(tmp_path / "clean", "local", FAKE.format(log=tmp_path / "clean.log", extra=""), n_cases=n, generation="{max_new_tokens: 8, samples: 1, batch_size: 1}"))
    # the same records as an uninterrupted local run (fake outputs: every field but the timings)
    assert content(store) == content(clean.store)
    assert store.read_json("status.json")["complete"] is True


def test_actor_dying_mid_batch_is_restarted_and_its_batch_retried(cluster, tmp_path):
    log = tmp_path / "calls.log"
    # batches (by prompt length, then id): [q000 q001] [q002 q003] [q004 q005]; the actor dies on q003,
    # after it generated q002 of the same batch
    cluster.marker.write_text("q003")
    variants = f"""  - name: base
    baseline: true
    backend: fake
    options: {{function: "ray_udf_helpers:text_or_die", call_log: {log}}}
"""
    res = run(write_suite(tmp_path / "run", "{kind: ray, num_actors: 1, num_cpus: 1, max_restarts: 2, max_task_retries: 2}", variants))
    assert not cluster.marker.exists(), "the actor never reached the crash"
    seen = calls(log)
    assert Counter(c for _, c, _, _ in seen)["q002"] == 2, "the interrupted batch was run again"
    assert len({pid for *_, pid in seen}) >= 2, "a new actor process took over"
    assert res.errors == 0 and res.generated == 6
    assert set(record_lines(res.store).values()) == {1} and len(record_lines(res.store)) == 6
    assert [c[:3] for c in content(res.store)] == [(("base", f"q{i:03d}", 0), f"answer q{i:03d} s0", True) for i in range(6)]


PAL = 'def is_palindrome(s: str) -> bool:\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n'


def test_sandbox_jobs_run_as_ray_tasks_and_score_as_locally(cluster, tmp_path, monkeypatch):
    from evalsuite import sandbox
    from evalsuite.executors import ray as ray_exec

    outputs = [f"```python\n{PAL}```", "```python\ndef is_palindrome(s):\n    return False\n```", f"```python\n{PAL}```", "no code at all"]
    variants = f"""  - name: base
    baseline: true
    backend: fake
    options:
      outputs: {{code-ex-completion-001: {json.dumps(outputs)}}}
"""
    casesets = f"[{{path: {REPO / 'casesets/code/examples.yaml'}, ids: [code-ex-completion-001]}}]"
    gen = "{max_new_tokens: 64, samples: 4, batch_size: 4}"
    sandbox.clear_cache()
    local = run(write_suite(tmp_path / "local", "local", variants, generation=gen, casesets=casesets), score=True)

    sandbox.clear_cache()
    sent: list = []
    real_send = ray_exec.run_sandbox_jobs
    monkeypatch.setattr(ray_exec, "run_sandbox_jobs", lambda jobs, limits, **kw: sent.append(list(jobs)) or real_send(jobs, limits, **kw))
    for home in (sandbox, sandbox.pool):  # called directly, and by cached and pooled runs
        monkeypatch.setattr(home, "run_tests", lambda *a, **k: pytest.fail("a sandbox job ran in the driver"))
    remote = run(write_suite(tmp_path / "ray", RAY_1, variants, generation=gen, casesets=casesets), score=True)

    assert len(sent) == 1 and len(sent[0]) == 2, "both distinct programs went to Ray in one dispatch"

    def code_scores(store):
        return sorted((s.variant, s.case_id, -1 if s.sample is None else s.sample, s.metric, s.value) for s in store.scores() if s.metric.startswith("code.pass"))

    assert code_scores(remote.store) == code_scores(local.store)
    assert ("base", "code-ex-completion-001", -1, "code.pass@1", 0.5) in code_scores(remote.store)
