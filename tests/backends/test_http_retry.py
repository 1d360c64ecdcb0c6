"""Retries of the http backend: the policy's arithmetic, then a stdlib server answering 429 and 5xx."""

from __future__ import annotations

import datetime as dt
import random
import time

import pytest

from evalsuite.backends.http_retry import RetryPolicy, parse_retry_after, retryable_status
from evalsuite.errors import EvalsuiteError

from .test_http import make_backend, req, server  # noqa: F401 - the fixture is used by name

NOW = dt.datetime(2026, 12, 1, 3, 0, 0, tzinfo=dt.timezone.utc)


# -- the policy --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header, seconds",
    [
        (None, None),
        ("", None),
        ("7", 7.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),
        ("Tue, 01 Dec 2026 03:00:30 GMT", 30.0),
        ("Tue, 01 Dec 2026 02:59:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
    ],
)
def test_parse_retry_after(header, seconds):
    assert parse_retry_after(header, now=NOW) == seconds


@pytest.mark.parametrize(
    "status, retried",
    [
        (429, True),
        (408, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (501, False),
        (505, False),
        (400, False),
        (401, False),
        (404, False),
        (422, False),
    ],
)
def test_retryable_status(status, retried):
    assert retryable_status(status) is retried


@pytest.mark.parametrize("retry, low, high", [(0, 0.5, 1.0), (1, 1.0, 2.0), (2, 2.0, 4.0), (3, 2.5, 5.0), (10, 2.5, 5.0)])
def test_backoff_grows_exponentially_with_equal_jitter_and_a_cap(retry, low, high):
    policy = RetryPolicy(backoff_s=1.0, backoff_max_s=5.0)
    rng = random.Random(0)
    waits = [policy.backoff(retry, rng) for _ in range(200)]
    assert low <= min(waits) and max(waits) <= high
    assert max(waits) - min(waits) > (high - low) / 2  # jittered, not fixed


def test_retry_after_is_a_floor_of_the_wait():
    policy = RetryPolicy(backoff_s=0.1, backoff_max_s=1.0)
    rng = random.Random(1)
    assert policy.wait(0, 12.0, rng) == 12.0  # honoured even past backoff_max_s
    assert 0.05 <= policy.wait(0, 0.0, rng) <= 0.1


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, RetryPolicy(max_retries=3, deadline_s=40.0)),
        ({"max_retries": 0}, RetryPolicy(max_retries=0, deadline_s=10.0)),
        ({"max_retries": 1, "backoff_s": 0.2, "backoff_max_s": 2, "deadline_s": 7}, RetryPolicy(1, 0.2, 2.0, 7.0)),
    ],
)
def test_policy_from_option(raw, expected):
    assert RetryPolicy.from_option(raw, 10.0, "v") == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        (3, "must be a mapping"),
        ({"max_retries": 1.5}, "max_retries"),
        ({"backoff_s": -1}, "backoff_s"),
        ({"deadline_s": 0}, "deadline_s"),
        ({"jitter": 1}, "unknown retry setting"),
    ],
)
def test_bad_policy_fails_helpfully(raw, message):
    with pytest.raises(EvalsuiteError, match=message):
        RetryPolicy.from_option(raw, 10.0, "v")


# -- against a server answering 429 and 500 ----------------------------------------------------
def _posts_for(server, prompt: str) -> list[dict]:
    return [e for e in server.posts() if e["body"]["messages"][-1]["content"] == prompt]


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_a_500_is_retried_exactly_max_retries_times(server, max_retries):
    [g] = make_backend(server, retry={"max_retries": max_retries, "backoff_s": 0.01}).generate([req("boom")])
    assert len(_posts_for(server, "boom")) == max_retries + 1
    assert not g.ok and g.extra["attempts"] == max_retries + 1 and g.extra["http_status"] == 500
    assert g.error.startswith("HTTP 500: injected failure")
    assert ("gave up after" in g.error) is (max_retries > 0)
    assert len(g.extra.get("retries", [])) == max_retries


