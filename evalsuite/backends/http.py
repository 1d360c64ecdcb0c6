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
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..errors import EvalsuiteError
from .base import Generation, Request
from .http_options import DEFAULT_TIMEOUT_S, ENDPOINTS, SERVED_MODEL, SETTINGS, HTTPOptions
from .http_transport import Transport
from .served import ServedBackend

if TYPE_CHECKING:
    from ..cases.suite import Variant
    from .http_prompt import PromptRenderer
    from .http_serve import LocalServer
    from .serve_launcher import Launcher

__all__ = ["DEFAULT_TIMEOUT_S", "ENDPOINTS", "SETTINGS", "HTTPBackend", "probe_seed"]

log = logging.getLogger("evalsuite")

_PROBE_SEED_OFFSET = 7919  #: the greedy check's second request differs from the first only by this seed shift
_MAX_PROBES = 3
_UNSET = object()


class _ServerDied(EvalsuiteError):
    """The server this backend started has exited."""


def _local_server(spec: dict, weights: Path) -> LocalServer:
    """The local server a served variant's `serve:` block asks for (not started yet)."""
    from .http_serve import LocalServer

    return LocalServer(
        spec["launcher"], weights, continuous_batching=spec["continuous_batching"], args=spec["args"], startup_timeout_s=spec["startup_timeout_s"]
    )


def _identity(be: HTTPBackend) -> dict:
    """What a served variant's outputs depend on beyond its settings: for a server evalsuite starts, what
    it serves (launcher, flags, weight hashes, libraries); else the server's address and listed models."""
    from .. import models

    if be.serve_spec:
        assert be.launcher is not None
        spec = {k: v for k, v in be.serve_spec.items() if k != "startup_timeout_s"}
        path = be.served_weights()
        assert path is not None
        weights = {"gguf_sha256": models.file_sha256(path)} if path.is_file() else models.model_dir_identity(path)
        ident: dict = {"serve": spec, "weights": weights, "libraries": be.launcher.library_identity()}
    else:
        ident = {"http": {"base_url": be.base_url, "model": be.model, "served_models": be.served_models()}}
    ident["endpoint"] = be.opts.endpoint
    if be.renderer is not None:
        ident["prompt"] = be.renderer.identity()
    return ident


def _engine_identity(launcher: type[Launcher] | None) -> dict:
    """The engine column's words for a launcher (None: a server evalsuite did not start)."""
    if launcher is None:
        return {"engine": "http"}
    libs = launcher.library_identity()
    main = next(iter(libs.values()), None) if libs else None
    if isinstance(main, dict):  # vLLM's environment reports {dist, version, device}
        return {"engine": launcher.name, "version": main.get("version"), "device": main.get("device")}
    return {"engine": launcher.name, "version": main}


def _environment(launcher: type[Launcher] | None, base_url: str) -> dict:
    """For a server evalsuite starts, its launcher's environment (`.venv-vllm` for vLLM, evalsuite's own
    for `transformers serve` and llama.cpp), read without starting it. An external server's libraries
    cannot be seen from here: its environment is only its address (no `libraries`), which `evalsuite
    releases` shows as unknown, never as stale or fresh."""
    return launcher.server_environment() if launcher is not None else {"server": base_url}


