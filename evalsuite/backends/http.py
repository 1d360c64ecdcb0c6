"""The http backend: an OpenAI-compatible chat-completions server (vLLM, `transformers serve`, llama.cpp).

Options (under a variant's `options`):

- `base_url`:    the API root, e.g. http://127.0.0.1:8000/v1 (required)
- `model`:       the served model name (default: the variant's `model`; when neither is set and
  the server lists exactly one model, that one)
- `api_key_env`: name of the environment variable holding the key (the key never goes in a suite)
- `timeout_s`:   per-request limit (default: the suite's `timeout_s`, else 300 s); past it the
  request is recorded as a timeout. It bounds each wait for the server (connect, each read) and
  is checked again as each chunk of the reply arrives, so a reply trickling in past it stops too
- `concurrency`: requests of a batch in flight at once (default: the whole batch)
- `stream`:      stream the reply (default true) so time to first token is measured honestly,
  from the first content delta; without streaming TTFT is not known and left empty
- `extra_body`:  a mapping merged into every request body (server-specific knobs such as top_k)

The server's weights are opaque to the client: the fingerprint holds the base URL, the served
model name and what `GET /models` lists (vLLM adds each model's `root` path), so serve each
checkpoint under its own name. A variant's `quantization` and `speculative` settings are labels
here (they describe how the server was started) and enter the fingerprint as such.

Each request of a batch succeeds or fails on its own: an HTTP error or a timeout becomes that
request's `Generation(error=..., timeout=...)`, never the batch's.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from ..errors import EvalsuiteError
from .base import Generation, Request, check_options

log = logging.getLogger("evalsuite")

_OPTIONS = {"base_url", "model", "api_key_env", "timeout_s", "concurrency", "stream", "extra_body"}
DEFAULT_TIMEOUT_S = 300.0
_MODELS_TIMEOUT_S = 10.0  #: `GET /models` is a fingerprint detail: a dead server must not stall the run for long
_UNSET: Any = object()


class _Timeout(Exception):
    """The request's deadline passed while its reply was still arriving."""


