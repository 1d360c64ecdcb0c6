"""Servers evalsuite starts itself (`serve`): settings, lifecycle, identity, and the demo's skip reasons.

The lifecycle tests swap the launcher's command for a tiny stdlib server, so they run in a second;
the real `transformers serve` is exercised in test_serve_transformers.py.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from evalsuite.backends.base import GenerationSettings, Request
from evalsuite.backends.http import HTTPBackend
from evalsuite.backends.http_serve import LocalServer, check_serve_option, missing_requirement
from evalsuite.errors import EvalsuiteError
from evalsuite.cases.suite import Variant

REPO = Path(__file__).resolve().parents[2]

TINY_SERVER = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send({"data": [{"id": "tiny"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = "served: " + req["messages"][-1]["content"]
            self._send({"model": req["model"], "choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    print("tiny server up", flush=True)
    HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    """
)


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """LocalServer runs the tiny stdlib server instead of a real launcher."""
    monkeypatch.setenv("EVALSUITE_CACHE_DIR", str(tmp_path / "cache"))  # file hashes of the test's model
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    monkeypatch.setattr(LocalServer, "command", lambda self, port: [sys.executable, str(script), str(port)])
    return script


# -- settings ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, expected",
    [
        ({}, {"launcher": "transformers", "continuous_batching": False, "gguf": None, "args": [], "startup_timeout_s": 300.0}),
        (
            {"launcher": "transformers", "continuous_batching": True, "args": ["--dtype", "bfloat16"]},
            {"launcher": "transformers", "continuous_batching": True, "gguf": None, "args": ["--dtype", "bfloat16"], "startup_timeout_s": 300.0},
        ),
        (
            {"launcher": "llama_cpp", "gguf": "/m.gguf", "args": ["--n_ctx", 4096]},
            {"launcher": "llama_cpp", "continuous_batching": False, "gguf": "/m.gguf", "args": ["--n_ctx", "4096"], "startup_timeout_s": 300.0},
        ),
    ],
)
def test_serve_option(raw, expected):
    assert check_serve_option(raw, "v") == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ("transformers", "must be a mapping"),
        ({"launcher": "sglang"}, "unknown serve launcher"),
        ({"port": 8000}, "unknown serve setting"),
        ({"launcher": "llama_cpp", "continuous_batching": True}, "transformers serve"),
        ({"gguf": "/m.gguf"}, "llama_cpp setting"),
        ({"args": "--dtype bf16"}, "list of command-line arguments"),
        ({"startup_timeout_s": "soon"}, "startup_timeout_s"),
    ],
)
def test_bad_serve_option_fails_helpfully(raw, message):
    with pytest.raises(EvalsuiteError, match=message):
        check_serve_option(raw, "v")


@pytest.mark.parametrize(
    "launcher, continuous, expected",
    [
        ("transformers", False, ["serve", "/m", "--host", "127.0.0.1", "--port", "8123", "--log-level", "warning", "--extra"]),
        (
            "transformers",
            True,
            [
                "serve",
                "/m",
                "--host",
                "127.0.0.1",
                "--port",
                "8123",
                "--log-level",
                "warning",
                "--continuous-batching",
                "--cb-block-size",
                "32",
                "--cb-num-blocks",
                "256",
                "--extra",
            ],
        ),
    ],
)
def test_transformers_command_line(launcher, continuous, expected):
    cmd = LocalServer(launcher, "/m", continuous_batching=continuous, args=["--extra"]).command(8123)
    assert cmd[0] == sys.executable and cmd[3:] == expected


def test_a_continuous_batching_cache_size_in_args_replaces_the_default():
    cmd = LocalServer("transformers", "/m", continuous_batching=True, args=["--cb-num-blocks", "4096"]).command(1)
    assert "--cb-block-size" not in cmd and cmd[-2:] == ["--cb-num-blocks", "4096"]


def test_llama_cpp_command_line_serves_the_gguf_under_an_alias():
    server = LocalServer("llama_cpp", "/w/SmolLM2.Q4_1.gguf")
    assert server.model_name == "SmolLM2.Q4_1"
    assert server.command(9000)[1:] == [
        "-m",
        "llama_cpp.server",
        "--model",
        "/w/SmolLM2.Q4_1.gguf",
        "--model_alias",
        "SmolLM2.Q4_1",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "--interrupt_requests",
        "False",
    ]
    # a new request must not interrupt the one being streamed, unless the suite says otherwise
    own = LocalServer("llama_cpp", "/w/SmolLM2.Q4_1.gguf", args=["--interrupt_requests", "True"]).command(9000)
    assert own.count("--interrupt_requests") == 1 and own[-1] == "True"


def test_missing_packages_name_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("fastapi", "llama_cpp") else real(name, *a))
    assert missing_requirement({"serve": {"launcher": "transformers"}}) == "needs fastapi to start the server: pip install 'evalsuite[serving]'"
    assert missing_requirement({"serve": {"launcher": "llama_cpp"}}) == "needs llama_cpp to start the server: pip install 'evalsuite[llamacpp]'"
    assert missing_requirement({"base_url": "http://x/v1"}) is None


def test_the_demo_skips_served_variants_it_cannot_start(monkeypatch):
    """The demo's served variants start when their packages are here, else skip with the extra to install."""
    from evalsuite.demo import missing_requirement as demo_missing
    from evalsuite.cases.suite import load_suite

    suite = load_suite(REPO / "suites" / "demo.yaml")
    served = {v.name: v for v in suite.variants if v.backend == "http"}
    assert set(served) == {"served-continuous-batching", "gguf-q4_1-llamacpp"}
    assert served["served-continuous-batching"].options["serve"] == {"launcher": "transformers", "continuous_batching": True}
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("uvicorn", "llama_cpp") else real(name, *a))
    assert "pip install 'evalsuite[serving]'" in demo_missing(served["served-continuous-batching"])
    assert "pip install 'evalsuite[llamacpp]'" in demo_missing(served["gguf-q4_1-llamacpp"])


