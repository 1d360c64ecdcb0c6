"""Fault probes of served variants (issue 31, item 4): the `faults:` block, the classification of
each fault's outcome, and the probes against a scripted OpenAI-compatible server on loopback that
misbehaves on purpose (a 413 or a 500 or silence for an over-long input, answers that change after
a client disconnects, 429s under a burst). Real servers: tests/backends/test_faults_served.py."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import FrozenInstanceError
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalsuite.cases.fault_options import FAULT_KINDS, FaultSettings, parse_faults_block
from evalsuite.errors import Problem, ValidationError
from evalsuite.run import faults as F
from evalsuite.states import CANNOT_JUDGE_WORD, FAILED, FAULT_OUTCOMES, REJECTED_AS_DESIGNED, SURVIVED

# -- the `faults:` block ------------------------------------------------------------------------


def _parse(raw):
    problems: list[Problem] = []
    return parse_faults_block(raw, "s.yaml", lambda _p: 7, problems), [f"{p.field}: {p.message}" for p in problems]


@pytest.mark.parametrize(
    "raw, kinds, extra",
    [
        ("all", FAULT_KINDS, {}),
        (["burst", "retry"], ("retry", "burst"), {}),  # run in FAULT_KINDS order
        ({"kinds": ["disconnect"], "burst": 12, "timeout_s": 30}, ("disconnect",), {"burst": 12, "timeout_s": 30.0}),
        ({"variants": ["served"]}, FAULT_KINDS, {"variants": ("served",)}),
    ],
)
def test_the_faults_block_parses(raw, kinds, extra):
    settings, problems = _parse(raw)
    assert problems == [] and settings is not None
    assert settings.kinds == kinds
    for key, value in extra.items():
        assert getattr(settings, key) == value


@pytest.mark.parametrize(
    "raw, problem",
    [
        (["disconect"], "faults.kinds: unknown probe 'disconect' (did you mean 'disconnect'?)"),
        ({"burts": 3}, "faults.burts: unknown setting (did you mean 'burst'?)"),
        ({"burst": 1}, "faults.burst: expected an integer of at least 2, got 1"),
        ({"timeout_s": 0}, "faults.timeout_s: expected a positive number of seconds, got 0"),
        (42, "faults: expected `all`, a list of probes or a mapping, got 42"),
    ],
)
def test_a_bad_faults_block_names_the_field(raw, problem):
    settings, problems = _parse(raw)
    assert settings is None and problems and problems[0].startswith(problem)


def test_the_suite_checks_the_probed_variants_are_served(write):
    from evalsuite.cases.suite import load_suite

    write("sets/c.yaml", "schema_version: 1\ncases:\n  - {id: a, scenario: kb_qa, kind: grounded, prompt: hi}\n")
    suite = """
        schema_version: 1
        casesets: [sets]
        faults: {variants: [served, base, nope]}
        variants:
          - {name: base, baseline: true, backend: fake}
          - {name: served, backend: http, options: {serve: {launcher: transformers}}}
        """
    with pytest.raises(ValidationError) as err:
        load_suite(write("suite.yaml", suite))
    text = str(err.value)
    assert "faults.variants: fault probes need a served variant" in text and "unknown variant 'nope'" in text and "'served'" not in text.split("nope")[1]
    ok = load_suite(write("ok.yaml", suite.replace("served, base, nope", "served")))
    assert ok.faults == FaultSettings(variants=("served",))
    assert ok.resolved()["faults"]["variants"] == ["served"]  # the run's suite.yaml says what was probed


def test_a_fault_result_is_a_frozen_keyword_record_that_round_trips():
    res = F.FaultResult(variant="v", kind="burst", outcome=SURVIVED, evidence="queued", timings={"queue_wait_max_s": 0.5})
    assert F.FaultResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res
    with pytest.raises(FrozenInstanceError):
        res.outcome = FAILED  # type: ignore[misc]
    with pytest.raises(TypeError):
        F.FaultResult("v", "burst", SURVIVED, "queued")  # type: ignore[misc]
    assert set(FAULT_OUTCOMES) == {REJECTED_AS_DESIGNED, SURVIVED, FAILED, CANNOT_JUDGE_WORD}


# -- classification -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, timed_out, alive, outcome, says",
    [
        (413, False, True, REJECTED_AS_DESIGNED, "HTTP 413"),
        (400, False, False, FAILED, "died"),
        (500, False, True, FAILED, "server error"),
        (None, True, True, FAILED, "hang"),
        (None, False, False, FAILED, "connection failed"),
        (200, False, True, SURVIVED, "answered instead of refusing"),
    ],
)
def test_an_over_long_input_is_classified(status, timed_out, alive, outcome, says):
    got, evidence = F.classify_overlong(status=status, timed_out=timed_out, alive=alive, message="m", timeout_s=5)
    assert got == outcome and says in evidence


@pytest.mark.parametrize(
    "streamed, alive, before, after, outcome",
    [
        (True, True, ["a", "b"], ["a", "b"], SURVIVED),
        (True, True, ["a", "b"], ["a", "c"], FAILED),
        (True, False, ["a"], [None], FAILED),
        (True, True, ["a", "b"], ["a", None], FAILED),  # a request lost after the drop
        (False, True, ["a"], ["a"], CANNOT_JUDGE_WORD),
        (True, True, [None], ["a"], CANNOT_JUDGE_WORD),
    ],
)
def test_a_disconnect_is_classified(streamed, alive, before, after, outcome):
    assert F.classify_disconnect(streamed=streamed, alive=alive, before=before, after=after)[0] == outcome


@pytest.mark.parametrize(
    "answers, records, cached, outcome",
    [
        ([["a", "b"], ["a", "b"]], 2, 2, SURVIVED),
        ([["a", "b"], ["a", "x"]], 2, 2, FAILED),
        ([["a", "b"], ["a", "b"]], 4, 2, FAILED),  # duplicate run records
        ([["a", "b"], ["a", "b"]], 2, 3, FAILED),  # duplicate cache rows
        ([["a", None], ["a", "b"]], 2, 2, FAILED),
    ],
)
def test_retries_are_classified(answers, records, cached, outcome):
    assert F.classify_retry(answers=answers, records=records, cached=cached, expected=2)[0] == outcome


@pytest.mark.parametrize(
    "kwargs, outcome, says",
    [
        ({"killed": False, "noticed": False, "restarted": None, "lost": [], "unfinished": []}, CANNOT_JUDGE_WORD, "before the server could be killed"),
        ({"killed": True, "noticed": False, "restarted": None, "lost": [], "unfinished": []}, FAILED, "unnoticed"),
        ({"killed": True, "noticed": True, "restarted": "no port", "lost": [], "unfinished": []}, FAILED, "did not restart"),
        ({"killed": True, "noticed": True, "restarted": None, "lost": ["a#0"], "unfinished": []}, FAILED, "lost"),
        ({"killed": True, "noticed": True, "restarted": None, "lost": [], "unfinished": ["b#0"]}, FAILED, "unfinished"),
        ({"killed": True, "noticed": True, "restarted": None, "lost": [], "unfinished": []}, SURVIVED, "restarted through its launcher"),
    ],
)
def test_a_killed_server_is_classified(kwargs, outcome, says):
    got, evidence = F.classify_killed(**kwargs)
    assert got == outcome and says in evidence


@pytest.mark.parametrize(
    "error, hung, tail, outcome",
    [
        ("exited with status 1", False, "Traceback\nValueError: bad model_type\n\nYou can update it with pip", REJECTED_AS_DESIGNED),
        ("exited with status 1", False, "  \n", FAILED),  # no lines to show
        ("no answer at ...", True, "", FAILED),
        (None, False, "", FAILED),  # a broken model served
    ],
)
def test_a_load_failure_is_classified(error, hung, tail, outcome):
    got, evidence = F.classify_load_failure(error=error, hung=hung, tail=tail, timeout_s=9)
    assert got == outcome
    if outcome == REJECTED_AS_DESIGNED:
        assert evidence.endswith("last lines: ValueError: bad model_type | You can update it with pip")  # from the exception's line on


def test_a_burst_is_classified():
    assert F.classify_burst(sent=4, errors=[], queue_waits=[0.0, 0.2, 0.4, 0.6])[0] == SURVIVED
    outcome, evidence = F.classify_burst(sent=4, errors=["HTTP 429: busy", "HTTP 429: busy"], queue_waits=[0.1])
    assert outcome == FAILED and "2 of 4" in evidence and "HTTP 429" in evidence


# -- the probes against a scripted server -------------------------------------------------------


class Scripted(ThreadingHTTPServer):
    """An OpenAI-compatible server whose misbehaviour is set per test."""

    daemon_threads = True
    overlong = "413"  #: 413 | 500 | hang | 200: its answer to an over-long prompt
    forgetful = False  #: its answers change once a client disconnected mid-stream
    max_in_flight = 100  #: more at once are refused with 429
    disconnected = False
    dropped = 0  #: streams begun and not finished: a client gone mid-stream, whether or not a write has failed yet
    in_flight = 0
    lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def log_message(self, *args):
        pass

    def _json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._json(200, {"data": [{"id": "m"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        s = self.server
        if len(prompt) > 2000:
            if s.overlong == "hang":
                time.sleep(3)
                return
            if s.overlong != "200":
                return self._json(int(s.overlong), {"error": {"message": "prompt too long" if s.overlong == "413" else "boom"}})
        with s.lock:
            if s.in_flight >= s.max_in_flight:
                return self._json(429, {"error": {"message": "busy"}})
            s.in_flight += 1
        try:
            self._answer(body, prompt)
        finally:
            with s.lock:
                s.in_flight -= 1

    def _answer(self, body, prompt):
        s = self.server
        words = (f"echo {prompt[:12]}" + (" again" if s.forgetful and (s.disconnected or s.dropped) else "")).split()
        words += ["more"] * (body.get("max_tokens", 8) - len(words))
        if not body.get("stream"):
            time.sleep(0.05)
            return self._json(200, {"choices": [{"message": {"content": " ".join(words)}, "finish_reason": "stop"}], "usage": {"completion_tokens": 3}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        with s.lock:
            s.dropped += 1  # until the stream ends: the server learns of a gone client only at a later write
        try:
            for w in words:
                time.sleep(0.05)
                self.wfile.write(f"data: {json.dumps({'choices': [{'delta': {'content': w + ' '}}]})}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            with s.lock:
                s.dropped -= 1
        except (BrokenPipeError, ConnectionResetError):
            s.disconnected = True


@pytest.fixture
def scripted():
    server = Scripted(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def ctx_for(scripted, tmp_path):
    from evalsuite.backends.http import HTTPBackend
    from evalsuite.cases.caseset import Case
    from evalsuite.cases.options import GenerationSettings
    from evalsuite.cases.suite import Variant
    from evalsuite.run.faults import ProbeContext
    from evalsuite.run.store import RunStore

    backends = []

    def make(**settings):
        url = f"http://127.0.0.1:{scripted.server_address[1]}/v1"
        options = {"base_url": url, "verify_settings": False, "timeout_s": 5, "retry": {"max_retries": 0}}
        variant = Variant(name="v", backend="http", model="m", options=options, generation=GenerationSettings(max_new_tokens=8))
        be = HTTPBackend(variant)
        backends.append(be)
        cases = [Case(id=f"c{i}", scenario="kb_qa", kind="grounded", prompt=f"question {i}?") for i in range(2)]
        (tmp_path / "run").mkdir(exist_ok=True)
        return ProbeContext(
            variant=variant,
            backend=be,
            cases=cases,
            settings=FaultSettings(**({"timeout_s": 2.0, "cases": 2, "overlong_tokens": 1000} | settings)),
            scratch=tmp_path / "scratch",
            store=RunStore(tmp_path / "run"),
            generate=lambda *a: None,
        )

    yield make
    for be in backends:
        be.close()


@pytest.mark.parametrize(
    "behaviour, outcome, says",
    [
        ("413", REJECTED_AS_DESIGNED, "HTTP 413: prompt too long"),
        ("500", FAILED, "HTTP 500"),
        ("hang", FAILED, "no answer within 2s (a hang)"),
        ("200", SURVIVED, ""),
    ],
)
def test_the_over_long_probe_reads_the_servers_answer(scripted, ctx_for, behaviour, outcome, says):
    from evalsuite.run.fault_probes import probe_overlong

    scripted.overlong = behaviour
    (got, evidence), timings = probe_overlong(ctx_for())
    assert got == outcome and says in evidence and "1000 words" in evidence
    assert timings["answer_s"] < 2.5


@pytest.mark.parametrize("forgetful, outcome", [(False, SURVIVED), (True, FAILED)])
def test_the_disconnect_probe_compares_the_answers_around_the_drop(scripted, ctx_for, forgetful, outcome):
    from evalsuite.run.fault_probes import probe_disconnect

    scripted.forgetful = forgetful
    (got, evidence), _ = probe_disconnect(ctx_for())
    deadline = time.monotonic() + 5
    while not scripted.disconnected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scripted.disconnected  # the probe really left mid-stream
    assert got == outcome, evidence


@pytest.mark.parametrize("max_in_flight, outcome", [(100, SURVIVED), (2, FAILED)])
def test_the_burst_probe_fails_a_server_that_refuses_instead_of_queueing(scripted, ctx_for, max_in_flight, outcome):
    from evalsuite.run.fault_probes import probe_burst

    scripted.max_in_flight = max_in_flight
    (got, evidence), timings = probe_burst(ctx_for(burst=6))
    assert got == outcome, evidence
    if outcome == FAILED:
        assert "HTTP 429: busy" in evidence
    else:
        assert timings["queue_wait_max_s"] >= timings["queue_wait_p50_s"] >= 0


def test_the_retry_probe_records_each_request_once(ctx_for):
    from evalsuite.run.fault_probes import probe_retry

    ctx = ctx_for()
    (got, evidence), _ = probe_retry(ctx)
    assert got == SURVIVED, evidence
    lines = (ctx.scratch / "retry" / "generations.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 4  # two sends of two requests in the file, one record each when read


def test_outcomes_are_stored_at_once_and_a_rerun_keeps_them(scripted, ctx_for, tmp_path, monkeypatch):
    from evalsuite.run import fault_probes
    from evalsuite.run.store import RunStore

    ctx = ctx_for(kinds=("overlong_input", "retry"))
    store = RunStore(tmp_path / "run")
    calls = []
    monkeypatch.setitem(fault_probes.PROBES, "retry", lambda c: (calls.append("retry"), ((SURVIVED, "same"), {}))[1])
    variant = ctx.variant.__class__(name="v", backend="http", model="m", options={"serve": {"launcher": "transformers"}})
    first = fault_probes.probe_variant(store, variant, ctx.backend, ctx.cases, ctx.settings, generate=ctx.generate)
    assert [r.kind for r in first] == ["overlong_input", "retry"] and calls == ["retry"]
    assert first[0].outcome == REJECTED_AS_DESIGNED and first[0].timings["probe_s"] > 0
    again = fault_probes.probe_variant(store, variant, ctx.backend, ctx.cases, ctx.settings, generate=ctx.generate)
    assert again == [] and calls == ["retry"]
    assert F.read_faults(store)["v"] == {"overlong_input": first[0], "retry": first[1]}


def test_a_variant_whose_server_did_not_load_is_cannot_judge_without_probing(tmp_path):
    from evalsuite.cases.suite import Variant
    from evalsuite.run import fault_probes
    from evalsuite.run.store import RunStore

    class Unloaded:
        load_error = "the transformers server did not come up within 5s: it exited with status 1; its log ends with:\nValueError: bad"

    store = RunStore(tmp_path)
    variant = Variant(name="v", backend="http", model="m", options={"serve": {"launcher": "transformers"}})
    out = fault_probes.probe_variant(store, variant, Unloaded(), [], None, generate=lambda *a: None)
    assert [(r.kind, r.outcome) for r in out] == [("load_failure", CANNOT_JUDGE_WORD)] and "ValueError: bad" in out[0].evidence
    out = fault_probes.probe_variant(store, variant, Unloaded(), [], FaultSettings(kinds=("burst", "load_failure")), generate=lambda *a: None)
    assert [(r.kind, r.outcome) for r in out] == [("burst", CANNOT_JUDGE_WORD)]  # load_failure is recorded already


# -- the runner: a served variant whose server never comes up -------------------------------------


def _crashing_launcher(tmp_path):
    """A server that prints its last words and exits at once (a model that fails to load), counting its starts."""
    import sys

    from evalsuite.backends.serve_launcher import Launcher

    count = tmp_path / "starts"

    class Crashing(Launcher):
        name = "crashing"

        @classmethod
        def command(cls, model_path, model_name, *, host, port, continuous_batching, args):
            code = f"open({str(count)!r}, 'a').write('x'); print('ValueError: the checkpoint has model type broken_on_purpose'); raise SystemExit(1)"
            return [sys.executable, "-c", code]

    return Crashing, count


def test_a_served_variant_that_never_loads_is_started_once_recorded_and_the_others_go_on(write, tmp_path, monkeypatch):
    import types

    from evalsuite.backends.serve_launcher import LAUNCHERS
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    crashing, starts = _crashing_launcher(tmp_path)
    module = types.ModuleType("evalsuite_test_crashing_launcher")
    module.Crashing = crashing
    monkeypatch.setitem(__import__("sys").modules, module.__name__, module)
    monkeypatch.setitem(LAUNCHERS, "crashing", f"{module.__name__}:Crashing")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", "utf-8")
    write("sets/c.yaml", "schema_version: 1\ncases:\n" + "".join(f"  - {{id: q{i}, scenario: kb_qa, kind: grounded, prompt: 'q{i}?'}}\n" for i in range(3)))
    suite = write(
        "suite.yaml",
        f"""
        schema_version: 1
        casesets: [sets]
        generation: {{max_new_tokens: 4, batch_size: 1}}
        variants:
          - {{name: base, baseline: true, backend: fake}}
          - {{name: served, backend: http, model: {model}, options: {{serve: {{launcher: crashing, startup_timeout_s: 30}}, retry: {{max_retries: 0}}}}}}
          - {{name: other, backend: fake, quantization: {{method: bnb, bits: 8}}}}
        """,
    )
    res = run_suite(load_suite(suite), RunOptions(progress=False, score=False, cache_path=str(tmp_path / "c.sqlite"), runs_dir=str(tmp_path / "runs")))
    gens = res.store.generations()
    assert [g.ok for g in gens if g.variant == "served"] == [False] * 3
    assert all("broken_on_purpose" in g.error for g in gens if g.variant == "served")  # the server's last lines, in every error
    assert all(g.ok for g in gens if g.variant in ("base", "other")) and sum(g.variant == "other" for g in gens) == 3  # the others go on
    assert starts.read_text() == "x"  # started once, not once per batch
    recorded = F.read_faults(res.store)
    assert list(recorded) == ["served"] and recorded["served"]["load_failure"].outcome == CANNOT_JUDGE_WORD
    assert F.load_failures(res.store)["served"].startswith("its model did not load: variant 'served': the crashing server did not come up")
