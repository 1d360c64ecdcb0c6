"""The http backend's options, validated once into a frozen record (see `evalsuite.backends.http` for each option)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import EvalsuiteError
from .base import check_options
from .http_retry import RetryPolicy

if TYPE_CHECKING:
    from ..cases.suite import Variant

log = logging.getLogger("evalsuite")

OPTIONS = {
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
OPERATIONAL = {"api_key_env", "timeout_s", "retry", "concurrency", "verify_settings"}
#: the generation settings sent with every request
SETTINGS = ("max_tokens", "temperature", "top_p", "seed")
RESERVED = {"model", "messages", "prompt", "stream", *SETTINGS}
ENDPOINTS = {"chat": "/chat/completions", "completions": "/completions"}
DEFAULT_TIMEOUT_S = 300.0
#: the prompt source of `completions` with `serve` and no `chat_template`: the served model's own template
SERVED_MODEL = "(served model)"


@dataclass(frozen=True, kw_only=True)
class HTTPOptions:
    """A variant's http options, checked: where requests go, how they are made, what they carry."""

    who: str  #: the variant's name, for messages
    raw: dict = field(repr=False)  #: the options as the suite wrote them (the fingerprint's part of them)
    timeout_s: float  #: per-attempt limit
    retry: RetryPolicy  #: which failures are retried, how long to wait, when to give up
    base_url: str  #: the API root ("" until a server evalsuite starts answers)
    serve: dict | None  #: the validated `serve` mapping: a server evalsuite starts itself
    model: str | None  #: the served model name (None: asked from the server, or the started server's)
    endpoint: str  #: `chat` or `completions`
    prompt_source: str | None  #: where `completions` prompts are rendered from (None for chat)
    concurrency: int | None  #: requests in flight at once (None: the whole batch)
    stream: bool  #: stream replies (TTFT measured from the first content delta)
    extra_body: dict  #: merged into every request body
    unsupported: tuple[str, ...]  #: settings the server rejects: not sent, outputs say so
    verify: bool  #: check once that the server honours greedy and seeds
    api_key: str | None = field(default=None, repr=False)  #: read from `api_key_env`; never printed

    @classmethod
    def from_variant(cls, variant: Variant) -> HTTPOptions:
        """Validate a variant's options (each error names the variant and the option)."""
        who = variant.name
        if "api_key" in (variant.options or {}):
            raise EvalsuiteError(f"variant {who!r}: do not put an API key in the suite; set `api_key_env` to the name of an environment variable holding it")
        opts = check_options(variant, "http", OPTIONS)
        timeout = opts.get("timeout_s", variant.generation.timeout_s)
        timeout_s = float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S
        if timeout_s <= 0:
            raise EvalsuiteError(f"variant {who!r}: timeout_s must be positive")
        retry = RetryPolicy.from_option(opts.get("retry"), timeout_s, who)
        base_url, serve = _where(opts, who)
        endpoint = opts.get("endpoint", "chat")
        if endpoint not in ENDPOINTS:
            raise EvalsuiteError(f"variant {who!r}: unknown endpoint {endpoint!r}; available: {', '.join(ENDPOINTS)}")
        return cls(
            who=who,
            raw=opts,
            timeout_s=timeout_s,
            retry=retry,
            base_url=base_url,
            serve=serve,
            model=None if serve else (opts.get("model") or variant.model),
            endpoint=endpoint,
            prompt_source=_prompt_source(opts, who, endpoint, serve),
            **_request_options(opts, who),
            verify=bool(opts.get("verify_settings", True)),
            api_key=_api_key(opts, who),
        )

    def fingerprint_options(self) -> dict:
        """The options that can change an output (not timeouts, retries, concurrency or the key's variable)."""
        return {k: v for k, v in self.raw.items() if k not in OPERATIONAL}


def _where(opts: dict, who: str) -> tuple[str, dict | None]:
    """Where requests go: `base_url`, or a server evalsuite starts itself (`serve`)."""
    base_url = opts.get("base_url")
    if opts.get("serve") is not None:
        from .http_serve import check_serve_option

        if base_url is not None or opts.get("model") is not None:
            raise EvalsuiteError(
                f"variant {who!r}: with `serve`, evalsuite starts the server itself: leave out `base_url` and `model` (the variant's `model` names the weights)"
            )
        return "", check_serve_option(opts["serve"], who)
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise EvalsuiteError(f"variant {who!r}: the http backend needs `base_url`, e.g. http://127.0.0.1:8000/v1, or `serve` (got {base_url!r})")
    return base_url.rstrip("/"), None


def _prompt_source(opts: dict, who: str, endpoint: str, serve: dict | None) -> str | None:
    """Where `completions` prompts are rendered from: `plain`, a chat template, or the served model's."""
    template, fmt = opts.get("chat_template"), opts.get("prompt_format")
    if fmt not in (None, "plain", "chat_template"):
        raise EvalsuiteError(f"variant {who!r}: prompt_format must be plain or chat_template (got {fmt!r})")
    if endpoint == "chat":
        if template is not None or fmt is not None:
            raise EvalsuiteError(
                f"variant {who!r}: chat_template and prompt_format apply to `endpoint: completions` only (the chat endpoint renders on the server)"
            )
        return None
    if fmt == "plain":
        return "plain"
    if template is not None:
        return str(template)
    if serve:
        from .serve_launcher import launcher_class

        if launcher_class(serve["launcher"]).serves_model_dir:
            return SERVED_MODEL
    raise EvalsuiteError(
        f"variant {who!r}: the completions endpoint needs the prompt rendered on the client: set `chat_template` (a model directory or .jinja file) or `prompt_format: plain`"
    )


def _request_options(opts: dict, who: str) -> dict:
    """Concurrency, streaming, extra request fields, and the settings the server does not take."""
    concurrency = opts.get("concurrency")
    if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1):
        raise EvalsuiteError(f"variant {who!r}: concurrency must be a positive integer (got {concurrency!r})")
    extra_body = opts.get("extra_body") or {}
    if not isinstance(extra_body, dict):
        raise EvalsuiteError(f"variant {who!r}: extra_body must be a mapping")
    clash = sorted(set(extra_body) & RESERVED)
    if clash:
        raise EvalsuiteError(f"variant {who!r}: extra_body may not set {clash}: the backend sends them from the suite's `generation` settings (set them there)")
    unsupported = opts.get("unsupported") or []
    if not isinstance(unsupported, list) or set(unsupported) - set(SETTINGS):
        raise EvalsuiteError(f"variant {who!r}: `unsupported` lists settings the server rejects, from {', '.join(SETTINGS)} (got {unsupported!r})")
    listed = tuple(s for s in SETTINGS if s in unsupported)
    if listed:
        log.warning("variant %s: not sending %s (listed as unsupported by the server): outputs are marked with it", who, ", ".join(listed))
    return {"concurrency": concurrency, "stream": bool(opts.get("stream", True)), "extra_body": dict(extra_body), "unsupported": listed}


def _api_key(opts: dict, who: str) -> str | None:
    """The API key, read from the environment variable `api_key_env` names (never from the suite)."""
    key_env = opts.get("api_key_env")
    if not key_env:
        return None
    key = os.environ.get(str(key_env))
    if not key:
        raise EvalsuiteError(f"variant {who!r}: environment variable {key_env!r} (api_key_env) is not set")
    return key