def test_429_with_retry_after_is_waited_out_then_answered(server):
    [g] = make_backend(server, retry={"max_retries": 3, "backoff_s": 0.01}).generate([req("fail:429:2:0.3")])
    assert g.ok and g.text == "echo: fail:429:2:0.3"
    posts = _posts_for(server, "fail:429:2:0.3")
    assert len(posts) == 3 and g.extra["attempts"] == 3
    assert [r["after"] for r in g.extra["retries"]] == ["HTTP 429: scripted 429"] * 2
    assert all(r["retry_after_s"] == 0.3 and r["wait_s"] >= 0.3 for r in g.extra["retries"])
    # the server saw the client wait at least Retry-After between attempts
    assert all(b["start"] - a["start"] >= 0.3 for a, b in zip(posts, posts[1:]))
    assert g.latency_s < g.extra["total_s"]  # latency is the answering attempt's; total adds the waits


def test_retries_stop_at_the_count_even_when_the_server_would_heal(server):
    [g] = make_backend(server, retry={"max_retries": 1, "backoff_s": 0.01}).generate([req("fail:503:3")])
    assert not g.ok and len(_posts_for(server, "fail:503:3")) == 2
    assert g.error == "HTTP 503: scripted 503 (gave up after 2 attempts: retry.max_retries is 1)"


def test_a_retry_after_past_the_deadline_gives_up_at_once(server):
    [g] = make_backend(server, retry={"max_retries": 5, "deadline_s": 10}).generate([req("fail:429:9:60")])
    assert not g.ok and len(_posts_for(server, "fail:429:9:60")) == 1
    assert "the next retry, in 60.00s (Retry-After 60s), would pass the request's deadline of 10s" in g.error
    assert g.extra["total_s"] < 10


def test_the_deadline_bounds_retries_of_a_server_that_keeps_failing(server):
    [g] = make_backend(server, retry={"max_retries": 1000, "backoff_s": 0.05, "backoff_max_s": 0.1, "deadline_s": 3.0}).generate([req("fail:500:100000")])
    attempts = len(_posts_for(server, "fail:500:100000"))
    assert not g.ok and 2 <= attempts < 1000 and g.extra["attempts"] == attempts
    assert "the request's deadline of 3s" in g.error


def test_a_dropped_connection_is_retried(server):
    [g] = make_backend(server, retry={"max_retries": 2, "backoff_s": 0.01}).generate([req("drop:1")])
    assert g.ok and g.extra["attempts"] == 2
    assert "RemoteProtocolError" in g.extra["retries"][0]["after"] or "ReadError" in g.extra["retries"][0]["after"]


def test_non_transient_errors_are_not_retried(server):
    a, b = make_backend(server, retry={"max_retries": 3, "backoff_s": 0.01}).generate([req("fail:501:5"), req("fail:400:5")])
    assert (a.extra["attempts"], b.extra["attempts"]) == (1, 1)
    assert a.error == "HTTP 501: scripted 501" and b.error == "HTTP 400: scripted 400"


def test_a_timeout_is_recorded_not_retried(server):
    [g] = make_backend(server, timeout_s=1.0, retry={"max_retries": 3}).generate([req("slow")])
    assert g.timeout and g.extra["attempts"] == 1
    deadline = time.monotonic() + 5  # a loaded machine may log the request after the client gave up
    while not _posts_for(server, "slow") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_posts_for(server, "slow")) == 1


def test_retries_keep_the_concurrency_bound(server):
    from .test_http import _max_in_flight

    be = make_backend(server, stream=False, concurrency=2, retry={"max_retries": 2, "backoff_s": 0.01})
    gens = be.generate([req(f"fail:503:1:0.05", case_id="a"), req("wait:0.2", case_id="b"), req("wait:0.2", case_id="c"), req("wait:0.2", case_id="d")])
    assert all(g.ok for g in gens)
    assert _max_in_flight(server.posts()) <= 2
