"""The load driver (evalsuite.run.load) against the stdlib fake OpenAI server of tests/backends/test_http.py:
percentiles, the traffic mix, server metrics, windows, resuming, loopback only, and the whole path
through `evalsuite run` to the gate's load rules."""

from __future__ import annotations

import asyncio
import threading

import pytest

from evalsuite.backends.served import ServedBackend
from evalsuite.backends.base import Request
from evalsuite.cases.options import LoadSettings
from evalsuite.errors import EvalsuiteError
from evalsuite.run import load as L
from tests.backends import test_http
from tests.backends.test_http import FakeOpenAIServer, make_backend

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: vpn, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'hello', context: [vpn], expect: {answer_keywords: [echo]}}
  - {id: q2, prompt: 'how long is the vpn session', context: [vpn], expect: {answer_keywords: [echo]}}
  - {id: q3, prompt: 'a much longer question about the vpn session and what happens after it ends', context: [vpn], expect: {answer_keywords: [echo]}}
  - {id: q4, prompt: 'who may use the vpn', context: [vpn], expect: {answer_keywords: [echo]}}
"""


def suite_text(base_url: str, load: str = "{levels: [1, 4], requests: 6, replay: 3, rounds: 2}") -> str:
    return f"""
schema_version: 1
name: loadtest
casesets: [sets]
generation: {{max_new_tokens: 16}}
variants:
  - name: base
    baseline: true
    backend: http
    model: tiny-chat
    options: {{base_url: '{base_url}', verify_settings: false, retry: {{max_retries: 0}}}}
  - name: cand
    backend: http
    model: tiny-chat
    options: {{base_url: '{base_url}', verify_settings: false, retry: {{max_retries: 0}}, extra_body: {{top_k: 1}}}}
