"""Secrets and personal data out of traffic before anything reaches disk.

Personal data through presidio's pattern recognizers (e-mail addresses, card numbers with their Luhn
check, IP addresses; phone numbers through the phonenumbers library), used directly, without an NLP
engine or a spaCy model; API keys and tokens through detect-secrets' plugins. Each finding becomes a
typed placeholder (`<EMAIL_ADDRESS>`), and every replacement is counted by type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .extra import need

#: phone numbers are matched as written in these regions (and in any region when written with +country code)
PHONE_REGIONS = ("US", "GB", "CN", "DE", "FR", "IN", "JP", "CA")
SECRET = "API_KEY"  #: the placeholder type of every key and token detect-secrets finds
_NOT_SECRETS = ("Public IP (ipv4)",)  #: detect-secrets types presidio's recognizers already count under their own type


@dataclass(frozen=True, kw_only=True)
class Span:
    """One finding: where it is in the text and its placeholder type."""

    start: int
    end: int
    type: str


@dataclass
class Scrubber:
    """Replaces findings with `<TYPE>` placeholders; `counts` holds the replacements made so far, by type."""

    counts: Counter = field(default_factory=Counter)

    def text(self, value: str) -> str:
        """`value` with each finding replaced (the longest wins where two overlap)."""
        if not value:
            return value
        spans = _merge(_presidio_spans(value) + _secret_spans(value))
        for s in reversed(spans):
            value = value[: s.start] + f"<{s.type}>" + value[s.end :]
            self.counts[s.type] += 1
        return value

    def data(self, value: Any) -> Any:
        """Every string inside plain data (dicts, lists) scrubbed; other values as they are."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v) for v in value]
        return value


def _merge(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans in text order; of two that overlap, the longer one."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda s: (s.start, -(s.end - s.start))):
        if out and s.start < out[-1].end:
            if s.end - s.start > out[-1].end - out[-1].start:
                out[-1] = s
            continue
        out.append(s)
    return out


def _presidio_spans(text: str) -> list[Span]:
    spans = []
    for rec in _recognizers():
        for r in rec.analyze(text, rec.supported_entities, None):
            if r.entity_type != "IP_ADDRESS" or _real_ip(text[r.start : r.end]):
                spans.append(Span(start=r.start, end=r.end, type=r.entity_type))
    return spans


def _real_ip(found: str) -> bool:
    """presidio's IPv6 pattern also takes `::` alone (Python's `s[::-1]`): an address must name a host."""
    import ipaddress

    try:
        return not ipaddress.ip_address(found).is_unspecified
    except ValueError:
        return False


def _secret_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    offset = 0
    for n, line in enumerate(text.split("\n")):
        for plugin in _secret_plugins():
            for found in plugin.analyze_line(filename="traffic", line=line, line_number=n):
                spans.extend(Span(start=offset + a, end=offset + b, type=SECRET) for a, b in _whole(plugin, line, found.secret_value or ""))
        offset += len(line) + 1
    return spans


def _whole(plugin: Any, line: str, secret: str) -> list[tuple[int, int]]:
    """Where a finding is in its line: the whole match of the plugin's pattern that holds it (a plugin
    reports a pattern's first group, `ghp` of a GitHub token), else each place its value occurs."""
    whole = [m.span() for rx in getattr(plugin, "denylist", ()) for m in rx.finditer(line) if secret in m.group(0)]
    if whole or not secret:
        return whole
    out, at = [], line.find(secret)
    while at >= 0:
        out.append((at, at + len(secret)))
        at = line.find(secret, at + len(secret))
    return out


@cache
def _recognizers() -> tuple[Any, ...]:
    """presidio's pattern recognizers, imported on first use (presidio's import takes seconds)."""
    need("phonenumbers", "phonenumbers", "phone numbers")
    need("presidio_analyzer", "presidio-analyzer", "personal data")
    from presidio_analyzer.predefined_recognizers import CreditCardRecognizer, EmailRecognizer, IpRecognizer, PhoneRecognizer

    class OfflineEmailRecognizer(EmailRecognizer):
        """presidio's e-mail recognizer checking the domain against tldextract's bundled suffix list:
        the default fetches the list from the internet on first use."""

        def validate_result(self, pattern_text: str) -> bool:
            return _offline_tld()(pattern_text).fqdn != ""

    return (OfflineEmailRecognizer(), CreditCardRecognizer(), IpRecognizer(), PhoneRecognizer(supported_regions=PHONE_REGIONS))


@cache
def _offline_tld() -> Callable[[str], Any]:
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@cache
def _secret_plugins() -> tuple[Any, ...]:
    """detect-secrets' plugins (keys and tokens of the common providers, private keys, JWTs, high-entropy strings)."""
    util = need("detect_secrets.core.plugins.util", "detect-secrets", "keys and tokens")
    plugins: dict[str, Any] = util.get_mapping_from_secret_type_to_class()
    return tuple(cls() for name, cls in plugins.items() if name not in _NOT_SECRETS)
