"""Personal data and secrets replaced by typed placeholders and counted; no network on the way."""

from __future__ import annotations

import socket

import pytest

from evalsuite.cases.traffic.scrub import Scrubber

PLANTED = [
    ("mail me at jane.roe@example.com today", "jane.roe@example.com", "EMAIL_ADDRESS"),
    ("call +1 415-555-0132 after six", "+1 415-555-0132", "PHONE_NUMBER"),
    ("我的手机是13812345678", "13812345678", "PHONE_NUMBER"),
    ("card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111", "CREDIT_CARD"),
    ("the server at 192.168.10.42 is down", "192.168.10.42", "IP_ADDRESS"),
    ("aws key AKIAIOSFODNN7EXAMPLE leaked", "AKIAIOSFODNN7EXAMPLE", "API_KEY"),
    ("token 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 please", "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", "API_KEY"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "API_KEY"),
]


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test (tldextract's suffix-list download would be one)."""
    tried = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


@pytest.mark.parametrize("text, secret, kind", PLANTED)
def test_each_kind_replaced_and_counted(text, secret, kind, no_network):
    s = Scrubber()
    out = s.text(text)
    assert secret not in out and f"<{kind}>" in out
    assert s.counts[kind] == 1 and sum(s.counts.values()) == 1
    assert no_network == []


@pytest.mark.parametrize(
    "text",
    ["def rev(s):\n    return s[::-1]", "Backups run at 02:00 UTC for 30 days", "version 1.2.3 of the client", "order 12 of 40 shipped"],
)
def test_ordinary_text_and_code_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text and not s.counts


def test_plain_data_scrubbed_everywhere():
    s = Scrubber()
    got = s.data({"prompt": "write to a@example.com", "context": [{"id": "d1", "text": "call +44 20 7946 0958"}], "n": 3})
    assert got == {"prompt": "write to <EMAIL_ADDRESS>", "context": [{"id": "d1", "text": "call <PHONE_NUMBER>"}], "n": 3}
    assert dict(s.counts) == {"EMAIL_ADDRESS": 1, "PHONE_NUMBER": 1}
