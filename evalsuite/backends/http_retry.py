"""Retry policy of the http backend: which failures are retried, how long to wait, when to give up.

A served model fails in ways a local one does not: the server sheds load (429), restarts (5xx,
refused connections) or drops a connection mid-reply. Such a failure says nothing about the
variant's quality, so it is retried, but never without bound: at most `max_retries` retries, and
never past the request's overall `deadline_s` (attempts and waits together). A request still
failing then is recorded as that request's error, and the run goes on.

Waits grow exponentially (`backoff_s`, doubled per retry, capped at `backoff_max_s`) with "equal
jitter": half the wait is fixed and half is random, so many clients failing together spread out
but none retries at once. A server's `Retry-After` (seconds or an HTTP date) is honoured as the
least wait; if it would pass the deadline, the request gives up at once instead of waiting in vain.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import random
from dataclasses import dataclass

from ..errors import EvalsuiteError

#: HTTP statuses worth retrying: rate limiting, request timeout and transient server errors
#: (501 Not Implemented and 505 HTTP Version Not Supported will not change on a retry)
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504} | set(range(506, 600)))

_KEYS = {"max_retries", "backoff_s", "backoff_max_s", "deadline_s"}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed request is tried again."""

    max_retries: int = 3  #: retries after the first attempt (0: no retry)
    backoff_s: float = 0.5  #: the wait before the first retry, before jitter
    backoff_max_s: float = 30.0  #: the cap of one computed wait (a longer Retry-After is still honoured)
    deadline_s: float = 600.0  #: overall limit of one request: every attempt and wait together

    @classmethod
    def from_option(cls, raw: object, timeout_s: float, who: str) -> RetryPolicy:
        """The policy of a variant's `retry` option; the deadline defaults to timeout_s x attempts."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise EvalsuiteError(f"variant {who!r}: the http option `retry` must be a mapping with {', '.join(sorted(_KEYS))} (got {raw!r})")
        unknown = set(raw) - _KEYS
        if unknown:
            raise EvalsuiteError(f"variant {who!r}: unknown retry setting(s) {sorted(unknown)}; known: {', '.join(sorted(_KEYS))}")
        max_retries = raw.get("max_retries", cls.max_retries)
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise EvalsuiteError(f"variant {who!r}: retry.max_retries must be a whole number >= 0 (got {max_retries!r})")
        values: dict[str, float] = {}
        for key in ("backoff_s", "backoff_max_s", "deadline_s"):
            v = raw.get(key)
            if v is None:
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (key == "deadline_s" and v == 0):
                raise EvalsuiteError(f"variant {who!r}: retry.{key} must be a positive number of seconds (got {v!r})")
            values[key] = float(v)
        deadline = values.pop("deadline_s", timeout_s * (max_retries + 1))
        return cls(max_retries=max_retries, deadline_s=deadline, **values)

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The computed wait before retry number `retry` (0 for the first), with equal jitter."""
        full = min(self.backoff_max_s, self.backoff_s * (2**retry))
        return full / 2 + rng.uniform(0, full / 2)

    def wait(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before a retry: the backoff, or the server's Retry-After when that is longer."""
        computed = self.backoff(retry, rng)
        return max(computed, retry_after) if retry_after is not None else computed


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is a transient failure (retried) rather than an answer (recorded)."""
    return status in RETRY_STATUSES


def parse_retry_after(value: str | None, now: _dt.datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return max(0.0, (when - now).total_seconds())