class HTTPBackend:
    """Chat completions over HTTP; a batch's requests go out concurrently, each judged on its own."""

    name = "http"

    def __init__(self, variant):
        self.variant = variant
        if "api_key" in (variant.options or {}):
            raise EvalsuiteError(f"variant {variant.name!r}: do not put an API key in the suite; set `api_key_env` to the name of an environment variable holding it")
        opts = check_options(variant, "http", _OPTIONS)
        base_url = opts.get("base_url")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise EvalsuiteError(f"variant {variant.name!r}: the http backend needs `base_url`, e.g. http://127.0.0.1:8000/v1 (got {base_url!r})")
        self.base_url = base_url.rstrip("/")
        self._model: str | None = opts.get("model") or variant.model
        timeout = opts.get("timeout_s", variant.generation.timeout_s)
        self.timeout_s = float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S
        if self.timeout_s <= 0:
            raise EvalsuiteError(f"variant {variant.name!r}: timeout_s must be positive")
        concurrency = opts.get("concurrency")
        if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1):
            raise EvalsuiteError(f"variant {variant.name!r}: concurrency must be a positive integer (got {concurrency!r})")
        self.concurrency: int | None = concurrency
        self.stream = bool(opts.get("stream", True))
        extra_body = opts.get("extra_body") or {}
        if not isinstance(extra_body, dict):
            raise EvalsuiteError(f"variant {variant.name!r}: extra_body must be a mapping")
        self.extra_body = dict(extra_body)
        self.headers = {"Accept": "application/json"}
        key_env = opts.get("api_key_env")
        if key_env:
            key = os.environ.get(str(key_env))
            if not key:
                raise EvalsuiteError(f"variant {variant.name!r}: environment variable {key_env!r} (api_key_env) is not set")
            self.headers["Authorization"] = f"Bearer {key}"
        self._client: httpx.Client | None = None
        self._served: Any = _UNSET  #: what GET /models answered (None when it did not), once per backend

    # -- identity ------------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        if self._client is None:
            # the thread pool bounds the connections; httpx's pool must not queue them again
            self._client = httpx.Client(headers=self.headers, timeout=httpx.Timeout(self.timeout_s), limits=httpx.Limits(max_connections=None, max_keepalive_connections=32))
        return self._client

    def served_models(self) -> list[dict] | None:
        """The models the server lists (`id`, and `root` when given), asked once; None if it cannot say."""
        if self._served is _UNSET:
            try:
                resp = self._http().get(f"{self.base_url}/models", timeout=min(self.timeout_s, _MODELS_TIMEOUT_S))
                resp.raise_for_status()
                data = resp.json().get("data") or []
                self._served = sorted(({"id": m.get("id")} | ({"root": m["root"]} if m.get("root") else {}) for m in data if isinstance(m, dict)), key=lambda m: str(m["id"]))
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                log.warning("variant %s: GET %s/models failed (%s); fingerprint without the served model list", self.variant.name, self.base_url, exc)
                self._served = None
        return self._served

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        if self._model is None:
            served = self.served_models() or []
            if len(served) != 1:
                listed = ", ".join(str(m["id"]) for m in served) or "none"
                raise EvalsuiteError(f"variant {self.variant.name!r}: set `model` (the server at {self.base_url} lists: {listed})")
            self._model = str(served[0]["id"])
        return self._model

    def fingerprint(self) -> str:
        return self.variant.fingerprint({"http": {"base_url": self.base_url, "model": self.model, "served_models": self.served_models()}})

    # -- generation ----------------------------------------------------------------------------
    def _payload(self, req: Request) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in req.messages],
            "max_tokens": req.max_new_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "seed": req.sample_seed(),
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return body

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        workers = min(self.concurrency or len(requests), len(requests))
        _ = self.model  # resolved once, before the threads
        if workers == 1:
            return [self._one(r, len(requests)) for r in requests]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evalsuite-http") as pool:
            return list(pool.map(lambda r: self._one(r, len(requests)), requests))

    def _one(self, req: Request, batch_size: int) -> Generation:
        t0 = time.perf_counter()
        deadline = t0 + self.timeout_s
        base = {"case_id": req.case_id, "variant": self.variant.name, "sample": req.sample, "batch_size": batch_size}
        try:
            with self._http().stream("POST", f"{self.base_url}/chat/completions", json=self._payload(req)) as resp:
                if resp.status_code >= 400:
                    body = resp.read().decode("utf-8", "replace")
                    return Generation(**base, error=f"HTTP {resp.status_code}: {_error_message(body)}", finish_reason="error", latency_s=time.perf_counter() - t0, extra={"http_status": resp.status_code})
                parsed = self._read_stream(resp, t0, deadline) if self.stream else self._read_body(resp, deadline)
        except (httpx.TimeoutException, _Timeout):
            return Generation(**base, error=f"timed out after {self.timeout_s:g}s", timeout=True, finish_reason="timeout", latency_s=time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a bad reply fails its own request, never the batch
            return Generation(**base, error=f"{type(exc).__name__}: {exc}", finish_reason="error", latency_s=time.perf_counter() - t0)
        latency = time.perf_counter() - t0
        text, usage, finish, ttft, extra = parsed
        if isinstance(extra.get("error"), str):
            return Generation(**base, error=extra.pop("error"), finish_reason="error", latency_s=latency, extra=extra)
        usage = usage or {}
        new_tokens = usage.get("completion_tokens")
        return Generation(
            **base,
            text=text,
            prompt_tokens=usage.get("prompt_tokens"),
            new_tokens=new_tokens,
            latency_s=latency,
            ttft_s=ttft,
            tokens_per_s=new_tokens / latency if new_tokens is not None and latency > 0 else None,
            finish_reason=finish,
            extra=extra,
        )

    def _read_body(self, resp: httpx.Response, deadline: float) -> tuple:
        chunks = []
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            if time.perf_counter() > deadline:
                raise _Timeout()
        data = json.loads(b"".join(chunks))
        if data.get("error"):
            return "", None, "error", None, {"error": f"server error: {_error_message(data)}"}
        choice = data["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        return text, data.get("usage"), choice.get("finish_reason"), None, {"served_model": data.get("model"), "ttft_source": None}

    def _read_stream(self, resp: httpx.Response, t0: float, deadline: float) -> tuple:
        """Read SSE `data:` events; TTFT is the arrival of the first non-empty content delta."""
        parts: list[str] = []
        usage = None
        finish = None
        ttft = None
        served = None
        content_chunks = 0
        for line in resp.iter_lines():
            now = time.perf_counter()
            if now > deadline:
                raise _Timeout()
            if not line.startswith("data:"):
                continue  # blank separators, comments, `event:` lines
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if event.get("error"):
                return "", None, "error", None, {"error": f"server error: {_error_message(event)}"}
            served = event.get("model", served)
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    if ttft is None:
                        ttft = now - t0
                    parts.append(content)
                    content_chunks += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        extra = {"served_model": served, "ttft_source": "stream" if ttft is not None else None, "content_chunks": content_chunks}
        return "".join(parts), usage, finish, ttft, extra

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _error_message(body: str | dict) -> str:
    """The `error.message` of an OpenAI-style error body, else the body itself (shortened)."""
    data: Any = body
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return json.dumps(data)[:500]
