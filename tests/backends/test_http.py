"""The http backend against a small OpenAI-compatible server started in the test (stdlib only)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalsuite.backends.base import GenerationSettings, Request
from evalsuite.backends.http import HTTPBackend
from evalsuite.errors import EvalsuiteError
from evalsuite.cases.suite import Variant

FIRST_TOKEN_DELAY_S = 0.1  #: the server waits this long between the role chunk and the first content
SCRIPT = {"hello": "Hello there friend", "json please": '{"a": 1}'}


class FakeOpenAIServer(ThreadingHTTPServer):
    """POST /v1/chat/completions (plain and SSE) and GET /v1/models, with scripted replies.

    The reply depends on the last user message (or the last line of a completions prompt): a
    SCRIPT entry, `boom` (HTTP 500), `slow` (2 s before any byte), `trickle` (one word every
    0.1 s), `wait:<s>` (sleep s, then reply), `fail:<status>:<n>[:<retry-after>]` (the first n
    such requests answer that status, with that Retry-After), `drop:<n>` (the first n close the
    connection without a reply), `seeded` (the text names the request's seed: a server that samples
    whatever the temperature), `verbose` (more words than max_tokens allows), `whoami` (401 whose
    body echoes the Authorization header), else an echo. Fields in `reject_fields` are refused
    with a 422 naming them, as FastAPI-based servers do. Every request is logged with server-side
    start and end times.
    """

    daemon_threads = True  # a slow handler must not hold up teardown

    def __init__(self, models=("tiny-chat",)):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.models = list(models)
        self.serve_models = True
        self.log: list[dict] = []
        self.models_hits = 0
        self.reject_fields: set[str] = set()
        self.failures: dict[str, int] = {}  #: scripted failures answered so far, per prompt
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def posts(self) -> list[dict]:
        with self.lock:
            return [e for e in self.log if e["path"].endswith("/completions")]


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer
    protocol_version = "HTTP/1.0"  # the connection closes after each reply: SSE ends at EOF

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models" or not self.server.serve_models:
            return self._json(404, {"error": {"message": "not found"}})
        with self.server.lock:
            self.server.models_hits += 1
        self._json(200, {"object": "list", "data": [{"id": m, "object": "model", "root": f"/models/{m}"} for m in self.server.models]})

    def do_POST(self):
        entry = {"path": self.path, "start": time.monotonic(), "auth": self.headers.get("Authorization")}
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        entry["body"] = body
        with self.server.lock:
            self.server.log.append(entry)
        self._entry = entry
        try:
            self._reply(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to do
        finally:
            entry.setdefault("end", time.monotonic())

    def _scripted_failure(self, last: str, limit: int) -> bool:
        """Whether this request is one of the first `limit` with this prompt (counted)."""
        with self.server.lock:
            n = self.server.failures.get(last, 0)
            if n >= limit:
                return False
            self.server.failures[last] = n + 1
            return True

    def _reply(self, body: dict) -> None:
        rejected = sorted(set(body) & self.server.reject_fields)
        if rejected:
            return self._json(422, {"detail": f"Unexpected fields in the request: {set(rejected)}"})
        completions = "prompt" in body
        if completions:
            last = body["prompt"].rsplit("\n", 1)[-1]
        else:
            last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        last = last.rsplit("Question: ", 1)[-1]  # a kb_qa turn carries documents before the question
        if last == "boom":
            return self._json(500, {"error": {"message": "injected failure", "type": "server_error"}})
        if last.startswith("fail:"):
            _, status, limit, *after = last.split(":")
            if self._scripted_failure(last, int(limit)):
                return self._json(int(status), {"error": {"message": f"scripted {status}"}}, {"Retry-After": after[0]} if after else None)
        if last.startswith("drop:") and self._scripted_failure(last, int(last.split(":")[1])):
            self.close_connection = True
            return  # no status line: the client sees the connection close
        if last == "whoami":
            return self._json(401, {"error": {"message": f"bad key {self.headers.get('Authorization')}"}})
        if last == "slow":
            time.sleep(2.0)
        if last.startswith("wait:"):
            time.sleep(float(last.split(":")[1]))
            # done before the reply is written: once the client has read it, it may send its next
            # request before this thread gets to run again, and that must not count as an overlap
            self._entry["end"] = time.monotonic()
        if last in ("call tools", "call in text") and body.get("tools"):
            return self._tool_reply(body, in_text=last == "call in text")
        if last == "seeded":
            words = [f"seed-{body.get('seed')}"]
        elif last in ("trickle", "verbose"):
            words = "one two three four five six seven eight nine ten".split()
        else:
            words = SCRIPT.get(last, f"echo: {last}").split()
        finish = "stop"
        if len(words) > body.get("max_tokens", 1000) and last != "verbose":
            words, finish = words[: body["max_tokens"]], "length"
        text = " ".join(words)
        prompt_words = len(body["prompt"].split()) if completions else sum(len(m["content"].split()) for m in body["messages"])
        usage = {"prompt_tokens": prompt_words, "completion_tokens": len(words)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            choice = {"index": 0, "text": text} if completions else {"index": 0, "message": {"role": "assistant", "content": text}}
            return self._json(
                200,
                {
                    "id": "c1",
                    "object": "text_completion" if completions else "chat.completion",
                    "model": body["model"],
                    "choices": [choice | {"finish_reason": finish}],
                    "usage": usage,
                },
            )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(obj) -> None:
            self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        chunk = {"id": "c1", "object": "text_completion" if completions else "chat.completion.chunk", "model": body["model"]}

        def piece(content: str | None) -> dict:
            if completions:
                return {"index": 0, "text": content or ""}
            return {"index": 0, "delta": {} if content is None else {"content": content}}

        event(chunk | {"choices": [piece("") | ({} if completions else {"delta": {"role": "assistant", "content": ""}}) | {"finish_reason": None}]})
        time.sleep(FIRST_TOKEN_DELAY_S)
        for i, w in enumerate(words):
            event(chunk | {"choices": [piece(w if i == 0 else " " + w) | {"finish_reason": None}]})
            if last == "trickle":
                time.sleep(0.1)
        event(chunk | {"choices": [piece(None) | {"finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            event(chunk | {"choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")


    def _tool_reply(self, body: dict, *, in_text: bool) -> None:
        """Two parallel calls of the first tool offered, parsed as a server with a tool parser does
        (`tool_calls`; streamed: the id and name first, then the arguments in pieces), or left in the
        text as a server without one does (`in_text`)."""
        name = body["tools"][0]["function"]["name"]
        args = ['{"city": "Paris"}', '{"city": "Oslo"}']
        if in_text:
            text = "\n".join(f'<tool_call>\n{{"name": "{name}", "arguments": {a}}}\n</tool_call>' for a in args)
            message: dict = {"role": "assistant", "content": text}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": a}} for i, a in enumerate(args)]}
        usage = {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}
        if not body.get("stream"):
            return self._json(200, {"id": "c1", "object": "chat.completion", "model": body["model"], "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": body["model"]}

        def event(delta: dict, finish=None) -> None:
            self.wfile.write(f"data: {json.dumps(chunk | {'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n".encode())
            self.wfile.flush()

        event({"role": "assistant", "content": ""})
        if in_text:
            event({"content": message["content"]})
        else:
            for i, a in enumerate(args):
                event({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}]})
                for piece in (a[: len(a) // 2], a[len(a) // 2 :]):
                    event({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        event({}, "tool_calls")
        if (body.get("stream_options") or {}).get("include_usage"):
            self.wfile.write(f"data: {json.dumps(chunk | {'choices': [], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server():
    srv = FakeOpenAIServer()
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def make_backend(server, *, model="tiny-chat", timeout_s=None, **options) -> HTTPBackend:
    # no retries unless a test asks: a scripted failure is then recorded at once
    opts = {"base_url": server.base_url, "retry": {"max_retries": 0}, "verify_settings": False} | options
    return HTTPBackend(Variant(name="srv", backend="http", model=model, options=opts, generation=GenerationSettings(timeout_s=timeout_s)))


def req(prompt: str, case_id: str | None = None, **kw) -> Request:
    return Request(case_id or prompt, (("system", "Be brief."), ("user", prompt)), **({"max_new_tokens": 16} | kw))


# -- replies -----------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    "prompt, max_new, text, new_tokens, finish",
    [
        ("hello", 16, "Hello there friend", 3, "stop"),
        ("json please", 16, '{"a": 1}', 2, "stop"),
        ("what is two plus two", 16, "echo: what is two plus two", 6, "stop"),
        ("hello", 2, "Hello there", 2, "length"),
    ],
)
def test_reply_text_usage_and_finish(server, stream, prompt, max_new, text, new_tokens, finish):
    be = make_backend(server, stream=stream)
    [g] = be.generate([req(prompt, max_new_tokens=max_new)])
    be.close()
    assert g.ok, g.error
    assert (g.text, g.new_tokens, g.finish_reason) == (text, new_tokens, finish)
    assert g.prompt_tokens == 2 + len(prompt.split())  # "Be brief." + the prompt, counted by the server
    assert g.tokens_per_s == pytest.approx(new_tokens / g.latency_s)
    assert g.extra["served_model"] == "tiny-chat"


def test_stream_ttft_is_the_first_content_delta(server):
    be = make_backend(server)
    gens = be.generate([req("hello"), req("json please")])
    for g in gens:
        # the role-only chunk arrives at once; the first content only after the server's delay
        assert FIRST_TOKEN_DELAY_S <= g.ttft_s <= g.latency_s
        assert g.extra["ttft_source"] == "stream"
    [plain] = make_backend(server, stream=False).generate([req("hello")])
    assert plain.ttft_s is None and plain.extra["ttft_source"] is None


@pytest.mark.parametrize("stream", [True, False])
def test_request_body(server, stream):
    be = make_backend(server, stream=stream, extra_body={"top_k": 20, "repetition_penalty": 1.0})
    r = req("hello", sample=3, temperature=0.7, top_p=0.9, max_new_tokens=12)
    be.generate([r])
    [entry] = server.posts()
    body = entry["body"]
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_p"]) == ("tiny-chat", 12, 0.7, 0.9)
    assert body["seed"] == r.sample_seed() != req("hello", sample=4).sample_seed()
    assert (body["top_k"], body["repetition_penalty"]) == (20, 1.0)
    assert body["stream"] is stream
    assert ("stream_options" in body) is stream
    if stream:
        assert body["stream_options"] == {"include_usage": True}
    assert entry["auth"] is None


# -- failures stay per request -----------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_error_and_timeout_are_recorded_per_request(server, stream):
    be = make_backend(server, stream=stream, timeout_s=1.0)
    ok, err, slow, ok2 = be.generate([req("hello"), req("boom"), req("slow"), req("json please")])
    assert ok.ok and ok.text == "Hello there friend"
    assert ok2.ok and ok2.text == '{"a": 1}'
    assert not err.ok and not err.timeout
    assert err.error == "HTTP 500: injected failure" and err.finish_reason == "error" and err.text == ""
    assert err.extra["http_status"] == 500
    assert slow.timeout and "timed out after 1s" in slow.error and slow.finish_reason == "timeout"
    assert [g.case_id for g in (ok, err, slow, ok2)] == ["hello", "boom", "slow", "json please"]


def test_a_stream_that_trickles_past_the_deadline_times_out(server):
    # each chunk arrives well within the read timeout; only the request's deadline stops it
    [g] = make_backend(server, timeout_s=0.45).generate([req("trickle")])
    assert g.timeout and g.text == ""
    [done] = make_backend(server, timeout_s=5).generate([req("trickle")])
    assert done.ok and done.text.split()[-1] == "ten"


def test_suite_timeout_applies_per_request_unless_the_option_overrides(server):
    be = HTTPBackend(
        Variant(
            name="v", backend="http", model="tiny-chat", options={"base_url": server.base_url, "timeout_s": 0.3}, generation=GenerationSettings(timeout_s=60)
        )
    )
    assert be.timeout_s == 0.3
    assert make_backend(server, timeout_s=7).timeout_s == 7.0


def test_unreachable_server_is_an_error_per_request_after_bounded_retries(server):
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    be = HTTPBackend(
        Variant(name="v", backend="http", model="m", options={"base_url": f"http://127.0.0.1:{port}/v1", "retry": {"max_retries": 2, "backoff_s": 0.01}})
    )
    gens = be.generate([req("hello"), req("json please")])
    assert all(not g.ok and not g.timeout and "Connect" in g.error for g in gens)
    assert all("gave up after 3 attempts" in g.error and g.extra["attempts"] == 3 and len(g.extra["retries"]) == 2 for g in gens)
    be.close()


# -- concurrency -------------------------------------------------------------------------------
def _max_in_flight(entries: list[dict]) -> int:
    # a handler stamps "end" at the latest after its last write
    deadline = time.monotonic() + 5
    while any("end" not in e for e in entries) and time.monotonic() < deadline:
        time.sleep(0.01)
    events = sorted([(e["start"], 1) for e in entries] + [(e["end"], -1) for e in entries], key=lambda x: (x[0], x[1]))
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.parametrize("concurrency, in_flight", [(None, 4), (2, 2), (1, 1)])
def test_concurrency_bounds_requests_in_flight(server, concurrency, in_flight):
    opts = {} if concurrency is None else {"concurrency": concurrency}
    be = make_backend(server, stream=False, **opts)
    # 1 s per request: long enough that requests meant to overlap do overlap on a loaded machine
    gens = be.generate([req("wait:1.0", case_id=f"c{i}") for i in range(4)])
    assert [g.case_id for g in gens] == ["c0", "c1", "c2", "c3"] and all(g.ok for g in gens)
    entries = server.posts()
    assert len(entries) == 4
    # server-side timestamps: how many requests were being served at the same time
    assert _max_in_flight(entries) == in_flight
    if concurrency is None:
        assert max(e["start"] for e in entries) < min(e["end"] for e in entries)


# -- keys, options, fingerprints ---------------------------------------------------------------
def test_api_key_comes_from_the_named_env_var(server, monkeypatch):
    monkeypatch.setenv("EVALSUITE_TEST_KEY", "sekrit-123")
    be = make_backend(server, api_key_env="EVALSUITE_TEST_KEY")
    be.generate([req("hello")])
    assert [e["auth"] for e in server.posts()] == ["Bearer sekrit-123"]
    assert "sekrit" not in json.dumps(be.variant.to_dict())
    monkeypatch.delenv("EVALSUITE_TEST_KEY")
    with pytest.raises(EvalsuiteError, match="EVALSUITE_TEST_KEY"):
        make_backend(server, api_key_env="EVALSUITE_TEST_KEY")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"api_key": "sekrit"}, "api_key_env"),
        ({"retries": 3}, "unknown http option"),
        ({"base_url": "localhost:8000"}, "base_url"),
        ({"concurrency": 0}, "concurrency"),
        ({"extra_body": ["top_k"]}, "extra_body"),
    ],
)
def test_bad_options_fail_helpfully(server, options, message):
    with pytest.raises(EvalsuiteError, match=message):
        make_backend(server, **options)


def test_fingerprint_differs_by_base_url_model_and_served_models(server):
    base = make_backend(server)
    fp = base.fingerprint()
    assert fp == base.fingerprint() == make_backend(server).fingerprint()
    other_host = HTTPBackend(Variant(name="srv", backend="http", model="tiny-chat", options={"base_url": server.base_url.replace("127.0.0.1", "localhost")}))
    assert other_host.fingerprint() != fp
    assert make_backend(server, model="other-model").fingerprint() != fp
    server.models = ["tiny-chat", "tiny-chat-awq"]
    assert base.fingerprint() == fp  # GET /models is asked once per backend
    assert make_backend(server).fingerprint() != fp  # a new backend sees the new list


def test_models_listing_is_cached_and_optional(server):
    be = make_backend(server)
    be.fingerprint()
    be.fingerprint()
    be.generate([req("hello")])
    assert server.models_hits == 1
    assert be.served_models() == [{"id": "tiny-chat", "root": "/models/tiny-chat"}]
    server.serve_models = False
    quiet = make_backend(server)
    assert quiet.served_models() is None
    assert quiet.fingerprint() != be.fingerprint()
    assert quiet.generate([req("hello")])[0].ok


def test_model_defaults_to_the_only_served_model(server):
    be = make_backend(server, model=None)
    [g] = be.generate([req("hello")])
    assert g.ok and server.posts()[0]["body"]["model"] == "tiny-chat"
    server.models = ["a", "b"]
    with pytest.raises(EvalsuiteError, match="lists: a, b"):
        make_backend(server, model=None).fingerprint()


def test_close_is_idempotent_and_the_backend_reopens(server):
    be = make_backend(server)
    be.generate([req("hello")])
    be.close()
    be.close()
    assert be.generate([req("hello")])[0].ok
    be.close()


# -- the completions endpoint ------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_completions_endpoint_sends_the_rendered_prompt(server, stream, tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>\n{% endif %}{{ eos_token }}"
    )
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": {"content": "hello"}}')
    (tmp_path / "chat_template.jinja").write_text(template.read_text())
    be = make_backend(server, stream=stream, endpoint="completions", chat_template=str(tmp_path))
    [g] = be.generate([req("json please")])
    [entry] = server.posts()
    assert entry["path"] == "/v1/completions" and "messages" not in entry["body"]
    assert entry["body"]["prompt"] == "<system>Be brief.\n<user>json please\n<assistant>\nhello"
    assert g.ok and g.text == "Hello there friend"  # the prompt's last line is the eos token "hello"
    assert g.new_tokens == 3 and (g.ttft_s is not None) is stream


def test_completions_plain_prompt_and_fingerprint(server):
    chat = make_backend(server)
    plain = make_backend(server, endpoint="completions", prompt_format="plain")
    [g] = plain.generate([req("hello")])
    assert server.posts()[0]["body"]["prompt"] == "Be brief.\n\nhello"
    assert g.ok and g.text == "Hello there friend"
    assert plain.fingerprint() != chat.fingerprint()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"endpoint": "completions"}, "chat_template"),
        ({"endpoint": "embeddings"}, "unknown endpoint"),
        ({"chat_template": "/x"}, "endpoint: completions"),
        ({"endpoint": "completions", "prompt_format": "fancy"}, "prompt_format"),
        ({"endpoint": "completions", "chat_template": "/nowhere"}, "no chat template"),
    ],
)
def test_completions_options_fail_helpfully(server, options, message):
    with pytest.raises(EvalsuiteError, match=message):
        be = make_backend(server, **options)
        be.renderer


# -- generation settings: mapped, and what the server does with them reported ------------------
def test_greedy_maps_to_temperature_zero_and_top_p_one(server):
    be = make_backend(server)
    r = req("hello", temperature=0.0, top_p=0.5)
    be.generate([r])
    body = server.posts()[0]["body"]
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.0, 1.0, r.sample_seed(), 16)


@pytest.mark.parametrize(
    "prompt, temperature, status, evidence",
    [
        ("hello", 0.0, "verified", "returned the same text"),
        ("seeded", 0.0, "ignored", "returned different texts"),  # a server sampling at temperature 0
        ("hello", 0.8, "verified", "sent twice returned the same text"),
    ],
)
def test_settings_check_probes_greedy_and_seed(server, prompt, temperature, status, evidence, caplog):
    be = make_backend(server, verify_settings=True)
    with caplog.at_level("INFO", logger="evalsuite"):
        gens = be.generate([req(prompt, temperature=temperature), req("json please", temperature=temperature)])
    posts = server.posts()
    assert len(posts) == 3  # one extra request, once per backend
    first, probe = [e["body"] for e in posts if e["body"]["messages"][-1]["content"] == prompt]
    if temperature == 0:
        assert first["seed"] != probe["seed"] and {k: v for k, v in first.items() if k != "seed"} == {k: v for k, v in probe.items() if k != "seed"}
    else:
        assert first == probe
    check = be.settings_check
    assert check["status"] == status and evidence in check["evidence"]
    assert all(g.extra["settings_check"] == check for g in gens)
    if status == "ignored":
        assert "does not honour temperature=0 (greedy)" in caplog.text
    be.generate([req("hello")])
    assert len(server.posts()) == 4  # checked once


def test_a_server_ignoring_max_tokens_is_reported(server):
    [g, ok] = make_backend(server).generate([req("verbose", max_new_tokens=4), req("hello", max_new_tokens=4)])
    assert g.ok and g.new_tokens == 10 and g.extra["settings_ignored"] == ["max_tokens"]
    assert "settings_ignored" not in ok.extra


def test_a_rejected_setting_is_named_and_unsupported_ones_are_marked(server):
    server.reject_fields = {"seed"}
    [g] = make_backend(server).generate([req("hello")])
    assert not g.ok and g.error.startswith("HTTP 422: Unexpected fields in the request: {'seed'}")
    assert "the server rejected seed" in g.error and "`unsupported`" in g.error
    assert g.extra["rejected_settings"] == ["seed"]
    be = make_backend(server, unsupported=["seed"])
    [g] = be.generate([req("hello")])
    assert g.ok and g.extra["settings_not_sent"] == ["seed"] and "seed" not in server.posts()[-1]["body"]
    assert be.fingerprint() != make_backend(server).fingerprint()


def test_refused_stream_options_are_dropped_once(server, caplog):
    server.reject_fields = {"stream_options"}
    be = make_backend(server)
    with caplog.at_level("WARNING", logger="evalsuite"):
        a, b = be.generate([req("hello"), req("json please")])
    assert a.ok and b.ok and a.text == "Hello there friend"
    assert a.extra["stream_options"] == "refused by the server" and a.extra["attempts"] == 1
    assert [("stream_options" in e["body"]) for e in server.posts()].count(False) == 2
    assert caplog.text.count("refused stream_options") == 1


@pytest.mark.parametrize(
    "options, message",
    [
        ({"extra_body": {"temperature": 0.5}}, "may not set"),
        ({"unsupported": ["top_k"]}, "unsupported"),
        ({"retry": {"max_retries": -1}}, "max_retries"),
        ({"retry": {"tries": 2}}, "unknown retry setting"),
    ],
)
def test_setting_options_fail_helpfully(server, options, message):
    with pytest.raises(EvalsuiteError, match=message):
        make_backend(server, **options)


def test_operational_options_leave_the_fingerprint_alone(server):
    fp = make_backend(server).fingerprint()
    assert make_backend(server, timeout_s=9, concurrency=2, retry={"max_retries": 5}, verify_settings=True).fingerprint() == fp
    assert make_backend(server, extra_body={"top_k": 5}).fingerprint() != fp


# -- end to end --------------------------------------------------------------------------------
def test_run_suite_with_an_http_baseline(server, write, tmp_path, monkeypatch, caplog):
    """A run through the backend: per-request errors recorded, never cached, asked again next time;
    the API key reaches the server and nothing else (records, signature, suite copy, cache, log)."""
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.run.store import GenerationCache
    from evalsuite.cases.suite import load_suite

    monkeypatch.setenv("EVALSUITE_E2E_KEY", "sk-e2e-very-secret")
    write(
        "sets/cases.yaml",
        """
        schema_version: 1
        defaults: {scenario: kb_qa, kind: grounded, lang: en}
        documents:
          - {id: d1, text: The VPN session lasts 12 hours.}
        cases:
          - {id: q1, prompt: 'How long does a VPN session last?', context: [d1]}
          - {id: q2, prompt: 'hello', context: [d1]}
          - {id: q3, prompt: 'boom', context: [d1]}
          - {id: q4, prompt: 'whoami', context: [d1]}
          - {id: q5, prompt: 'fail:503:1', context: [d1]}
        """,
    )
    suite_path = write(
        "suite.yaml",
        f"""
        schema_version: 1
        name: http-e2e
        casesets: [sets]
        generation: {{max_new_tokens: 32, batch_size: 2}}
        variants:
          - name: served
            baseline: true
            backend: http
            model: tiny-chat
            options: {{base_url: "{server.base_url}", timeout_s: 5, api_key_env: EVALSUITE_E2E_KEY, retry: {{max_retries: 1, backoff_s: 0.01}}}}
          - name: served-plain
            options: {{base_url: "{server.base_url}", timeout_s: 5, stream: false, api_key_env: EVALSUITE_E2E_KEY, retry: {{max_retries: 1, backoff_s: 0.01}}}}
        """,
    )
    opts = {"progress": False, "score": False, "cache_path": str(tmp_path / "cache.sqlite"), "runs_dir": str(tmp_path / "runs")}
    with caplog.at_level("DEBUG"):
        result = run_suite(load_suite(suite_path), RunOptions(**opts))
    gens = {(g.variant, g.case_id): g for g in result.store.generations()}
    assert len(gens) == 10 and result.generated == 10
    for variant in ("served", "served-plain"):
        assert gens[variant, "q2"].text == "Hello there friend"
        assert gens[variant, "q1"].ok and gens[variant, "q1"].text.startswith("echo:")
        assert gens[variant, "q3"].error == "HTTP 500: injected failure (gave up after 2 attempts: retry.max_retries is 1)"
        assert gens[variant, "q4"].error == "HTTP 401: bad key Bearer [redacted]"
    # q5's first 503 was retried for the first variant; the second variant found it healed
    assert (
        gens["served", "q5"].ok
        and gens["served", "q5"].extra["attempts"] == 2
        and gens["served", "q5"].extra["retries"][0]["after"] == "HTTP 503: scripted 503"
    )
    assert gens["served", "q2"].ttft_s is not None and gens["served-plain", "q2"].ttft_s is None
    assert gens["served", "q1"].fingerprint != gens["served-plain", "q1"].fingerprint
    assert result.variants["served"]["errors"] == 2
    assert all(e["auth"] == "Bearer sk-e2e-very-secret" for e in server.posts())
    stored = "".join(p.read_text() for p in result.run_dir.iterdir() if p.is_file())
    assert "sk-e2e" not in stored and "sk-e2e" not in caplog.text and "EVALSUITE_E2E_KEY" in stored
    cache = GenerationCache(tmp_path / "cache.sqlite")
    assert cache.count() == 6  # the 4 errors are not cached
    assert b"sk-e2e" not in (tmp_path / "cache.sqlite").read_bytes()
    cache.close()
    posts = len(server.posts())

    again = run_suite(load_suite(suite_path), RunOptions(**opts))
    assert again.cached == 6 and again.generated == 4  # the failed cases are asked again, the rest cached
    # per variant: q3 twice (a retry), q4 once, and the settings check's second q3 (twice: it fails too)
    assert len(server.posts()) == posts + 2 * (2 + 1 + 2)


# -- tools passed natively (`tools: native`, issue 43) -------------------------------------------
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("prompt", ["call tools", "call in text"])
def test_native_tools_are_sent_and_the_calls_read_back(server, stream, prompt):
    be = make_backend(server, stream=stream, tools="native")
    assert be.passes_tools()
    r = req(prompt, tools=json.dumps(TOOLS), tool_choice=json.dumps("auto"))
    (g,) = be.generate([r])
    assert g.ok, g.error
    sent = server.posts()[-1]["body"]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto"
    assert [(c.name, c.arguments, c.error) for c in g.tool_calls] == [("get_weather", {"city": "Paris"}, None), ("get_weather", {"city": "Oslo"}, None)]
    if prompt == "call tools" and stream:
        assert g.ttft_s is not None  # the first tool-call fragment is the first token


def test_requests_without_tools_send_none_and_record_no_calls(server):
    be = make_backend(server, tools="native")
    (g,) = be.generate([req("hello")])
    assert "tools" not in server.posts()[-1]["body"] and g.tool_calls is None and g.text == "Hello there friend"


def test_native_tools_need_the_chat_endpoint():
    from evalsuite.backends.base import make_backend as build
    from evalsuite.errors import EvalsuiteError

    v = Variant(name="srv", backend="http", model="m", options={"base_url": "http://127.0.0.1:9/v1", "endpoint": "completions", "prompt_format": "plain", "tools": "native"})
    with pytest.raises(EvalsuiteError, match="cannot pass tools itself"):
        build(v)
    with pytest.raises(EvalsuiteError, match="options.tools must be one of text, native"):
        build(Variant(name="srv", backend="http", model="m", options={"base_url": "http://127.0.0.1:9/v1", "tools": "yes"}))
