"""Runner, cache and resume on the fake backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evalsuite.cases.suite import load_suite
from evalsuite.run.runner import RunOptions
from evalsuite.run.store import RunStore
from evalsuite.scoring.pipeline import run_suite

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: d1, text: The VPN session lasts 12 hours.}
cases:
{cases}
"""


def make_cases(n: int) -> str:
    return CASES.replace("{cases}", "\n".join(f"  - {{id: q{i:03d}, prompt: 'Question {i}?', context: [d1]}}" for i in range(n)))  # noqa: E501


def make_suite(write, tmp_path, *, n_cases=6, samples=1, batch_size=2, variants=None, extra_base_options="", prefix=""):
    """A suite under tmp_path/prefix: `n_cases` kb_qa cases, a fake baseline and variants."""
    write(f"{prefix}sets/cases.yaml", make_cases(n_cases))
    log = tmp_path / prefix / "calls.log"
    variants = variants if variants is not None else """
  - name: fake-nf4
    quantization: {method: bnb, bits: 4, quant_type: nf4}
  - name: fake-spec
    speculative: {method: prompt_lookup, num_tokens: 10}
"""
    return write(
        f"{prefix}suite.yaml",
        f"""
schema_version: 1
name: t
casesets: [sets]
generation: {{max_new_tokens: 16, samples: {samples}, batch_size: {batch_size}}}
output_dir: out
cache: out/cache.sqlite
variants:
  - name: base
    baseline: true
    backend: fake
    options:
      default: "answer {{case_id}} s{{sample}}"
      call_log: {log}
{extra_base_options}
{variants}
""",
    ), log


