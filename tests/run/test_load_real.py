"""The load block against a real `transformers serve --continuous-batching` of the embedded model on
loopback: windows at two levels, the at-rest rerun, scored replays, the rules, resumable."""

from __future__ import annotations

import pytest

from tests.backends.test_serve_transformers import CASES, _why_not

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

if _why_not():
    pytest.skip(str(_why_not()), allow_module_level=True)

SUITE = """
schema_version: 1
name: load-real
casesets: [sets]
generation: {max_new_tokens: 8, temperature: 0, batch_size: 1}
variants:
  - name: scripted
    baseline: true
    backend: fake
    options: {default: 'The VPN session lasts 12 hours [vpn].'}
  - name: served-cb
    backend: http
    model: embedded
    changes: [backend]
    options: {serve: {launcher: transformers, continuous_batching: true}, timeout_s: 300, verify_settings: false}
load: {levels: [1, 4], requests: 4, replay: 2, rounds: 1, timeout_s: 300, duration_s: 900, max_new_tokens: 8}
"""

RULES = """
schema_version: 1
rules:
  - {name: batch-invariance, max_load_flips: 3}
  - {name: load-ttft, max_load_ttft_p95_ratio: 1.5}
  - {name: load-errors, max_load_error_rate: 0.0, max_load_timeout_rate: 0.0}
"""


def test_transformers_serve_with_continuous_batching_under_load(write, tmp_path):
    import yaml

    from evalsuite.cases.suite import load_suite
    from evalsuite.judge import judge_run
    from evalsuite.run.load import stored_windows
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.verdict.rubric import parse_rubric

    write("sets/cases.yaml", CASES)
    suite = load_suite(write("suite.yaml", SUITE))
    opts = RunOptions(progress=False, cache_path=str(tmp_path / "cache.sqlite"), runs_dir=str(tmp_path / "runs"))
    result = run_suite(suite, opts)
    windows = stored_windows(result.store.read_json(result.store.LOAD))
    assert sorted(w.key for w in windows) == [("served-cb", 0, 0), ("served-cb", 1, 0), ("served-cb", 4, 0)]  # the baseline is not served
    for w in windows:
        assert (w.errors, w.timeouts, w.not_sent) == (0, 0, 0), w.error_samples
        assert w.replays and all(r["text"] for r in w.replays)
        assert w.queue_wait_source == "not exposed by the server"
    four = next(w for w in windows if w.level == 4)
    assert four.requests == 4 + 2 and four.ttft_s and min(four.ttft_s) > 0 and four.new_tokens > 0

    judgment = judge_run(result.store, parse_rubric(yaml.safe_load(RULES), "rubric.yaml"), "production", queue=tmp_path / "none.sqlite")
    load = judgment.comparison.load
    rest = load.rest("served-cb")
    assert rest is not None and rest.scored and rest.changed == ()  # greedy at rest, one at a time: the run's own answers again
    assert [lv.level for lv in load.for_variant("served-cb")] == [1, 4] and all(lv.scored for lv in load.for_variant("served-cb"))
    by = {r.rule: r for r in judgment.verdict.results}
    assert by["batch-invariance"].status in ("pass", "fail") and by["load-errors"].status == "pass"
    assert by["load-ttft"].status == "cannot_judge" and "'scripted' was not put under load" in by["load-ttft"].note

    # a rerun of the finished run's load resumes with nothing left to do
    again = run_suite(suite, RunOptions(progress=False, cache_path=opts.cache_path, runs_dir=opts.runs_dir, resume=str(result.store.dir)))
    assert stored_windows(again.store.read_json(again.store.LOAD)) == windows
