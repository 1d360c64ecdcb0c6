"""The `executor:` entry of a suite file and the local executor (no Ray needed)."""

from __future__ import annotations

import pytest

from evalsuite.errors import ValidationError
from evalsuite.executors import ExecutorSpec, make_executor
from evalsuite.executors.local import LocalExecutor
from evalsuite.run.runner import RunOptions
from evalsuite.scoring.pipeline import run_suite
from evalsuite.cases.suite import load_suite

SUITE = """
schema_version: 1
name: t
casesets: [cases.yaml]
generation: {{max_new_tokens: 8, batch_size: 2}}
output_dir: out
cache: out/cache.sqlite
{executor}
variants:
  - name: base
    baseline: true
    backend: fake
"""
CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: d1, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'Question 1?', context: [d1]}
  - {id: q2, prompt: 'Question 2?', context: [d1]}
  - {id: q3, prompt: 'Question 3?', context: [d1]}
"""


def suite_with(write, executor: str):
    write("cases.yaml", CASES)
    return write("suite.yaml", SUITE.format(executor=executor))


@pytest.mark.parametrize(
    "executor,spec",
    [
        ("", ExecutorSpec("local", {})),
        ("executor: local", ExecutorSpec("local", {})),
        ("executor: ray", ExecutorSpec("ray", {})),
        ("executor: {kind: ray, address: 'ray://head:10001', num_actors: 4, num_gpus: 1, num_cpus: 2}", ExecutorSpec("ray", {"address": "ray://head:10001", "num_actors": 4, "num_gpus": 1, "num_cpus": 2})),
        ("executor: {kind: ray, sandbox: false, llm_processor: auto, max_restarts: 3}", ExecutorSpec("ray", {"sandbox": False, "llm_processor": "auto", "max_restarts": 3})),
    ],
)
def test_executor_entry_is_parsed(write, executor, spec):
    suite = load_suite(suite_with(write, executor))
    assert suite.executor == spec
    assert suite.resolved()["executor"] == spec.to_dict()


# (executor entry, line of the problem, field, words of the message)
BAD = [
    ("executor: dask", 7, "executor.kind", "unknown executor 'dask'"),
    ("executor: {kind: rya}", 7, "executor.kind", "did you mean ray"),
    ("executor:\n  kind: ray\n  num_actors: 0", 9, "executor.num_actors", "at least 1"),
    ("executor:\n  kind: ray\n  num_gpus: -1", 9, "executor.num_gpus", "got -1"),
    ("executor:\n  kind: ray\n  adress: auto", 9, "executor.adress", "unknown ray executor option"),
    ("executor:\n  kind: ray\n  sandbox: yes please", 9, "executor.sandbox", "true or false"),
    ("executor:\n  kind: local\n  num_actors: 2", 9, "executor.num_actors", "unknown local executor option"),
    ("executor: [ray]", 7, "executor", "expected `local`, `ray` or a mapping"),
]


@pytest.mark.parametrize("executor,line,field,words", BAD, ids=[b[2] + ":" + b[3] for b in BAD])
def test_bad_executor_entries_name_file_line_and_field(write, executor, line, field, words):
    path = suite_with(write, executor)
    with pytest.raises(ValidationError) as err:
        load_suite(path)
    [problem] = [p for p in err.value.problems if p.field.startswith("executor")]
    assert (problem.file, problem.line, problem.field) == (str(path), line, field)
    assert words in problem.message
    assert f"{path}:{line}: {field}:" in str(err.value)


def test_make_executor_defaults_to_local():
    assert isinstance(make_executor(None), LocalExecutor)
    assert make_executor(ExecutorSpec("ray")).name == "ray"  # constructing it does not import or start Ray


def test_local_executor_runs_batches_in_order_through_the_runners_call():
    seen = []

    def generate_batch(backend, batch, variant):
        seen.append(list(batch))
        return [f"{backend}:{r}" for r in batch]

    out = list(LocalExecutor().generate("v", "be", lambda: pytest.fail("local builds nothing"), [[1, 2], [3]], generate_batch))
    assert out == [([1, 2], ["be:1", "be:2"]), ([3], ["be:3"])]
    assert seen == [[1, 2], [3]]


def test_local_suite_run_is_unchanged(write):
    res = run_suite(load_suite(suite_with(write, "executor: local")), RunOptions(progress=False, score=False))
    assert res.generated == 3 and res.errors == 0
    assert sorted(g.text for g in res.store.generations()) == [f"fake output for q{i}" for i in (1, 2, 3)]
    assert {g.batch_size for g in res.store.generations()} == {2, 1}


def test_vllm_through_ray_data_llm_needs_vllm_when_asked_for():
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from evalsuite.errors import MissingExtraError
    from evalsuite.executors.ray import RayExecutor
    from evalsuite.cases.suite import Variant

    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed: the processor path would be taken")
    vllm_variant = Variant("v", backend="vllm", model="m")
    assert RayExecutor(ExecutorSpec("ray", {"llm_processor": "auto"}))._use_llm_processor(vllm_variant) is False
    assert RayExecutor(ExecutorSpec("ray", {"llm_processor": True}))._use_llm_processor(Variant("f", backend="fake")) is False
    with pytest.raises(MissingExtraError, match=r"evalsuite\[vllm\]"):
        RayExecutor(ExecutorSpec("ray", {"llm_processor": True}))._use_llm_processor(vllm_variant)


class _Rows:
    """Just enough of a Ray Dataset for the processor path: rows in, rows out."""

    def __init__(self, rows):
        self.rows = list(rows)

    def iter_rows(self):
        return iter(self.rows)


def test_vllm_variant_rows_through_ray_data_llm_become_generations(monkeypatch):
    """The processor path without GPUs: ray.data.llm replaced by a stand-in that answers like vLLM."""
    import sys
    import types
    from types import SimpleNamespace

    pytest.importorskip("ray.data", reason="the ray extra is not installed")
    from evalsuite.backends.base import GenerationSettings, Request
    from evalsuite.executors.ray import RayExecutor
    from evalsuite.cases.suite import Variant

    seen = {}

    def build_processor(config, postprocess):
        seen["config"] = config

        def run(ds):
            seen["rows"] = ds.rows
            out = []
            for row in ds.rows:
                if row["case_id"] == "bad":  # like ray.data.llm: error rows skip the postprocess
                    out.append({**row, "__inference_error__": "CUDA error: out of memory"})
                else:
                    out.append(postprocess({**row, "generated_text": f"hi {row['case_id']}", "num_input_tokens": 7, "num_generated_tokens": 2, "time_taken_llm": 0.5}))
            return _Rows(out)

        return run

    llm = types.ModuleType("ray.data.llm")
    llm.build_processor = build_processor
    llm.vLLMEngineProcessorConfig = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "ray.data.llm", llm)
    backend = SimpleNamespace(engine_args=lambda: {"model": "/models/m", "dtype": "auto", "tensor_parallel_size": 2})
    variant = Variant("v", backend="vllm", model="/models/m", generation=GenerationSettings(batch_size=8))
    batches = [[Request("ok", (("user", "hello"),), 0, 16, 0.0), Request("ok", (("user", "hello"),), 1, 16, 0.7, 0.9)], [Request("bad", (("user", "x"),), 0, 16)]]
    fake_ray = SimpleNamespace(data=SimpleNamespace(from_items=_Rows))

    out = list(RayExecutor(ExecutorSpec("ray", {"num_actors": 3}))._generate_llm(fake_ray, variant, backend, batches))

    assert seen["config"]["model_source"] == "/models/m" and seen["config"]["engine_kwargs"] == {"dtype": "auto", "tensor_parallel_size": 2}
    assert (seen["config"]["concurrency"], seen["config"]["batch_size"]) == (3, 8)
    params = {(r["case_id"], r["sample"]): r["sampling_params"] for r in seen["rows"]}
    assert params[("ok", 0)] == {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0, "seed": batches[0][0].sample_seed()}
    assert params[("ok", 1)]["temperature"] == 0.7 and params[("ok", 1)]["seed"] == batches[0][1].sample_seed()
    gens = {(g.case_id, g.sample): g for _, [g] in out}
    assert [r for r, _ in out] == [[batches[0][0]], [batches[0][1]], [batches[1][0]]]
    assert gens[("ok", 0)].text == "hi ok" and (gens[("ok", 0)].prompt_tokens, gens[("ok", 0)].new_tokens, gens[("ok", 0)].tokens_per_s) == (7, 2, 4.0)
    assert not gens[("bad", 0)].ok and "out of memory" in gens[("bad", 0)].error
