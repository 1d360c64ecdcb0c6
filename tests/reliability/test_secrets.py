"""Secrets: an http variant's API key (from the environment variable its suite names) is sent to
the server, and appears nowhere else: not in the run directory, the generation cache, the logs
(at debug level), the printed verdict, or the markdown/HTML report, even when the server echoes
it back in an error."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from .helpers import cli, cli_env, write_suite

KEY_ENV = "EVALSUITE_RELIABILITY_TEST_KEY"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, key: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.key = key
        self.auth_seen: list[str | None] = []


class _Handler(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server: /models and non-streamed /chat/completions."""

    server: _Server

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        auth = self.headers.get("Authorization")
        self.server.auth_seen.append(auth)
        if auth != f"Bearer {self.server.key}":
            self._send(401, {"error": {"message": "missing or wrong API key"}})
            return
        prompt = " ".join(m.get("content", "") for m in body.get("messages", []))
        if "(1)" in prompt:  # a careless proxy that echoes the request's headers in its error body
            self._send(500, {"error": {"message": f"upstream failed for request with Authorization: {auth}"}})
            return
        text = "It lasts 12 hours [d1]."
        self._send(200, {"id": "x", "object": "chat.completion", "model": "m",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16}})


@pytest.fixture
def server():
    srv = _Server("sk-evalsuite-" + secrets.token_hex(16))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_api_key_is_used_but_never_stored_logged_or_reported(tmp_path, server):
    key = server.key
    options = {"base_url": f"http://127.0.0.1:{server.server_port}/v1", "model": "m", "api_key_env": KEY_ENV,
               "stream": False, "verify_settings": False, "retry": {"max_retries": 0}}
    variants = [{"name": "int8", "quantization": {"method": "bnb", "bits": 8}}]
    suite = write_suite(tmp_path, n_cases=4, batch_size=2, variants=variants, generation={"timeout_s": 20})
    doc = yaml.safe_load(suite.read_text("utf-8"))
    doc["variants"][0].update(backend="http", options=options)
    suite.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    assert key not in suite.read_text("utf-8")

    env = dict(cli_env(), **{KEY_ENV: key, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    outputs = []

    def run(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(cli(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        outputs.append(proc.stdout + proc.stderr)
        return proc

    res = run("run", str(suite), "-q", "-v")  # debug logging: httpx and evalsuite log all they log
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = next(p for p in (tmp_path / "out" / "runs").iterdir() if (p / "signature.json").is_file())
    # the key really went to the server on every request, so the checks below are not vacuous
    assert server.auth_seen and set(server.auth_seen) == {f"Bearer {key}"}
    gens = [json.loads(line) for line in (run_dir / "generations.jsonl").read_text("utf-8").splitlines()]
    echoed = [g for g in gens if g["case_id"] == "q001"]
    assert echoed and all(g["error"] and "[redacted]" in g["error"] for g in echoed), echoed
    assert sum(1 for g in gens if g["error"] is None) == 6

    # the report holds the comparison and the gate's verdict (printed too): every later stage reads
    # only the run's files, so one command covers them
    report = run("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode in (0, 1, 2, 3), report.stdout + report.stderr
    assert (tmp_path / "report" / "report.html").is_file() and (tmp_path / "report" / "report.md").is_file()

    assert (tmp_path / "out" / "cache.sqlite").is_file()
    assert _files_holding(tmp_path, key.encode()) == [], "the API key was written to disk"
    assert [i for i, out in enumerate(outputs) if key in out] == [], "the API key was printed or logged"
    assert KEY_ENV in (run_dir / "suite.yaml").read_text("utf-8")  # the variable's name is kept, its value is not