load: {load}
"""


@pytest.fixture
def server():
    srv = FakeOpenAIServer()
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _req(i: int, words: int = 2) -> Request:
    return Request(f"c{i}", (("user", " ".join(["word"] * words) + f" {i}"),), max_new_tokens=8)


# -- percentiles ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([], 50, None),
        ([3.0], 95, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([4.0, 1.0, 3.0, 2.0], 0, 1.0),
        ([4.0, 1.0, 3.0, 2.0], 100, 4.0),
        (list(range(1, 101)), 95, 95.05),
        (list(range(1, 101)), 99, 99.01),
    ],
)
def test_percentile_interpolates_between_ranks(values, q, expected):
    got = L.percentile([float(v) for v in values], q)
    assert got == (None if expected is None else pytest.approx(expected))


def test_percentile_refuses_a_share_outside_0_100():
    with pytest.raises(ValueError):
        L.percentile([1.0], 101)


# -- the traffic -------------------------------------------------------------------------------
def test_window_traffic_is_the_same_draw_for_every_variant_and_spreads_the_replays():
    pools = {"short": [_req(i) for i in range(3)], "long": [_req(i, 50) for i in range(3, 5)]}
    replays = [_req(10), _req(11)]
    s = LoadSettings(levels=(4,), requests=10, replay=2, stream=0.5)
    a = L.window_traffic(pools, replays, s, 4, 0)
    b = L.window_traffic(pools, replays, s, 4, 0)
    assert [(i.kind, i.request.case_id, i.stream) for i in a] == [(i.kind, i.request.case_id, i.stream) for i in b]
    assert len(a) == 12 and [i.request.case_id for i in a if i.kind == "replay"] == ["c10", "c11"]
    assert all(i.kind != "replay" for i in a[:3])  # three background requests make the server busy first
    assert {i.kind for i in a} == {"replay", "short", "long"} and {i.stream for i in a if i.kind != "replay"} == {True, False}
    other_round = L.window_traffic(pools, replays, s, 4, 1)
    assert [i.request.case_id for i in other_round] != [i.request.case_id for i in a]
    assert [i.kind for i in L.window_traffic(pools, replays, s, L.REST, 0)] == ["replay", "replay"]


def test_mix_weights_pick_the_kinds():
    pools = {"short": [_req(0)], "long": [_req(1, 50)]}
    only_long = L.window_traffic(pools, [], LoadSettings(requests=8, mix={"long": 1.0}), 2, 0)
    assert {i.kind for i in only_long} == {"long"}


def test_queue_totals_read_vllm_metrics_and_say_when_absent():
    page = """# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3"} 2.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 1.5
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 3.0
vllm:request_queue_time_seconds_sum{engine="1",model_name="m"} 0.5
vllm:request_queue_time_seconds_count{engine="1",model_name="m"} 1.0
"""
    assert L.queue_totals(page) == (2.0, 4.0)
    assert L.queue_totals("http_requests_total 3\n") is None
    assert L._queue_wait((2.0, 4.0), (5.0, 10.0))[0] == pytest.approx(0.5)
    assert L._queue_wait(None, None) == (None, L.QUEUE_NOT_EXPOSED)


def test_not_exposed_is_one_word_said_of_the_server_for_the_queue_wait():
    """Issue 41: one NOT_EXPOSED (the engine metrics' cell); load's queue-wait source says it of the server."""
    from evalsuite.backends import vllm_metrics
    from evalsuite.run import load_records

    assert load_records.NOT_EXPOSED is vllm_metrics.NOT_EXPOSED
    assert L.QUEUE_NOT_EXPOSED == f"{vllm_metrics.NOT_EXPOSED} by the server" == "not exposed by the server"
    assert L.LoadWindow(variant="v", level=1, round=0, requests=0, errors=0, timeouts=0, wall_s=0.0, new_tokens=0).queue_wait_source == L.QUEUE_NOT_EXPOSED


# -- a window ----------------------------------------------------------------------------------
def test_a_window_records_latencies_tokens_errors_and_replays(server):
    be = make_backend(server)
    target = L.target_of(type("V", (), {"name": "srv", "backend": "http"})(), be)
    reqs = [_req(i) for i in range(4)] + [Request("bad", (("user", "boom"),), max_new_tokens=8)]
    pools = {"short": reqs, "long": reqs[-2:]}
    s = LoadSettings(requests=8, replay=2, stream=1.0, timeout_s=10)
    w = asyncio.run(L.run_window(target, L.window_traffic(pools, reqs[:2], s, 3, 0), 3, 0, s))
    be.close()
    assert w.requests == 10 and w.not_sent == 0
    assert w.errors == sum(1 for e in server.posts() if e["body"]["messages"][-1]["content"] == "boom")
    assert w.errors == 0 or any("HTTP 500" in e for e in w.error_samples)
    assert len(w.e2e_s) == w.requests - w.errors and len(w.ttft_s) == len(w.e2e_s)
    assert min(w.ttft_s) >= test_http.FIRST_TOKEN_DELAY_S  # the fake server waits before its first content
    assert w.itl_s and w.new_tokens > 0 and w.queue_wait_source == L.QUEUE_NOT_EXPOSED
    assert [(r["case_id"], r["text"]) for r in w.replays] == [("c0", "echo: word word 0"), ("c1", "echo: word word 1")]
    assert L.LoadWindow.from_dict(w.to_dict()) == w


def test_a_window_stops_sending_when_its_duration_passes(server):
    be = make_backend(server)
    target = L.target_of(type("V", (), {"name": "srv", "backend": "http"})(), be)
    slow = [Request(f"s{i}", (("user", "wait:0.3"),), max_new_tokens=8) for i in range(6)]
    s = LoadSettings(requests=6, replay=0, duration_s=0.2, stream=0.0, timeout_s=10)
    w = asyncio.run(L.run_window(target, L.window_traffic({"short": slow}, [], s, 1, 0), 1, 0, s))
    be.close()
    assert w.requests == 1 and w.not_sent == 5


def test_a_request_past_its_timeout_is_a_timeout(server):
    be = make_backend(server)
    target = L.target_of(type("V", (), {"name": "srv", "backend": "http"})(), be)
    s = LoadSettings(requests=1, replay=0, stream=1.0, timeout_s=0.3)
    w = asyncio.run(L.run_window(target, L.window_traffic({"short": [Request("w", (("user", "wait:1"),))]}, [], s, 1, 0), 1, 0, s))
    be.close()
    assert (w.timeouts, w.errors, w.e2e_s) == (1, 0, ())


@pytest.mark.parametrize("url", ["http://10.1.2.3:8000/v1", "https://api.example.com/v1"])
def test_traffic_to_another_host_is_refused(url):
    target = L.LoadTarget(name="remote", base_url=url, body=lambda r, s: {})
    with pytest.raises(EvalsuiteError, match="not on loopback"):
        asyncio.run(L.run_window(target, [], 1, 0, LoadSettings()))


# -- through `evalsuite run`: resumable, scored, judged ----------------------------------------
def _run(tmp_path, suite_file, resume=None):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    opts = RunOptions(progress=False, cache_path=str(tmp_path / "cache.sqlite"), runs_dir=str(tmp_path / "runs"), resume=resume)
    return run_suite(load_suite(suite_file), opts)


def test_load_runs_with_the_run_and_a_resumed_run_skips_finished_windows(write, tmp_path, server, monkeypatch):
    write("sets/cases.yaml", CASES)
    suite_file = write("suite.yaml", suite_text(server.base_url))
    calls = []
    resumed = False
    real = L.run_window

    async def counted(target, items, level, rnd, settings, **kw):
        calls.append((target.name, level, rnd))
        if len(calls) == 5 and not resumed:
            raise KeyboardInterrupt  # killed in the middle of the load
        return await real(target, items, level, rnd, settings, **kw)

    monkeypatch.setattr(L, "run_window", counted)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, suite_file)
    [run_dir] = (tmp_path / "runs").iterdir()
    from evalsuite.run.store import RunStore

    kept = L.stored_windows(RunStore(run_dir).read_json(RunStore.LOAD))
    assert [w.key for w in kept] == [("base", 0, 0), ("cand", 0, 0), ("base", 1, 0), ("cand", 1, 0)]
    # ABBA: rest, level 1 round 0 (base, cand), then round 1 reversed
    assert calls[4] == ("cand", 1, 1)
    calls.clear()
    resumed = True
    result = _run(tmp_path, suite_file, resume=str(run_dir))
    assert ("base", 0, 0) not in calls and ("base", 1, 0) not in calls
    windows = L.stored_windows(result.store.read_json(result.store.LOAD))
    assert sorted(w.key for w in windows) == sorted((v, lv, r) for v in ("base", "cand") for lv, r in [(0, 0), (1, 0), (1, 1), (4, 0), (4, 1)])
    assert result.store.read_json(result.store.STATUS)["complete"] is True


class _LoadSensitive(dict):
    """A SCRIPT whose answers change while other requests are in flight (a batch-variant server)."""

    def __init__(self, server):
        super().__init__(test_http.SCRIPT)
        self.server = server

    def get(self, key, default=None):
        with self.server.lock:
            busy = sum(1 for e in self.server.log if "end" not in e) > 1
        return "an answer that changed under load" if busy and "vpn" in key else super().get(key, default)


def _judge(store, rules: str, tmp_path):
    from evalsuite.judge import judge_run
    from evalsuite.verdict.rubric import parse_rubric

    import yaml

    rubric = parse_rubric(yaml.safe_load(rules), "rubric.yaml")
    return judge_run(store, rubric, "production", queue=tmp_path / "none.sqlite")


RULES = """
schema_version: 1
rules:
  - {name: batch-invariance, max_load_flips: 0}
  - {name: load-latency, max_load_ttft_p95_ratio: 50}
  - {name: load-errors, max_load_error_rate: 0.0, max_load_timeout_rate: 0.0}
"""


def _check_reports(judgment, tmp_path):
    """The stability section in the HTML report (with the curve), the markdown and the terminal verdict."""
    import base64
    import io
    import re

    from rich.console import Console

    from evalsuite.report.api import write_report
    from evalsuite.report.terminal import judgment_view

    res = write_report(judgment, out_dir=tmp_path / "report")
    html = res.html.read_text("utf-8")
    assert '<section id="stability">' in html and 'id="plot-load"' in html
    png = re.search(r'id="plot-load"[^>]*src="data:image/png;base64,([^"]+)"', html)
    assert png and base64.b64decode(png.group(1))[:8] == b"\x89PNG\r\n\x1a\n"
    rows = re.findall(r'<tr data-filter data-variant="(base|cand)">\s*<td class="l"><b>\w+</b></td><td>(\w+)</td>', html)
    assert [lv for v, lv in rows if v == "cand"] == ["rest", "1", "4"]
    md = res.markdown.read_text("utf-8")
    assert "### Stability under load" in md and "| `cand` | 4 |" in md
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(judgment_view(judgment))
    assert "Stability under load" in out.getvalue() and "cand" in out.getvalue()


def test_flips_under_load_fail_batch_invariance_and_the_rest_is_judged(write, tmp_path, server, monkeypatch):
    write("sets/cases.yaml", CASES)
    suite_file = write("suite.yaml", suite_text(server.base_url, "{levels: [1, 4], requests: 8, replay: 4, rounds: 2, stream: 0.5}"))
    result = _run(tmp_path, suite_file)  # a steady server: nothing flips
    j = _judge(result.store, RULES, tmp_path)
    by = {r.rule: r for r in j.verdict.results}
    assert by["batch-invariance"].status == "pass", by["batch-invariance"].note
    assert by["load-errors"].status == "pass"
    # two rounds: an interval, wide on a fake server; a generous limit passes or cannot judge, never fails
    assert by["load-latency"].status in ("pass", "cannot_judge")
    load = j.comparison.load
    assert [lv.level for lv in load.for_variant("cand")] == [1, 4] and load.rest("cand") is not None
    four = load.for_variant("cand")[1]
    assert four.requests == 2 * 12 and four.ttft_p95_ratio is not None and four.ttft_p95_ratio.n == 2
    assert four.ttft_s["p95"] >= four.ttft_s["p50"] and four.tokens_per_s and not four.changed
    _check_reports(j, tmp_path)

    monkeypatch.setattr(test_http, "SCRIPT", _LoadSensitive(server))  # now answers change under load
    result = _run(tmp_path / "again", suite_file)
    j = _judge(result.store, RULES, tmp_path)
    by = {r.rule: r for r in j.verdict.results}
    assert by["batch-invariance"].status == "fail"
    [v, *_] = by["batch-invariance"].violations
    assert "4 in flight" in v.reason and "beyond the noise floor" in v.reason
    four = j.comparison.load.for_variant("cand")[1]
    assert set(four.changed) <= {"q2", "q3", "q4"} and four.changed and j.comparison.load.rest("cand").flips == ()
    assert j.verdict.status == "regression"


class _DeadServer(ServedBackend):
    """A served variant whose server does not start (its model fails to load)."""

    base_url = endpoint_kind = responses_begun = ""

    def generate(self, requests):
        raise AssertionError("never asked: the server is not up")

    fingerprint = endpoint = generate

    def request_body(self, req, *, stream):
        raise AssertionError("never asked: the server is not up")

    def start(self):
        raise EvalsuiteError("the transformers server did not come up within 5s: it exited with status 1; its log ends with: OSError: no model")


def test_a_server_that_does_not_start_is_cannot_judge_and_the_others_go_on(tmp_path, server):
    from evalsuite.cases.suite import Variant
    from evalsuite.run.store import RunStore
    from evalsuite.verdict.load import load_checks, summarize_load
    from evalsuite.verdict.rubric import LoadRule

    from evalsuite.cases.caseset import Case

    cases = [Case(id=f"q{i}", scenario="kb_qa", kind="grounded", prompt=f"question {i}") for i in range(3)]
    variants = [Variant(name="dead", backend="http"), Variant(name="ok", backend="http")]
    backends = {"dead": _DeadServer(), "ok": make_backend(server)}
    store = RunStore(tmp_path)
    doc = L.run_load(store, variants, backends, cases, LoadSettings(levels=(2,), requests=3, replay=2, rounds=1))
    backends["ok"].close()
    assert doc["failed"].keys() == {"dead"} and "OSError: no model" in doc["failed"]["dead"]
    assert sorted(w.key for w in L.stored_windows(doc)) == [("ok", 0, 0), ("ok", 2, 0)]
    summary = summarize_load(store.read_json(store.LOAD), "ok")
    [check] = load_checks(LoadRule(name="e", max_load_error_rate=0.0), summary, "dead")
    assert check.status == "cannot_judge" and "not put under load" in check.reason
    assert [c.status for c in load_checks(LoadRule(name="e", max_load_error_rate=0.0), summary, "ok")] == ["pass"]
