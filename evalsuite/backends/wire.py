"""The OpenAI-compatible server's wire, read in one place: its root URL, and its Prometheus page.

(Its replies, a server-sent event stream or one JSON body, are read by `evalsuite.backends.http_stream`.)
Generation, load, the fault probes and vLLM's metrics all go through these.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["metrics_url", "prometheus_samples", "server_root"]

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def server_root(base_url: str) -> str:
    """The server's root from its API root: `http://host:port/v1` -> `http://host:port` (the one place `/v1` is stripped)."""
    return base_url.rstrip("/").removesuffix("/v1")


def metrics_url(base_url: str) -> str:
    """Where the server's Prometheus page is, from its API root."""
    return f"{server_root(base_url)}/metrics"


def prometheus_samples(text: str) -> Iterator[tuple[str, float]]:
    """(sample name, value) of every sample line of a Prometheus text page (labels dropped; comments,
    blank lines and unparsable values skipped): the one Prometheus reader."""
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            try:
                yield m.group(1), float(m.group(3))
            except ValueError:
                continue
