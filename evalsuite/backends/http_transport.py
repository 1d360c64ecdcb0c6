"""The http backend's transport: one `httpx.AsyncClient` on an event-loop thread, and the retry loop.

A request is tried until it settles: an answer, a timeout, a failure not worth retrying, or a
transient failure past `retry.max_retries` or the request's deadline (waits honour `Retry-After`).
Each request settles on its own into a `Generation`; nothing here fails a batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

import httpx

from ..errors import EvalsuiteError
from .base import Generation, Request
from .http_options import ENDPOINTS, SETTINGS
from .http_retry import parse_retry_after, retryable_status
from .http_stream import Attempt, error_message, names, read_body, read_stream
from .toolcalls import parse_text_calls

if TYPE_CHECKING:
    from .http_options import HTTPOptions

log = logging.getLogger("evalsuite")

MODELS_TIMEOUT_S = 10.0  #: `GET /models` is a fingerprint detail: a dead server must not stall the run for long
T = TypeVar("T")


class _LoopThread:
    """An asyncio loop in a daemon thread: `generate` stays synchronous for the runner while the
    requests of a batch run concurrently on one `httpx.AsyncClient` (its connections kept alive
    from batch to batch)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evalsuite-http", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[object, object, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class Transport:
    """Requests to one server: the client, its event loop, retries, and the key kept out of messages."""

    def __init__(self, options: HTTPOptions) -> None:
        self.options = options
        self.who = options.who
        self.base_url = options.base_url  #: set when a server evalsuite starts answers
        self.headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {options.api_key}"} if options.api_key else {})
        self.stream_options = True  #: dropped once if the server refuses `stream_options`
        self.counts_tokens_by_chunks = False  #: the server sends one stream chunk per token and no usage (llama.cpp)
        self._rng = random.Random()
        self._loop: _LoopThread | None = None
        self._client: httpx.AsyncClient | None = None
        #: replies whose status line arrived (a stream has begun): what waits for "mid-reply" count
        self.responses_begun = 0

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run a coroutine on the transport's loop thread and wait for its result."""
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.run(coro)

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # the caller's semaphore bounds the requests in flight; httpx's pool must not queue them again
            self._client = httpx.AsyncClient(
                headers=self.headers, timeout=httpx.Timeout(self.options.timeout_s), limits=httpx.Limits(max_connections=None, max_keepalive_connections=32)
            )
        return self._client

    def redact(self, text: str) -> str:
        secret = self.options.api_key
        return text.replace(secret, "[redacted]") if secret else text

    async def get_models(self) -> list[dict] | None:
        """What `GET /models` lists (`id`, and `root` when given); None if the server cannot say."""
        try:
            resp = await self.client().get(f"{self.base_url}/models", timeout=min(self.options.timeout_s, MODELS_TIMEOUT_S))
            resp.raise_for_status()
            data = resp.json().get("data") or []
            return sorted(
                ({"id": m.get("id")} | ({"root": m["root"]} if m.get("root") else {}) for m in data if isinstance(m, dict)), key=lambda m: str(m["id"])
            )
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning("variant %s: GET %s/models failed (%s); fingerprint without the served model list", self.who, self.base_url, self.redact(str(exc)))
            return None

    async def send(self, req: Request, batch_size: int, payload: Callable[[Request], dict]) -> Generation:
        """One request, tried until it settles; `payload` builds its body (again for each attempt)."""
        base: dict = {"case_id": req.case_id, "variant": self.who, "sample": req.sample, "batch_size": batch_size}
        t0 = time.perf_counter()
        retry = self.options.retry
        deadline = t0 + retry.deadline_s
        history: list[dict] = []
        attempt = 0
        while True:
            attempt += 1
            limit = min(self.options.timeout_s, deadline - time.perf_counter())
            try:
                body = payload(req)
            except EvalsuiteError as exc:
                return Generation(**base, error=str(exc), finish_reason="error", latency_s=0.0)
            res = await self._attempt(body, limit)
            total = time.perf_counter() - t0
            if self._refused_stream_options(res, body):
                attempt -= 1  # a transport detail, not a generation setting: ask again without it
                continue
            meta: dict = {"attempts": attempt, "total_s": round(total, 4)} | ({"retries": history} if history else {})
            if not self.stream_options and self.options.stream:
                meta["stream_options"] = "refused by the server"
            done = self._settled(base, res, meta, (attempt, limit, total))
            if done is not None:
                if req.tools is not None and done.ok:  # tools sent: the server's parsed calls, else those in its text
                    done = replace(done, tool_calls=res.tool_calls if res.tool_calls is not None else parse_text_calls(done.text))
                return done
            wait = retry.wait(attempt - 1, res.retry_after, self._rng)
            why = self._why_give_up(res, attempt, wait, deadline)
            if why is not None:
                extra = meta | ({"http_status": res.status} if res.status is not None else {})
                return Generation(**base, error=why, finish_reason="error", latency_s=total, extra=extra)
            history.append({"after": res.reason, "wait_s": round(wait, 4)} | ({"retry_after_s": res.retry_after} if res.retry_after is not None else {}))
            log.info("variant %s case %s: %s; retry %d of %d in %.2fs", self.who, req.case_id, res.reason, attempt, retry.max_retries, wait)
            await asyncio.sleep(wait)

    def _refused_stream_options(self, res: Attempt, body: dict) -> bool:
        """The server rejected `stream_options` (older servers do): stop sending it, once, with a warning."""
        if not (res.kind == "fail" and res.status in (400, 422) and "stream_options" in res.reason and "stream_options" in body):
            return False
        if self.stream_options:
            self.stream_options = False
            log.warning("variant %s: the server refused stream_options; token counts come from the final chunk if the server sends them", self.who)
        return True

    def _settled(self, base: dict, res: Attempt, meta: dict, when: tuple[int, float, float]) -> Generation | None:
        """The generation an attempt settles (an answer, a timeout, a failure not worth retrying); None: retry.
        `when`: (attempt number, the attempt's time limit, seconds since the first attempt)."""
        attempt, limit, total = when
        if res.kind == "ok":
            usage = res.usage or {}
            new_tokens = usage.get("completion_tokens")
            source = "server" if res.usage else "missing"
            if new_tokens is None and self.counts_tokens_by_chunks and res.extra.get("content_chunks"):
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
        timeout_s = self.options.timeout_s
        if res.kind == "timeout":
            # the deadline binds when it left this attempt clearly less than timeout_s
            why = (
                f"timed out after {timeout_s:g}s"
                if timeout_s - limit < 0.05
                else f"timed out: the request's deadline of {self.options.retry.deadline_s:g}s passed"
            )
            return Generation(**base, error=_with_history(why, attempt), timeout=True, finish_reason="timeout", latency_s=total, extra=meta)
        if res.kind == "fail":
            extra = meta | ({"http_status": res.status} if res.status is not None else {}) | res.extra
            return Generation(**base, error=_with_history(res.reason, attempt), finish_reason="error", latency_s=total, extra=extra)
        return None

    def _why_give_up(self, res: Attempt, attempt: int, wait: float, deadline: float) -> str | None:
        """Why a transient failure is not retried (the retry count, or the deadline); None: retry."""
        retry = self.options.retry
        if attempt > retry.max_retries:
            return f"{res.reason} (gave up after {attempt} attempts: retry.max_retries is {retry.max_retries})" if attempt > 1 else res.reason
        # an attempt squeezed into the deadline's last moments would only time out
        if time.perf_counter() + wait + min(0.5, 0.1 * self.options.timeout_s) >= deadline:
            hint = f" (Retry-After {res.retry_after:g}s)" if res.retry_after is not None else ""
            plural = "s" if attempt > 1 else ""
            return f"{res.reason} (gave up after {attempt} attempt{plural}: the next retry, in {wait:.2f}s{hint}, would pass the request's deadline of {retry.deadline_s:g}s)"
        return None

    async def _attempt(self, body: dict, limit: float) -> Attempt:
        t0 = time.perf_counter()
        if limit <= 0:
            return Attempt("timeout", latency=0.0)
        try:
            res = await asyncio.wait_for(self._exchange(body, t0, limit), timeout=limit)
        except (asyncio.TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            return Attempt("timeout", latency=time.perf_counter() - t0)
        except httpx.TransportError as exc:  # refused, reset, dropped mid-reply, connect timeout
            return Attempt(
                "retry",
                reason=self.redact(f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__}: connection failed"),
                latency=time.perf_counter() - t0,
            )
        except Exception as exc:  # noqa: BLE001 - a bad reply fails its own request, never the batch
            return Attempt("fail", reason=self.redact(f"{type(exc).__name__}: {exc}"), latency=time.perf_counter() - t0)
        res.latency = time.perf_counter() - t0
        return res

    async def _exchange(self, body: dict, t0: float, limit: float) -> Attempt:
        endpoint = self.options.endpoint
        url = f"{self.base_url}{ENDPOINTS[endpoint]}"
        async with self.client().stream("POST", url, json=body, timeout=httpx.Timeout(limit)) as resp:
            self.responses_begun += 1
            if resp.status_code >= 400:
                raw = (await resp.aread()).decode("utf-8", "replace")
                message = self.redact(f"HTTP {resp.status_code}: {error_message(raw)}")
                if retryable_status(resp.status_code):
                    return Attempt("retry", reason=message, status=resp.status_code, retry_after=parse_retry_after(resp.headers.get("Retry-After")))
                extra: dict = {}
                rejected = [k for k in body if k in SETTINGS and names(raw, k)]
                if resp.status_code in (400, 422) and rejected:
                    extra["rejected_settings"] = rejected
                    message += f" (the server rejected {', '.join(rejected)}: if it does not support {'it' if len(rejected) == 1 else 'them'}, list {'it' if len(rejected) == 1 else 'them'} under the http option `unsupported`; outputs will say so)"
                return Attempt("fail", reason=message, status=resp.status_code, extra=extra)
            # a server may answer a streaming request with one JSON body: read what it sent
            if self.options.stream and "json" not in resp.headers.get("content-type", ""):
                return await read_stream(resp.aiter_lines(), t0, endpoint=endpoint, redact=self.redact)
            return read_body(await resp.aread(), endpoint=endpoint, redact=self.redact)

    def close(self) -> None:
        """Close the connections and the event loop."""
        if self._loop is not None:
            if self._client is not None:
                try:
                    self._loop.run(self._client.aclose())
                except Exception:  # noqa: BLE001 - closing must not fail the run
                    pass
            self._loop.close()
        self._client = None
        self._loop = None


def _with_history(reason: str, attempts: int) -> str:
    return reason if attempts == 1 else f"{reason} (attempt {attempts})"