class HTTPBackend(ServedBackend):
    """OpenAI-compatible chat or text completions over HTTP; a batch's requests go out concurrently.
    It composes the checked options (`HTTPOptions`), the transport (client, retries) and, with
    `serve`, a `LocalServer` run by a registered launcher."""

    name = "http"

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        self.opts = HTTPOptions.from_variant(variant)
        self.options = self.opts.raw
        self.endpoint_kind = self.opts.endpoint
        self.transport = Transport(self.opts)
        self.server: LocalServer | None = None  #: a server evalsuite starts (the `serve` option)
        self.serve_spec = self.opts.serve
        self.launcher: type[Launcher] | None = None
        if self.serve_spec:
            from .serve_launcher import launcher_class

            self.launcher = launcher_class(self.serve_spec["launcher"])
            self.transport.counts_tokens_by_chunks = self.launcher.counts_tokens_by_chunks
        self.settings_check: dict | None = None  #: the verdict of the settings check, once made
        self.load_error: str | None = None  #: why the server evalsuite started did not come up (its log's last lines)
        self.restarts = 0  #: times `restart` started it again
        self._probes = 0
        self._warned_max_tokens = False
        self._model = self.opts.model
        self._renderer: PromptRenderer | None = None
        self._served: object = _UNSET  #: what GET /models answered (None when it did not), once per backend
        self._identity: dict | None = None
        self._metrics_before: dict | None = None  #: the server's counters before the variant's first batch

    @property
    def timeout_s(self) -> float:
        return self.opts.timeout_s

    def deadline_s(self) -> float:
        """One request's own bound: its per-attempt timeout, and its retries' overall deadline."""
        return max(self.opts.timeout_s, self.opts.retry.deadline_s)

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    @property
    def renderer(self) -> PromptRenderer | None:
        """The completions endpoint's prompt renderer (None for chat)."""
        src = self.opts.prompt_source
        if self._renderer is None and src is not None:
            from .http_prompt import PromptRenderer

            if src == SERVED_MODEL:
                src = str(self.served_weights())
            elif src == "embedded":
                from .. import models

                src = str(models.resolve_model_dir("embedded"))
            self._renderer = PromptRenderer(src)
        return self._renderer

    def _ensure_server(self) -> None:
        if not self.serve_spec:
            return
        if self.server is None:
            self.server = _local_server(self.serve_spec, cast(Path, self.served_weights()))
        if self.server.proc is not None and not self.server.running:
            # it died under this backend: no silent restart (that would hide a crash in the
            # middle of a variant); the remaining requests fail fast and a resumed run restarts it
            raise _ServerDied(
                f"the local {self.server.launcher} server exited (status {self.server.proc.returncode}) during the run; resume the run to try again. Its log ends with: {self.server.log_tail(500).strip()[-300:]}"
            )
        if self.load_error is not None:
            raise _ServerDied(self.load_error)  # a server that did not come up is not started again for each batch
        if not self.server.running:
            try:
                self.transport.base_url = self.server.start()
            except EvalsuiteError as exc:
                self.load_error = f"variant {self.variant.name!r}: {exc}"
                raise _ServerDied(self.load_error) from exc
            self._model = self.server.model_name

    def restart(self) -> str:
        """Start the server again through its launcher (on its port when free): after it died, or
        to replace one a fault left wedged. Returns its URL. The runner never calls this: a crash
        in the middle of a run is recorded, and the fault probe (evalsuite.run.faults) restarts."""
        if self.server is None:
            raise EvalsuiteError(f"variant {self.variant.name!r}: no server of its own to restart")
        if self.server.running:
            self.server.stop()
        self.load_error = None
        self.transport.base_url = self.server.start()
        self.restarts += 1
        return self.transport.base_url

    def served_models(self) -> list[dict] | None:
        """The models the server lists (`id`, and `root` when given), asked once; None if it cannot say."""
        if self._served is _UNSET:
            self._served = self.transport.run(self.transport.get_models())
        return self._served  # type: ignore[return-value]

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        if self._model is None:
            if self.serve_spec:  # known once the server is up: starting it is an explicit `start()`
                raise EvalsuiteError(f"variant {self.variant.name!r}: its server is not started yet (call start() first)")
            served = self.served_models() or []
            if len(served) != 1:
                listed = ", ".join(str(m["id"]) for m in served) or "none"
                raise EvalsuiteError(f"variant {self.variant.name!r}: set `model` (the server at {self.base_url} lists: {listed})")
            self._model = str(served[0]["id"])
        return self._model

    def identity(self) -> dict:
        """What the outputs depend on beyond the variant's settings (the server's side)."""
        if self._identity is None:
            self._identity = _identity(self)
        return self._identity

    def engine_identity(self) -> dict:
        """The report's engine column: a started server's launcher and library version, else the address."""
        return _engine_identity(self.launcher)

    def environment(self) -> dict:
        """The server's environment, as far as evalsuite can see it (`_environment`)."""
        return _environment(self.launcher, self.base_url)

    def fingerprint(self) -> str:
        core = replace(self.variant, options=self.opts.fingerprint_options())
        return core.fingerprint(self.identity())

    def _settings(self, req: Request) -> dict:
        """The request's generation settings as the server's body fields (greedy: temperature 0, top_p 1)."""
        return {
            "max_tokens": req.max_new_tokens,
            "temperature": 0.0 if req.greedy else req.temperature,
            "top_p": 1.0 if req.greedy else req.top_p,
            "seed": req.sample_seed(),
        }

    def _payload(self, req: Request) -> dict:
        body: dict[str, object] = {"model": self.model}
        if self.opts.endpoint == "chat":
            body["messages"] = [{"role": role, "content": content} for role, content in req.messages]
        else:
            assert self.renderer is not None
            body["prompt"] = self.renderer.render(req.messages)
        if req.tools is not None:  # `tools: native` (chat endpoint only: passes_tools)
            body.update({"tools": req.tool_list()} | ({"tool_choice": req.tool_choice_value()} if req.tool_choice is not None else {}))
        body.update({k: v for k, v in self._settings(req).items() if k not in self.opts.unsupported})
        body["stream"] = self.opts.stream
        if self.opts.stream and self.transport.stream_options:
            body["stream_options"] = {"include_usage": True}
        body.update(self.opts.extra_body)
        return body

    def passes_tools(self) -> bool:  # the chat endpoint's `tools` (docs/formats.md); not the completions endpoint
        return self.opts.endpoint == "chat"

    def request_body(self, req: Request, *, stream: bool | None = None) -> dict:
        """The JSON body this backend sends for `req` (`stream` overrides the variant's choice)."""
        body = self._payload(req)
        if stream is not None and stream != body["stream"]:
            body["stream"] = stream
            if not stream:
                body.pop("stream_options", None)
            elif self.transport.stream_options:
                body["stream_options"] = {"include_usage": True}
        return body

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        try:
            self._ensure_server()
        except _ServerDied as exc:
            return [
                Generation(case_id=r.case_id, variant=self.variant.name, sample=r.sample, error=str(exc), finish_reason="error", batch_size=len(requests))
                for r in requests
            ]
        _ = self.model  # resolved once, before the requests
        if self.opts.endpoint == "completions":
            _ = self.renderer
        batch = list(requests)
        if self.launcher is not None:  # a server evalsuite started: its launcher may read server-side figures around the batch
            if self._metrics_before is None:
                self._metrics_before = self.launcher.read_metrics(self.base_url)
            return self.launcher.around_batch(self.base_url, lambda: self.transport.run(self._generate(batch)))
        return self.transport.run(self._generate(batch))

    def engine_metrics(self) -> dict | None:
        """The server's own counters for this variant so far (vLLM's: TTFT, queue, prefix cache, preemptions), or None."""
        if self.launcher is None or self.server is None or not self.server.running:
            return None
        return self.launcher.metrics_summary(self._metrics_before, self.launcher.read_metrics(self.base_url))

    async def _generate(self, requests: list[Request]) -> list[Generation]:
        sem = asyncio.Semaphore(min(self.opts.concurrency or len(requests), len(requests)))
        probe = None
        if self.opts.verify and self.settings_check is None and self._probes < _MAX_PROBES:
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

    async def _one(self, req: Request, batch_size: int, sem: asyncio.Semaphore) -> Generation:
        async with sem:
            return await self.transport.send(req, batch_size, self._payload)

    def _judge_settings(self, req: Request, first: Generation, probe: Generation) -> None:
        if not (first.ok and probe.ok):
            return  # unverified for now: the next batch tries again
        same = first.text == probe.text
        self.settings_check = check = settings_check(req, same)
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
        if self.opts.unsupported:
            extra["settings_not_sent"] = list(self.opts.unsupported)
        if g.ok and g.new_tokens is not None and "max_tokens" not in self.opts.unsupported and g.new_tokens > req.max_new_tokens:
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

    # -- the served interface (evalsuite.backends.served: load, fault probes) ------------------------
    def start(self) -> str:
        """Start the server evalsuite runs for this variant (or reach the external one) and resolve
        the model name; the API root requests go to."""
        self._ensure_server()
        _ = self.model
        return self.base_url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def endpoint(self) -> str:
        return f"{self.base_url}{ENDPOINTS[self.opts.endpoint]}"

    @property
    def responses_begun(self) -> int:
        return self.transport.responses_begun

    @property
    def headers(self) -> dict:
        """The request headers (the key among them: never logged or stored)."""
        return dict(self.transport.headers)

    def runs_server(self) -> bool:
        return self.serve_spec is not None

    def server_exited(self) -> bool:
        return self.server is not None and not self.server.running

    def kill(self) -> None:
        if self.server is None:
            raise EvalsuiteError(f"variant {self.variant.name!r}: no server of its own to kill")
        self.server.kill()

    def served_weights(self) -> Path | None:
        """The weights the server evalsuite runs serves (None: an external server)."""
        return self.launcher.weights(self.serve_spec, self.variant) if self.serve_spec and self.launcher else None

    def server_like_its_own(self, weights: Path, timeout_s: float) -> LocalServer:
        """The server this backend runs, on other `weights`, its start-up bounded by `timeout_s` too (not started)."""
        assert self.serve_spec is not None
        spec = dict(self.serve_spec, startup_timeout_s=min(timeout_s, self.serve_spec["startup_timeout_s"]))
        return _local_server(spec, weights)

    def close(self) -> None:
        """Close the connections, the event loop and any server this backend started."""
        self.transport.close()
        self.stop()


def settings_check(req: Request, same: bool) -> dict:
    """The settings check's verdict: a greedy request sent with two seeds, or a sampled one sent twice
    with its seed, answered the same (`same`) or not."""
    answered = "the same text" if same else "different texts"
    if req.greedy:
        evidence = f"case {req.case_id}: the same greedy request with seeds {req.sample_seed()} and {probe_seed(req)} returned {answered}"
        return {"setting": "temperature=0 (greedy)", "status": "verified" if same else "ignored", "evidence": evidence}
    evidence = f"case {req.case_id}: the same sampled request with seed {req.sample_seed()} sent twice returned {answered}"
    return {"setting": "seed", "status": "verified" if same else "ignored", "evidence": evidence}


def probe_seed(req: Request) -> int:
    """The seed of the greedy check's second request."""
    return replace(req, seed=req.seed + _PROBE_SEED_OFFSET).sample_seed()