# -- lifecycle ---------------------------------------------------------------------------------
def test_start_waits_for_an_answer_and_stop_ends_the_process(tiny):
    server = LocalServer("transformers", "/m", startup_timeout_s=30)
    url = server.start()
    assert url == f"http://127.0.0.1:{server.port}/v1" and server.running
    assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "tiny"
    assert server.start() == url  # already up: the same server
    proc = server.proc
    server.stop()
    assert proc.poll() is not None and not server.running and server.proc is None
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/models", timeout=1)
    server.stop()  # idempotent


def test_a_server_that_exits_at_start_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(LocalServer, "command", lambda self, port: [sys.executable, "-c", "import sys; print('no such model'); sys.exit(3)"])
    with pytest.raises(EvalsuiteError, match=r"(?s)did not come up.*exited with status 3.*no such model"):
        LocalServer("transformers", "/m", startup_timeout_s=30).start()


def test_a_server_that_never_answers_times_out(monkeypatch):
    monkeypatch.setattr(LocalServer, "command", lambda self, port: [sys.executable, "-c", "import time; time.sleep(60)"])
    server = LocalServer("transformers", "/m", startup_timeout_s=1)
    with pytest.raises(EvalsuiteError, match="within 1s"):
        server.start()
    assert server.proc is None  # the silent process was stopped


def _served_backend(tmp_path, **serve) -> HTTPBackend:
    model = tmp_path / "model"
    if not model.is_dir():
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "llama"}')
    opts = {"serve": {"launcher": "transformers", "startup_timeout_s": 30} | serve, "retry": {"max_retries": 1, "backoff_s": 0.01}, "verify_settings": False}
    return HTTPBackend(Variant(name="served", backend="http", model=str(model), options=opts, generation=GenerationSettings(max_new_tokens=8)))


@pytest.fixture
def backends():
    """Backends made by a test, closed (their servers stopped) whatever the test's outcome."""
    made: list[HTTPBackend] = []
    yield made
    for be in made:
        be.close()


def test_a_served_variant_starts_its_server_on_demand_and_stops_it_on_close(tiny, tmp_path, backends):
    be = _served_backend(tmp_path)
    backends.append(be)
    fp = be.fingerprint()
    assert be.server is None  # the fingerprint does not need the server
    [g] = be.generate([Request("c1", (("user", "hi"),), max_new_tokens=8)])
    assert g.ok and g.text == "served: hi" and g.new_tokens == 2
    assert be.model == str(tmp_path / "model")  # transformers serve names a model by the path it serves
    be.close()
    assert not be.server.running
    # another run gets another port, and the same fingerprint: cache and resume carry over
    again = _served_backend(tmp_path)
    backends.append(again)
    again.generate([Request("c1", (("user", "hi"),), max_new_tokens=8)])
    assert again.fingerprint() == fp
    again.close()
    assert _served_backend(tmp_path, continuous_batching=True).fingerprint() != fp
    (tmp_path / "model" / "config.json").write_text('{"model_type": "llama", "changed": 1}')
    assert _served_backend(tmp_path).fingerprint() != fp  # the weights' identity, not a URL


def test_a_server_that_dies_mid_variant_fails_the_rest_fast(tiny, tmp_path, backends):
    be = _served_backend(tmp_path)
    backends.append(be)
    assert be.generate([Request("c1", (("user", "hi"),))])[0].ok
    be.server.kill()
    a, b = be.generate([Request("c2", (("user", "x"),)), Request("c3", (("user", "y"),))])
    assert not a.ok and not b.ok and "server exited (status -9)" in a.error and "resume the run" in a.error
    be.close()
    # closing and generating again is a new lifecycle: the server starts anew
    assert be.generate([Request("c4", (("user", "z"),))])[0].ok
    be.close()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"serve": {"launcher": "transformers"}, "base_url": "http://127.0.0.1:1/v1"}, "leave out `base_url`"),
        ({"serve": {"launcher": "transformers"}, "model": "x"}, "leave out `base_url` and `model`"),
        ({}, "needs `base_url`"),
    ],
)
def test_serve_and_base_url_exclude_each_other(options, message):
    with pytest.raises(EvalsuiteError, match=message):
        HTTPBackend(Variant(name="v", backend="http", model="embedded", options=options))


def test_the_llama_cpp_launcher_needs_a_gguf(tmp_path):
    be = HTTPBackend(Variant(name="v", backend="http", model=str(tmp_path), options={"serve": {"launcher": "llama_cpp"}}))
    with pytest.raises(EvalsuiteError, match="serves a GGUF file"):
        be.fingerprint()
    be = HTTPBackend(Variant(name="v", backend="http", model="embedded", options={"serve": {"launcher": "llama_cpp", "gguf": str(tmp_path / "missing.gguf")}}))
    with pytest.raises(EvalsuiteError, match="not found"):
        be.fingerprint()


def test_a_killed_server_restarts_on_its_port(tiny):
    server = LocalServer("transformers", "/m", startup_timeout_s=30)
    try:
        url = server.start()
        first_log = server.log_path
        server.kill()
        assert not server.running and server.proc is not None  # killed, not stopped: the exit status stays readable
        assert server.start() == url and server.running  # the same URL again
        assert first_log is not None and not first_log.exists() and server.log_path != first_log
    finally:
        server.stop()
