"""Every fault probe against vLLM's OpenAI server (`serve: {launcher: vllm}`, `make vllm`'s
`.venv-vllm`) serving the embedded model on loopback, as tests/backends/test_faults_served.py does
for `transformers serve`: one run with `faults: all`, each test reading one fault's outcome.

Slow (each vLLM start costs 25-90 s on 2 busy cores, and the killed-server and load-failure probes
start it twice more): `make test-vllm`.
"""

from __future__ import annotations

import textwrap

import pytest

from evalsuite.backends import vllm_env
from evalsuite.errors import EvalsuiteError
from evalsuite.states import REJECTED_AS_DESIGNED, SURVIVED


def _missing() -> str | None:
    try:
        vllm_env.locate()
    except EvalsuiteError as exc:
        return f"no vLLM environment ({exc})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: vpn, text: The VPN session lasts 12 hours. After that you must log in again.}
  - {id: leave, text: Employees get 25 days of paid leave per year.}
cases:
  - {id: q-vpn, prompt: 'How long does a VPN session last?', context: [vpn]}
  - {id: q-leave, prompt: 'How many days of paid leave do employees get?', context: [leave]}
"""

SUITE = """
schema_version: 1
name: faults-vllm
casesets: [sets]
generation: {max_new_tokens: 10, temperature: 0, batch_size: 1}
faults: {timeout_s: 240, cases: 2, burst: 6, kill_after: 1}
variants:
  - name: base
    baseline: true
    backend: fake
  - name: served
    backend: http
    model: embedded
    options: {serve: {launcher: vllm, args: [--max-model-len, "512", --max-num-seqs, "2"]}, timeout_s: 300, retry: {max_retries: 1, backoff_s: 0.1}}
"""


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.faults import read_faults
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    root = tmp_path_factory.mktemp("vllmfaults")
    (root / "sets").mkdir()
    (root / "sets" / "cases.yaml").write_text(textwrap.dedent(CASES), "utf-8")
    (root / "suite.yaml").write_text(textwrap.dedent(SUITE), "utf-8")
    opts = RunOptions(progress=False, score=False, cache_path=str(root / "cache.sqlite"), runs_dir=str(root / "runs"))
    res = run_suite(load_suite(root / "suite.yaml"), opts)
    assert all(g.ok for g in res.store.generations()), [g.error for g in res.store.generations() if not g.ok]
    return read_faults(res.store)["served"]


def test_vllm_refuses_an_over_long_input_with_a_4xx(faults):
    res = faults["overlong_input"]
    assert res.outcome == REJECTED_AS_DESIGNED and "HTTP 4" in res.evidence, res  # past --max-model-len 512


def test_vllm_survives_a_client_gone_mid_stream(faults):
    assert faults["disconnect"].outcome == SURVIVED, faults["disconnect"]


def test_vllm_answers_retries_alike(faults):
    assert faults["retry"].outcome == SURVIVED, faults["retry"]


def test_vllm_queues_a_burst_above_max_num_seqs(faults):
    res = faults["burst"]
    assert res.outcome == SURVIVED, res  # six at once, two sequences at a time: queued
    assert res.timings["queue_wait_max_s"] >= res.timings["queue_wait_p50_s"] >= 0


def test_a_killed_vllm_server_is_restarted_and_resumed(faults):
    assert faults["server_killed"].outcome == SURVIVED, faults["server_killed"]


def test_vllm_reports_a_model_that_fails_to_load(faults):
    res = faults["load_failure"]
    assert res.outcome == REJECTED_AS_DESIGNED and "evalsuite_broken_on_purpose" in res.evidence, res