def calls(log: Path) -> list[tuple[str, str, int]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        v, c, s, _pid = line.split("\t")
        out.append((v, c, int(s)))
    return out


def run(suite_path, **kw):
    return run_suite(load_suite(suite_path), RunOptions(progress=False, score=False, **kw))


def test_second_run_makes_zero_backend_calls(write, tmp_path):
    suite, log = make_suite(write, tmp_path)
    first = run(suite)
    n_first = len(calls(log))
    assert n_first == 6 * 3 and first.generated == 18 and first.cached == 0
    second = run(suite)
    assert len(calls(log)) == n_first, "an unchanged suite must generate nothing"
    assert second.generated == 0 and second.cached == 18
    assert second.run_dir != first.run_dir
    texts = lambda r: sorted((g.key(), g.text) for g in r.store.generations())  # noqa: E731
    assert texts(first) == texts(second)


def test_variant_differing_only_in_quantization_is_really_called(write, tmp_path):
    # a variant that differs from the baseline only in quantization or speculative settings must
    # never be served the baseline's cached outputs (a harness whose cache key omits the model does)
    suite, log = make_suite(write, tmp_path, variants="""
  - name: q8
    quantization: {method: bnb, bits: 8}
  - name: spec
    speculative: {method: prompt_lookup, num_tokens: 5}
""")
    run(suite, variants=[])  # baseline only: fills the cache with the baseline's outputs
    assert Counter(v for v, _, _ in calls(log)) == {"base": 6}
    res = run(suite)
    by_variant = Counter(v for v, _, _ in calls(log))
    assert by_variant == {"base": 6, "q8": 6, "spec": 6}
    gens = res.store.generations()
    assert all(not g.cached for g in gens if g.variant != "base")
    fps = {g.variant: g.fingerprint for g in gens}
    assert len(set(fps.values())) == 3


def test_backend_error_on_one_case_leaves_the_others_done(write, tmp_path):
    suite, log = make_suite(write, tmp_path, batch_size=3, variants="", extra_base_options="      errors: {q002: boom}")
    res = run(suite)
    gens = {g.case_id: g for g in res.store.generations()}
    assert len(gens) == 6
    assert gens["q002"].error is not None and "boom" in gens["q002"].error and gens["q002"].text == ""
    assert all(g.ok and g.text == f"answer {cid} s0" for cid, g in gens.items() if cid != "q002")
    assert res.errors == 1
    summary = res.store.read_json("variants.json")["base"]
    assert summary["errors"] == 1 and summary["generations"] == 6
    # errors are not cached: a rerun retries the failed case only
    before = len(calls(log))
    res2 = run(suite)
    assert len(calls(log)) == before  # q002 still fails before reaching the log; nothing else regenerates
    assert res2.cached == 5 and res2.errors == 1


def test_timeouts_are_recorded(write, tmp_path):
    suite, _ = make_suite(write, tmp_path, n_cases=3, variants="", extra_base_options="      delay_s: {q001: 5}")
    text = suite.read_text().replace("batch_size: 2}", "batch_size: 1, timeout_s: 0.05}")
    suite.write_text(text)
    res = run(suite)
    gens = {g.case_id: g for g in res.store.generations()}
    assert gens["q001"].timeout and gens["q001"].finish_reason == "timeout"
    assert gens["q000"].ok and gens["q002"].ok
    assert res.store.read_json("variants.json")["base"]["timeouts"] == 1


def test_samples_are_distinct_keys(write, tmp_path):
    suite, log = make_suite(write, tmp_path, n_cases=2, samples=3, variants="")
    res = run(suite)
    keys = sorted(g.key() for g in res.store.generations())
    assert keys == [("base", f"q00{i}", s) for i in range(2) for s in range(3)]
    assert {g.text for g in res.store.generations()} == {f"answer q00{i} s{s}" for i in range(2) for s in range(3)}


def test_limit_and_scenarios(write, tmp_path):
    suite, _ = make_suite(write, tmp_path, variants="")
    res = run(suite, limit=2)
    assert len(res.store.generations()) == 2
    from evalsuite.errors import EvalsuiteError

    with pytest.raises(EvalsuiteError, match="unknown scenario"):
        run(suite, scenarios=["kbqa"])


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return [sys.executable, "-m", "evalsuite.cli", *args], env


@pytest.mark.parametrize("kill_after", [1, 4, 9])
def test_sigkill_then_resume_equals_uninterrupted_run(write, tmp_path, kill_after):
    n = 8
    suite, log = make_suite(write, tmp_path, n_cases=n, batch_size=1, extra_base_options="      delay_s: 0.15")
    # the variants inherit the baseline's options (delay and call log)
    cmd, env = _cli("run", str(suite), "--no-score", "-q", cwd=tmp_path)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(calls(log)) < kill_after and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    store = RunStore.find(tmp_path / "out" / "runs", "last")
    stored_before = {g.key() for g in store.generations()}
    assert 0 < len(calls(log)) < 3 * n
    calls_before = len(calls(log))

    res = run(suite, resume="last")
    assert res.run_dir == store.dir
    after = calls(log)[calls_before:]
    # nothing that had finished is generated again
    assert not stored_before & set(after)
    lines = [json.loads(line) for line in (store.dir / "generations.jsonl").read_text().splitlines()]
    keys = Counter((d["variant"], d["case_id"], d["sample"]) for d in lines)
    assert len(keys) == 3 * n and set(keys.values()) == {1}, "exactly one generation per (case, variant, sample)"

    # same content as an uninterrupted run (fresh cache and output dir)
    clean, _ = make_suite(write, tmp_path, n_cases=n, batch_size=1, prefix="clean/")
    ref = run(clean)
    content = lambda gens: sorted((g.key(), g.text, g.ok) for g in gens)  # noqa: E731
    assert content(store.generations()) == content(ref.store.generations())
    assert store.read_json("status.json")["complete"] is True


def test_partial_last_line_is_repaired(tmp_path):
    from evalsuite.backends.base import Generation

    store = RunStore.create(tmp_path, "x", {}, {"variants": {}})
    store.append([Generation("c1", "v", 0, text="a")])
    with open(store.dir / "generations.jsonl", "a") as fh:
        fh.write('{"case_id": "c2", "var')  # a kill in the middle of a write
    assert [g.case_id for g in store.generations()] == ["c1"]
    assert store.repair() > 0
    store.append([Generation("c2", "v", 0, text="b")])
    assert [g.case_id for g in store.generations()] == ["c1", "c2"]


def test_one_variable_warning(write, tmp_path, caplog):
    suite, _ = make_suite(write, tmp_path, variants="""
  - name: two-things
    quantization: {method: bnb, bits: 8}
    speculative: {method: prompt_lookup}
""")
    s = load_suite(suite)
    assert any("change one variable at a time" in w and "two-things" in w for w in s.warnings)
    assert s.variant("two-things").changes == ("quantization", "speculative")


def test_declared_changes_silence_the_one_variable_warning(write, tmp_path):
    """A variant that declares exactly what it changes was made so on purpose: no warning. A
    declaration that is short of the truth still warns, twice over."""
    suite, _ = make_suite(write, tmp_path, variants="""
  - name: two-things
    quantization: {method: bnb, bits: 8}
    speculative: {method: prompt_lookup}
    changes: [speculative, quantization]
  - name: half-told
    quantization: {method: bnb, bits: 4}
    speculative: {method: prompt_lookup}
    changes: quantization
""")
    s = load_suite(suite)
    assert not any("two-things" in w for w in s.warnings)
    told = [w for w in s.warnings if "half-told" in w]
    assert any("change one variable at a time" in w for w in told) and any("declares changes" in w for w in told)


@pytest.mark.parametrize(
    "snippet,field,message",
    [
        ("variants:\n  - {name: a, backend: fake}\n", "variants", "exactly one variant must have `baseline: true`"),
        ("variants:\n  - {name: a, baseline: true, backend: fakee}\n", "backend", "did you mean fake"),
        ("variants:\n  - {name: a, baseline: true, backend: fake, quantisation: {}}\n", "variants[0].quantisation", "unknown field"),
        ("generation: {max_new_token: 3}\nvariants:\n  - {name: a, baseline: true}\n", "generation.max_new_token", "unknown setting"),
    ],
)
def test_bad_suite_files(write, snippet, field, message):
    from evalsuite.errors import ValidationError

    path = write("s.yaml", "casesets: [sets]\n" + snippet)
    with pytest.raises(ValidationError) as info:
        load_suite(path)
    assert any(p.field == field and message in p.message and p.line for p in info.value.problems), info.value


def test_warm_rerun_reuses_scores_and_equals_the_cold_run(write, tmp_path, scorer_calls):
    """A warm re-run generates nothing, calls no scorer, and gives the cold run's scores and verdict."""
    from evalsuite.judge import judge_run

    calls = scorer_calls
    suite, _ = make_suite(write, tmp_path, n_cases=4, samples=2)
    opts = dict(progress=False, score=True)
    cold = run_suite(load_suite(suite), RunOptions(**opts))
    assert cold.generated > 0 and sum(calls.values()) > 0
    calls.clear()
    warm = run_suite(load_suite(suite), RunOptions(**opts))
    assert warm.generated == 0 and warm.cached == cold.generated
    assert sum(calls.values()) == 0, calls
    assert (warm.run_dir / "scores.parquet").read_bytes() == (cold.run_dir / "scores.parquet").read_bytes()
    verdicts = [judge_run(RunStore(r.run_dir)).verdict for r in (cold, warm)]
    assert verdicts[0].passed == verdicts[1].passed and verdicts[0].exit_code == verdicts[1].exit_code
    # every quality rule judged alike; the performance rule has no timings on a warm run (nothing was generated)
    quality = [[x for x in v.to_dict()["results"] if x["rule"] != "performance"] for v in verdicts]
    assert quality[0] and quality[0] == quality[1]


def test_model_load_is_timed_apart_from_generation(write, tmp_path):
    """A backend that takes 1.5 s to load: the variant's wall_s (generation, throughput) does not
    include it, load_s does; a fully cached re-run loads nothing."""
    suite, _ = make_suite(write, tmp_path, n_cases=2, variants="", extra_base_options="      load_s: 1.5")
    res = run(suite)
    base = res.variants["base"]
    assert base["load_s"] >= 1.5 and base["wall_s"] < 1.5, base
    again = run(suite)
    assert again.generated == 0 and again.variants["base"]["load_s"] == 0.0


def test_compile_time_is_recorded_apart_from_load_and_generation(write, tmp_path):
    """A backend that loads in 0.2 s, then compiles and warms up for 1.5 s (Backend.compile_s): the
    run records both apart, and neither is in wall_s or in a generation's latency (the speed
    figures are steady state); a backend that compiles nothing records no compile_s."""
    suite, _ = make_suite(write, tmp_path, n_cases=2, variants="", extra_base_options="      load_s: 0.2\n      compile_s: 1.5")
    res = run(suite)
    base = res.variants["base"]
    assert base["compile_s"] >= 1.5 and 0.2 <= base["load_s"] < 1.5, base
    assert base["wall_s"] < 1.5 and base["latency_median_s"] < 1.5, base
    assert "compile_s" not in run(make_suite(write, tmp_path, n_cases=2, variants="", prefix="plain/")[0]).variants["base"]


def test_a_refused_variant_cannot_be_judged_and_the_others_go_on(write, tmp_path):
    """A library refusing a variant's settings on this machine (a compile mode, an attention kernel):
    the backend's load_error; the variant is recorded "cannot judge" with the library's reason, never
    run with another setting, and the other variants are generated as usual."""
    from evalsuite.judge import judge_run

    suite, log = make_suite(
        write,
        tmp_path,
        n_cases=2,
        variants="""
  - name: refused
    options: {refuse: "options.compile.mode = 'max-autotune' cannot run here: RuntimeError: skipping cudagraphs due to cpu device"}
  - name: fake-nf4
    quantization: {method: bnb, bits: 4, quant_type: nf4}
""",
    )
    res = run_suite(load_suite(suite), RunOptions(progress=False, score=True))
    store = RunStore(res.run_dir)
    gens = [g for g in store.generations() if g.variant == "refused"]
    assert gens and all(not g.ok and "skipping cudagraphs" in g.error for g in gens)
    assert {v for v, _, _ in calls(log)} == {"base", "fake-nf4"}  # nothing generated under another setting
    verdict = judge_run(store).verdict
    assert verdict.status == "cannot judge", verdict
    assert any("variant 'refused': cannot judge" in p and "skipping cudagraphs due to cpu device" in p for p in verdict.problems), verdict.problems
