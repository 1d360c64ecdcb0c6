"""The http backend: an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, `transformers serve`).

Options (under a variant's `options`):

- `base_url`:    the API root, e.g. http://127.0.0.1:8000/v1 (or `serve`, below)
- `serve`:       a server evalsuite starts itself on loopback for this variant and stops after it
  (`{launcher: transformers, continuous_batching: true}` or `{launcher: llama_cpp}`; see
  `evalsuite.backends.http_serve`); the variant's `model` names the weights
- `model`:       the served model name (default: the variant's `model`; when neither is set and
  the server lists exactly one model, that one)
- `endpoint`:    `chat` (POST /chat/completions, default) or `completions` (POST /completions with
  a prompt rendered on the client: see `chat_template`, `prompt_format`)
- `chat_template`: for `completions`: a model directory, tokenizer_config.json or .jinja file whose
  chat template renders the messages (default with `serve`: the served model's)
- `prompt_format`: `plain` renders the turns' texts joined by blank lines (base models)
- `api_key_env`: name of the environment variable holding the key. The key itself never goes in a
  suite, a fingerprint, a record or a log line; an error body that echoes it is redacted
- `timeout_s`:   per-attempt limit (default: the suite's `timeout_s`, else 300 s); past it the
  request is recorded as a timeout (not retried: it would take as long again)
- `retry`:       `{max_retries: 3, backoff_s: 0.5, backoff_max_s: 30, deadline_s: ...}`: 429, 5xx
  and connection failures are retried with exponential backoff and jitter, honouring
  `Retry-After`, bounded in count and by an overall deadline (default timeout_s x attempts)
- `concurrency`: requests in flight at once (default: the whole batch; the suite's `batch_size`
  is how many requests the runner hands over at a time)
- `stream`:      stream the reply (default true) so time to first token is measured honestly,
  from the first content delta; without streaming TTFT is not known and left empty
- `extra_body`:  a mapping merged into every request body (server-specific knobs such as top_k);
  it may not override a setting the backend maps from the suite's `generation`
- `unsupported`: generation settings this server rejects (e.g. `[seed]`): not sent, and every
  output says so (`extra.settings_not_sent`) rather than silently dropping them
- `verify_settings`: (default true) check once per variant that the server honours the mapping:
  a greedy request is sent again with another seed (greedy must not depend on it) and a sampled
  one again with the same seed (it must reproduce); the verdict is logged and travels with every
  output (`extra.settings_check`). Each output is also checked against `max_tokens`

Generation settings map to the body as `max_tokens`, `temperature` (0 for greedy), `top_p` (1 for
greedy), and `seed` (the request's per-sample seed). A 400/422 that names one of them says so.

The fingerprint holds what changes an output: the endpoint, body settings and, for an external
server, the base URL, the served model name and what `GET /models` lists (vLLM adds each model's
`root` path), so serve each checkpoint under its own name; for a server evalsuite starts, what it
serves (launcher, flags, weight hashes, library versions). Timeouts, retries, concurrency and the
key's variable are not part of it. A variant's `quantization` and `speculative` settings are labels
here (they describe how the server was started) and enter the fingerprint as such.

Each request of a batch succeeds or fails on its own: an HTTP error, a dropped connection or a
timeout becomes that request's `Generation(error=..., timeout=...)` (never cached, so a resumed or
repeated run asks again), never the batch's and never the run's. Latency, TTFT and tokens/s are
those of the attempt that answered; `extra.total_s` adds the failed attempts and waits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from ..errors import EvalsuiteError
from .base import Generation, Request, check_options
from .http_retry import RetryPolicy, parse_retry_after, retryable_status

log = logging.getLogger("evalsuite")

_OPTIONS = {
    "base_url",
    "serve",
    "model",
    "endpoint",
    "chat_template",
    "prompt_format",
    "api_key_env",
    "timeout_s",
    "retry",
    "concurrency",
    "stream",
    "extra_body",
    "unsupported",
    "verify_settings",
}
#: options that change how requests are made, never what is answered: not part of the fingerprint
_OPERATIONAL = {"api_key_env", "timeout_s", "retry", "concurrency", "verify_settings"}
#: the generation settings sent with every request
SETTINGS = ("max_tokens", "temperature", "top_p", "seed")
_RESERVED = {"model", "messages", "prompt", "stream", *SETTINGS}
ENDPOINTS = {"chat": "/chat/completions", "completions": "/completions"}
DEFAULT_TIMEOUT_S = 300.0
_MODELS_TIMEOUT_S = 10.0  #: `GET /models` is a fingerprint detail: a dead server must not stall the run for long
_PROBE_SEED_OFFSET = 7919  #: the greedy check's second request differs from the first only by this seed shift
_MAX_PROBES = 3
_UNSET: Any = object()


@dataclass
class _Attempt:
    """The outcome of one try of one request."""

    kind: str  #: ok, retry (transient: try again), fail (an answer: record it), timeout
    reason: str = ""
    latency: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    text: str = ""
    usage: dict | None = None
    finish: str | None = None
    ttft: float | None = None
    extra: dict = field(default_factory=dict)


class _ServerDied(EvalsuiteError):
    """The server this backend started has exited."""


class _LoopThread:
    """An asyncio loop in a daemon thread: `generate` stays synchronous for the runner while the
    requests of a batch run concurrently on one `httpx.AsyncClient` (its connections kept alive
    from batch to batch)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evalsuite-http", daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class HTTPBackend:
    """OpenAI-compatible chat or text completions over HTTP; a batch's requests go out concurrently."""

    name = "http"

    def __init__(self, variant):
        self.variant = variant
        who = variant.name
        if "api_key" in (variant.options or {}):
            raise EvalsuiteError(f"variant {who!r}: do not put an API key in the suite; set `api_key_env` to the name of an environment variable holding it")
        opts = check_options(variant, "http", _OPTIONS)
        self.options = opts
        timeout = opts.get("timeout_s", variant.generation.timeout_s)
        self.timeout_s = float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S
        if self.timeout_s <= 0:
            raise EvalsuiteError(f"variant {who!r}: timeout_s must be positive")
        self.retry = RetryPolicy.from_option(opts.get("retry"), self.timeout_s, who)
        self._rng = random.Random()
        self._init_endpoint(opts, who)
        self._init_request_options(opts, who)
        self.verify = bool(opts.get("verify_settings", True))
        self.settings_check: dict | None = None  #: the verdict of the settings check, once made
        self._probes = 0
        self._warned_max_tokens = False
        self._init_auth(opts, who)
        self._loop: _LoopThread | None = None
        self._client: httpx.AsyncClient | None = None
        self._served: Any = _UNSET  #: what GET /models answered (None when it did not), once per backend
        self._identity: dict | None = None

    def _init_endpoint(self, opts: dict, who: str) -> None:
        """Where requests go: `base_url`, or a server evalsuite starts itself (`serve`); the endpoint and prompt."""
        self.server: Any = None  #: a LocalServer evalsuite starts (the `serve` option)
        self.serve_spec: dict | None = None
        base_url = opts.get("base_url")
        if opts.get("serve") is not None:
            from .http_serve import check_serve_option

            if base_url is not None or opts.get("model") is not None:
                raise EvalsuiteError(
                    f"variant {who!r}: with `serve`, evalsuite starts the server itself: leave out `base_url` and `model` (the variant's `model` names the weights)"
                )
            self.serve_spec = check_serve_option(opts["serve"], who)
            self.base_url = ""
        else:
            if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
                raise EvalsuiteError(f"variant {who!r}: the http backend needs `base_url`, e.g. http://127.0.0.1:8000/v1, or `serve` (got {base_url!r})")
            self.base_url = base_url.rstrip("/")
        self._model: str | None = None if self.serve_spec else (opts.get("model") or self.variant.model)
        self.endpoint = opts.get("endpoint", "chat")
        if self.endpoint not in ENDPOINTS:
            raise EvalsuiteError(f"variant {who!r}: unknown endpoint {self.endpoint!r}; available: {', '.join(ENDPOINTS)}")
        self._renderer_source = self._prompt_source(opts, who)
        self._renderer = None

    def _init_request_options(self, opts: dict, who: str) -> None:
        """Concurrency, streaming, extra request fields, and the settings the server does not take."""
        concurrency = opts.get("concurrency")
        if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1):
            raise EvalsuiteError(f"variant {who!r}: concurrency must be a positive integer (got {concurrency!r})")
        self.concurrency: int | None = concurrency
        self.stream = bool(opts.get("stream", True))
        self._stream_options = True  #: dropped once if the server refuses `stream_options`
        extra_body = opts.get("extra_body") or {}
        if not isinstance(extra_body, dict):
            raise EvalsuiteError(f"variant {who!r}: extra_body must be a mapping")
        clash = sorted(set(extra_body) & _RESERVED)
        if clash:
            raise EvalsuiteError(
                f"variant {who!r}: extra_body may not set {clash}: the backend sends them from the suite's `generation` settings (set them there)"
            )
        self.extra_body = dict(extra_body)
        unsupported = opts.get("unsupported") or []
        if not isinstance(unsupported, list) or set(unsupported) - set(SETTINGS):
            raise EvalsuiteError(f"variant {who!r}: `unsupported` lists settings the server rejects, from {', '.join(SETTINGS)} (got {unsupported!r})")
        self.unsupported = tuple(s for s in SETTINGS if s in unsupported)
        if self.unsupported:
            log.warning("variant %s: not sending %s (listed as unsupported by the server): outputs are marked with it", who, ", ".join(self.unsupported))

    def _init_auth(self, opts: dict, who: str) -> None:
        """The API key, read from the environment variable `api_key_env` names (never from the suite)."""
        self.headers = {"Accept": "application/json"}
        self._secret: str | None = None
        key_env = opts.get("api_key_env")
        if key_env:
            key = os.environ.get(str(key_env))
            if not key:
                raise EvalsuiteError(f"variant {who!r}: environment variable {key_env!r} (api_key_env) is not set")
            self._secret = key
            self.headers["Authorization"] = f"Bearer {key}"

    # -- options -------------------------------------------------------------------------------
    def _prompt_source(self, opts: dict, who: str) -> str | None:
        template, fmt = opts.get("chat_template"), opts.get("prompt_format")
        if fmt not in (None, "plain", "chat_template"):
            raise EvalsuiteError(f"variant {who!r}: prompt_format must be plain or chat_template (got {fmt!r})")
        if self.endpoint == "chat":
            if template is not None or fmt is not None:
                raise EvalsuiteError(
                    f"variant {who!r}: chat_template and prompt_format apply to `endpoint: completions` only (the chat endpoint renders on the server)"
                )
            return None
        if fmt == "plain":
            return "plain"
        if template is not None:
            return str(template)
        if self.serve_spec and self.serve_spec["launcher"] == "transformers":
            return "(served model)"
        raise EvalsuiteError(
            f"variant {who!r}: the completions endpoint needs the prompt rendered on the client: set `chat_template` (a model directory or .jinja file) or `prompt_format: plain`"
        )

    @property
    def renderer(self):
        """The completions endpoint's prompt renderer (None for chat)."""
        if self._renderer is None and self._renderer_source is not None:
            from .http_prompt import PromptRenderer

            src = self._renderer_source
            if src == "(served model)":
                src = str(self._serve_model_path())
            elif src == "embedded":
                from .. import models

                src = str(models.resolve_model_dir("embedded"))
            self._renderer = PromptRenderer(src)
        return self._renderer

    def _serve_model_path(self) -> Path:
        from .. import models

        assert self.serve_spec is not None
        if self.serve_spec["launcher"] == "llama_cpp":
            gguf = self.serve_spec.get("gguf")
            if gguf:
                p = Path(gguf).expanduser()
                if not p.is_file():
                    raise EvalsuiteError(f"variant {self.variant.name!r}: GGUF file {gguf} not found")
                return p
            if self.variant.model not in (None, "", models.EMBEDDED):
                raise EvalsuiteError(
                    f"variant {self.variant.name!r}: the llama_cpp launcher serves a GGUF file: set serve.gguf (or model: embedded for the shipped Q4_1 GGUF)"
                )
            return models.embedded_gguf_path()
        return models.resolve_model_dir(self.variant.model, revision=getattr(self.variant, "revision", None))

    # -- the event loop and client ---------------------------------------------------------------
    def _run(self, coro):
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.run(coro)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # the semaphore bounds the requests in flight; httpx's pool must not queue them again
            self._client = httpx.AsyncClient(
                headers=self.headers, timeout=httpx.Timeout(self.timeout_s), limits=httpx.Limits(max_connections=None, max_keepalive_connections=32)
            )
        return self._client

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "[redacted]") if self._secret else text

    def _ensure_server(self) -> None:
        if not self.serve_spec:
            return
        if self.server is None:
            from .http_serve import LocalServer

            spec = self.serve_spec
            self.server = LocalServer(
                spec["launcher"],
                self._serve_model_path(),
                continuous_batching=spec["continuous_batching"],
                args=spec["args"],
                startup_timeout_s=spec["startup_timeout_s"],
            )
        if self.server.proc is not None and not self.server.running:
            # it died under this backend: no silent restart (that would hide a crash in the
            # middle of a variant); the remaining requests fail fast and a resumed run restarts it
            raise _ServerDied(
                f"the local {self.server.launcher} server exited (status {self.server.proc.returncode}) during the run; resume the run to try again. Its log ends with: {self.server.log_tail(500).strip()[-300:]}"
            )
        if not self.server.running:
            self.base_url = self.server.start()
            self._model = self.server.model_name

    # -- identity ------------------------------------------------------------------------------
    def served_models(self) -> list[dict] | None:
        """The models the server lists (`id`, and `root` when given), asked once; None if it cannot say."""
        if self._served is _UNSET:
            self._served = self._run(self._get_models())
        return self._served

    async def _get_models(self) -> list[dict] | None:
        try:
            resp = await self._http().get(f"{self.base_url}/models", timeout=min(self.timeout_s, _MODELS_TIMEOUT_S))
            resp.raise_for_status()
            data = resp.json().get("data") or []
            return sorted(
                ({"id": m.get("id")} | ({"root": m["root"]} if m.get("root") else {}) for m in data if isinstance(m, dict)), key=lambda m: str(m["id"])
            )
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning(
                "variant %s: GET %s/models failed (%s); fingerprint without the served model list", self.variant.name, self.base_url, self._redact(str(exc))
            )
            return None

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        if self._model is None:
            if self.serve_spec:
                self._ensure_server()
                assert self._model is not None
                return self._model
            served = self.served_models() or []
            if len(served) != 1:
                listed = ", ".join(str(m["id"]) for m in served) or "none"
                raise EvalsuiteError(f"variant {self.variant.name!r}: set `model` (the server at {self.base_url} lists: {listed})")
            self._model = str(served[0]["id"])
        return self._model

    def identity(self) -> dict:
        """What the outputs depend on beyond the variant's settings (the server's side)."""
        if self._identity is None:
            from .. import models

            if self.serve_spec:
                spec = {k: v for k, v in self.serve_spec.items() if k != "startup_timeout_s"}
                path = self._serve_model_path()
                weights = {"gguf_sha256": models.file_sha256(path)} if path.is_file() else models.model_dir_identity(path)
                libs = ("transformers", "torch") if self.serve_spec["launcher"] == "transformers" else ("llama_cpp_python",)
                ident: dict = {"serve": spec, "weights": weights, "libraries": models.library_identity(*libs)}
                if self.serve_spec["launcher"] == "vllm":
                    from .serve_vllm import identity as vllm_identity

                    ident["libraries"] = {"vllm": vllm_identity()}
            else:
                ident = {"http": {"base_url": self.base_url, "model": self.model, "served_models": self.served_models()}}
            ident["endpoint"] = self.endpoint
            if self.renderer is not None:
                ident["prompt"] = self.renderer.identity()
            self._identity = ident
        return self._identity

    def fingerprint(self) -> str:
        core = replace(self.variant, options={k: v for k, v in self.options.items() if k not in _OPERATIONAL})
        return core.fingerprint(self.identity())

    # -- generation ----------------------------------------------------------------------------
    def _settings(self, req: Request) -> dict:
        """The request's generation settings as the server's body fields (greedy: temperature 0, top_p 1)."""
        return {
            "max_tokens": req.max_new_tokens,
            "temperature": 0.0 if req.greedy else req.temperature,
            "top_p": 1.0 if req.greedy else req.top_p,
            "seed": req.sample_seed(),
        }

    def _payload(self, req: Request) -> dict:
        body: dict[str, Any] = {"model": self.model}
        if self.endpoint == "chat":
            body["messages"] = [{"role": role, "content": content} for role, content in req.messages]
        else:
            body["prompt"] = self.renderer.render(req.messages)
        body.update({k: v for k, v in self._settings(req).items() if k not in self.unsupported})
        body["stream"] = self.stream
        if self.stream and self._stream_options:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return body

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        try:
            self._ensure_server()
        except _ServerDied as exc:
            return [Generation(r.case_id, self.variant.name, r.sample, error=str(exc), finish_reason="error", batch_size=len(requests)) for r in requests]
        _ = self.model  # resolved once, before the requests
        if self.endpoint == "completions":
            _ = self.renderer
        if self.server is not None and self.server.launcher == "vllm":  # vLLM's /metrics around the batch
            from . import serve_vllm

            return serve_vllm.with_metrics(self.base_url, lambda: self._run(self._generate(list(requests))))
        return self._run(self._generate(list(requests)))

    async def _generate(self, requests: list[Request]) -> list[Generation]:
        sem = asyncio.Semaphore(min(self.concurrency or len(requests), len(requests)))
        probe = None
        if self.verify and self.settings_check is None and self._probes < _MAX_PROBES:
            first = requests[0]
            # greedy must not depend on the seed; a sampled request must reproduce under its seed
            probe = replace(first, seed=first.seed + _PROBE_SEED_OFFSET) if first.greedy else first
            self._probes += 1
        jobs = [self._one(r, len(requests), sem) for r in requests]
        if probe is not None:
            jobs.append(self._one(probe, len(requests), sem))
        gens = list(await asyncio.gather(*jobs))
        if probe is not None:
            self._judge_settings(requests[0], gens[0], gens.pop())
        return [self._annotate(g, r) for g, r in zip(gens, requests)]

    def _judge_settings(self, req: Request, first: Generation, probe: Generation) -> None:
        if not (first.ok and probe.ok):
            return  # unverified for now: the next batch tries again
        same = first.text == probe.text
        if req.greedy:
            check = {
                "setting": "temperature=0 (greedy)",
                "status": "verified" if same else "ignored",
                "evidence": f"case {req.case_id}: the same greedy request with seeds {req.sample_seed()} and {probe_seed(req)} returned {'the same text' if same else 'different texts'}",
            }
        else:
            check = {
                "setting": "seed",
                "status": "verified" if same else "ignored",
                "evidence": f"case {req.case_id}: the same sampled request with seed {req.sample_seed()} sent twice returned {'the same text' if same else 'different texts'}",
            }
        self.settings_check = check
        if same:
            log.info("variant %s: %s is honoured (%s)", self.variant.name, check["setting"], check["evidence"])
        else:
            log.warning(
                "variant %s: the server does not honour %s: %s; its outputs are not comparable with the baseline's as %s",
                self.variant.name,
                check["setting"],
                check["evidence"],
                "greedy" if req.greedy else "seeded samples",
            )

    def _annotate(self, g: Generation, req: Request) -> Generation:
        extra = dict(g.extra)
        if self.settings_check is not None:
            extra["settings_check"] = self.settings_check
        if self.unsupported:
            extra["settings_not_sent"] = list(self.unsupported)
        if g.ok and g.new_tokens is not None and "max_tokens" not in self.unsupported and g.new_tokens > req.max_new_tokens:
            extra["settings_ignored"] = ["max_tokens"]
            if not self._warned_max_tokens:
                self._warned_max_tokens = True
                log.warning(
                    "variant %s: the server ignored max_tokens (case %s: %d tokens for a limit of %d)",
                    self.variant.name,
                    req.case_id,
                    g.new_tokens,
                    req.max_new_tokens,
                )
        return replace(g, extra=extra)

    async def _one(self, req: Request, batch_size: int, sem: asyncio.Semaphore) -> Generation:
        async with sem:
            return await self._with_retries(req, batch_size)

    async def _with_retries(self, req: Request, batch_size: int) -> Generation:
        base = {"case_id": req.case_id, "variant": self.variant.name, "sample": req.sample, "batch_size": batch_size}
        t0 = time.perf_counter()
        deadline = t0 + self.retry.deadline_s
        history: list[dict] = []
        attempt = 0
        while True:
            attempt += 1
            limit = min(self.timeout_s, deadline - time.perf_counter())
            try:
                body = self._payload(req)
            except EvalsuiteError as exc:
                return Generation(**base, error=str(exc), finish_reason="error", latency_s=0.0)
            res = await self._attempt(body, limit)
            total = time.perf_counter() - t0
            if self._refused_stream_options(res, body):
                attempt -= 1  # a transport detail, not a generation setting: ask again without it
                continue
            meta: dict[str, Any] = {"attempts": attempt, "total_s": round(total, 4)} | ({"retries": history} if history else {})
            if not self._stream_options and self.stream:
                meta["stream_options"] = "refused by the server"
            done = self._settled(base, res, meta, (attempt, limit, total))
            if done is not None:
                return done
            wait = self.retry.wait(attempt - 1, res.retry_after, self._rng)
            why = self._why_give_up(res, attempt, wait, deadline)
            if why is not None:
                extra = meta | ({"http_status": res.status} if res.status is not None else {})
                return Generation(**base, error=why, finish_reason="error", latency_s=total, extra=extra)
            history.append({"after": res.reason, "wait_s": round(wait, 4)} | ({"retry_after_s": res.retry_after} if res.retry_after is not None else {}))
            log.info("variant %s case %s: %s; retry %d of %d in %.2fs", self.variant.name, req.case_id, res.reason, attempt, self.retry.max_retries, wait)
            await asyncio.sleep(wait)

    def _refused_stream_options(self, res: _Attempt, body: dict) -> bool:
        """The server rejected `stream_options` (older servers do): stop sending it, once, with a warning."""
        if not (res.kind == "fail" and res.status in (400, 422) and "stream_options" in res.reason and "stream_options" in body):
            return False
        if self._stream_options:
            self._stream_options = False
            log.warning("variant %s: the server refused stream_options; token counts come from the final chunk if the server sends them", self.variant.name)
        return True

    def _settled(self, base: dict, res: _Attempt, meta: dict, when: tuple[int, float, float]) -> Generation | None:
        """The generation an attempt settles (an answer, a timeout, a failure not worth retrying); None: retry.
        `when`: (attempt number, the attempt's time limit, seconds since the first attempt)."""
        attempt, limit, total = when
        if res.kind == "ok":
            usage = res.usage or {}
            new_tokens = usage.get("completion_tokens")
            source = "server" if res.usage else "missing"
            if new_tokens is None and self.server is not None and self.server.launcher == "llama_cpp" and res.extra.get("content_chunks"):
                # llama-cpp-python's server sends no usage on a stream, but one chunk per generated token
                new_tokens, source = res.extra["content_chunks"], "stream chunks (llama.cpp sends one per token; no prompt count)"
            return Generation(
                **base,
                text=res.text,
                prompt_tokens=usage.get("prompt_tokens"),
                new_tokens=new_tokens,
                latency_s=res.latency,
                ttft_s=res.ttft,
                tokens_per_s=new_tokens / res.latency if new_tokens is not None and res.latency > 0 else None,
                finish_reason=res.finish,
                extra=res.extra | meta | {"usage": source},
            )
        if res.kind == "timeout":
            # the deadline binds when it left this attempt clearly less than timeout_s
            why = (
                f"timed out after {self.timeout_s:g}s"
                if self.timeout_s - limit < 0.05
                else f"timed out: the request's deadline of {self.retry.deadline_s:g}s passed"
            )
            return Generation(**base, error=self._with_history(why, attempt), timeout=True, finish_reason="timeout", latency_s=total, extra=meta)
        if res.kind == "fail":
            extra = meta | ({"http_status": res.status} if res.status is not None else {}) | res.extra
            return Generation(**base, error=self._with_history(res.reason, attempt), finish_reason="error", latency_s=total, extra=extra)
        return None

    def _why_give_up(self, res: _Attempt, attempt: int, wait: float, deadline: float) -> str | None:
        """Why a transient failure is not retried (the retry count, or the deadline); None: retry."""
        if attempt > self.retry.max_retries:
            return f"{res.reason} (gave up after {attempt} attempts: retry.max_retries is {self.retry.max_retries})" if attempt > 1 else res.reason
        # an attempt squeezed into the deadline's last moments would only time out
        if time.perf_counter() + wait + min(0.5, 0.1 * self.timeout_s) >= deadline:
            hint = f" (Retry-After {res.retry_after:g}s)" if res.retry_after is not None else ""
            plural = "s" if attempt > 1 else ""
            return f"{res.reason} (gave up after {attempt} attempt{plural}: the next retry, in {wait:.2f}s{hint}, would pass the request's deadline of {self.retry.deadline_s:g}s)"
        return None

    @staticmethod
    def _with_history(reason: str, attempts: int) -> str:
        return reason if attempts == 1 else f"{reason} (attempt {attempts})"

    async def _attempt(self, body: dict, limit: float) -> _Attempt:
        t0 = time.perf_counter()
        if limit <= 0:
            return _Attempt("timeout", latency=0.0)
        try:
            res = await asyncio.wait_for(self._exchange(body, t0, limit), timeout=limit)
        except (asyncio.TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            return _Attempt("timeout", latency=time.perf_counter() - t0)
        except httpx.TransportError as exc:  # refused, reset, dropped mid-reply, connect timeout
            return _Attempt(
                "retry",
                reason=self._redact(f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__}: connection failed"),
                latency=time.perf_counter() - t0,
            )
        except Exception as exc:  # noqa: BLE001 - a bad reply fails its own request, never the batch
            return _Attempt("fail", reason=self._redact(f"{type(exc).__name__}: {exc}"), latency=time.perf_counter() - t0)
        res.latency = time.perf_counter() - t0
        return res

    async def _exchange(self, body: dict, t0: float, limit: float) -> _Attempt:
        url = f"{self.base_url}{ENDPOINTS[self.endpoint]}"
        async with self._http().stream("POST", url, json=body, timeout=httpx.Timeout(limit)) as resp:
            if resp.status_code >= 400:
                raw = (await resp.aread()).decode("utf-8", "replace")
                message = self._redact(f"HTTP {resp.status_code}: {_error_message(raw)}")
                if retryable_status(resp.status_code):
                    return _Attempt("retry", reason=message, status=resp.status_code, retry_after=parse_retry_after(resp.headers.get("Retry-After")))
                extra: dict = {}
                rejected = [k for k in body if k in SETTINGS and _names(raw, k)]
                if resp.status_code in (400, 422) and rejected:
                    extra["rejected_settings"] = rejected
                    message += f" (the server rejected {', '.join(rejected)}: if it does not support {'it' if len(rejected) == 1 else 'them'}, list {'it' if len(rejected) == 1 else 'them'} under the http option `unsupported`; outputs will say so)"
                return _Attempt("fail", reason=message, status=resp.status_code, extra=extra)
            # a server may answer a streaming request with one JSON body: read what it sent
            if self.stream and "json" not in resp.headers.get("content-type", ""):
                return await self._read_stream(resp, t0)
            return await self._read_body(resp)

    def _choice_text(self, choice: dict, delta: bool) -> str:
        if self.endpoint == "completions":
            return choice.get("text") or ""
        return (choice.get("delta" if delta else "message") or {}).get("content") or ""

    async def _read_body(self, resp: httpx.Response) -> _Attempt:
        data = json.loads(await resp.aread())
        if data.get("error"):
            return _Attempt("fail", reason=self._redact(f"server error: {_error_message(data)}"))
        choice = data["choices"][0]
        return _Attempt(
            "ok",
            text=self._choice_text(choice, delta=False),
            usage=data.get("usage"),
            finish=choice.get("finish_reason"),
            extra={"served_model": data.get("model"), "system_fingerprint": data.get("system_fingerprint"), "ttft_source": None},
        )

    async def _read_stream(self, resp: httpx.Response, t0: float) -> _Attempt:
        """Read SSE `data:` events; TTFT is the arrival of the first non-empty content delta."""
        parts: list[str] = []
        usage = finish = ttft = served = fingerprint = None
        content_chunks = events = 0
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue  # blank separators, comments, `event:` lines
            events += 1
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if event.get("error"):
                return _Attempt("fail", reason=self._redact(f"server error: {_error_message(event)}"))
            served = event.get("model", served)
            fingerprint = event.get("system_fingerprint") or fingerprint
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                content = self._choice_text(choice, delta=True)
                if content:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    parts.append(content)
                    content_chunks += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not events:
            return _Attempt("fail", reason="the server's reply had no `data:` events (not a server-sent event stream)")
        extra = {
            "served_model": served,
            "system_fingerprint": fingerprint,
            "ttft_source": "stream" if ttft is not None else None,
            "content_chunks": content_chunks,
        }
        return _Attempt("ok", text="".join(parts), usage=usage, finish=finish, ttft=ttft, extra=extra)

    def close(self) -> None:
        """Close the connections, the event loop and any server this backend started."""
        if self._loop is not None:
            if self._client is not None:
                try:
                    self._loop.run(self._client.aclose())
                except Exception:  # noqa: BLE001 - closing must not fail the run
                    pass
            self._loop.close()
        self._client = None
        self._loop = None
        if self.server is not None:
            self.server.stop()


def probe_seed(req: Request) -> int:
    """The seed of the greedy check's second request."""
    return replace(req, seed=req.seed + _PROBE_SEED_OFFSET).sample_seed()


def _names(text: str, key: str) -> bool:
    """Whether an error body names a body field (quoted, or as a word)."""
    import re

    return re.search(rf"(?<![A-Za-z_]){re.escape(key)}(?![A-Za-z_])", text) is not None


def _error_message(body: str | dict) -> str:
    """The `error.message` (or FastAPI's `detail`) of an error body, else the body itself (shortened)."""
    data: Any = body
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data))
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
        if isinstance(err, list):  # FastAPI validation errors
            return json.dumps(err)[:500]
    return json.dumps(data)[:500]
