"""The served-backend interface: a backend that talks to an OpenAI-compatible server owns its wire.

Load traffic (evalsuite.run.load) and the fault probes (evalsuite.run.fault_probes) ask a served
backend where to send (`endpoint()`), what to send (`request_body()`) and how far the replies have
got (`responses_begun`); they start, stop and restart its server through it, and read its metrics
through it. Starting a server is always an explicit `start()`: reading a property starts nothing.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import httpx

from .base import Backend
from .wire import metrics_url

if TYPE_CHECKING:
    from pathlib import Path

    from .base import Request
    from .http_serve import LocalServer

__all__ = ["ALIVE_TIMEOUT_S", "ServedBackend"]

ALIVE_TIMEOUT_S = 10.0  #: how long a server may take to answer `GET /models` and still count as alive
_METRICS_TIMEOUT_S = 5.0


class ServedBackend(Backend):
    """A backend whose model answers over HTTP, on a server it reaches or starts itself."""

    endpoint_kind: str = "chat"  #: `chat` or `completions`: where requests go and how a reply's text is read

    @abc.abstractmethod
    def start(self) -> str:
        """Start the server (one this backend runs itself) or reach it, and resolve the model name;
        returns the API root (…/v1). Idempotent. Raises EvalsuiteError when it does not come up."""

    def stop(self) -> None:
        """Stop a server this backend started. Default: nothing of its own to stop."""
        return None

    @property
    @abc.abstractmethod
    def base_url(self) -> str:
        """The API root requests go to ("" before `start()` of a server it runs itself)."""

    @abc.abstractmethod
    def endpoint(self) -> str:
        """The URL a generation request is POSTed to (chat or text completions), after `start()`."""

    @abc.abstractmethod
    def request_body(self, req: Request, *, stream: bool | None = None) -> dict:
        """The JSON body sent for `req` (`stream` overrides the variant's choice)."""

    @property
    @abc.abstractmethod
    def responses_begun(self) -> int:
        """Replies whose status line has arrived so far (a stream has begun): what "mid-reply" counts."""

    @property
    def headers(self) -> dict:
        """The request headers (a key among them: never logged or stored). Default: none."""
        return {}

    def runs_server(self) -> bool:
        """Whether the server is one this backend started (what a probe may kill and restart). Default: no."""
        return False

    def kill(self) -> None:
        """Kill the server this backend started, at once (a crash, for the fault probes). Default: refused."""
        raise NotImplementedError(f"backend {self.name!r} runs no server of its own")

    def server_exited(self) -> bool:
        """A server this backend started has exited. Default: False (it runs none)."""
        return False

    def served_weights(self) -> Path | None:
        """The weights a server this backend runs serves. Default None: an external server."""
        return None

    def server_like_its_own(self, weights: Path, timeout_s: float) -> LocalServer:
        """The server this backend runs, on other `weights`, its start-up bounded by `timeout_s` too
        (not started: the load-failure probe's broken copy). Default: refused."""
        raise NotImplementedError(f"backend {self.name!r} runs no server of its own")

    def alive(self) -> bool:
        """The server runs and answers `GET /models` within ALIVE_TIMEOUT_S."""
        if self.server_exited():
            return False
        try:
            return httpx.get(f"{self.base_url}/models", timeout=ALIVE_TIMEOUT_S).status_code == 200
        except httpx.HTTPError:
            return False

    def read_metrics(self) -> str | None:
        """The server's Prometheus page now (read with `evalsuite.backends.wire.prometheus_samples`);
        None when it exposes none or does not answer."""
        try:
            resp = httpx.get(metrics_url(self.base_url), headers=self.headers, timeout=_METRICS_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        return resp.text if resp.status_code == 200 else None
