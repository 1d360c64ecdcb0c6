"""The suite's `load:` block: parsed into LoadSettings with the suite, each fault naming file, line and field."""

from __future__ import annotations

import pytest

from evalsuite.cases.options import LoadSettings, is_loopback
from evalsuite.cases.suite import load_suite
from evalsuite.errors import ValidationError

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: vpn, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'How long?', context: [vpn]}
"""


def suite(load: str, url: str = "http://127.0.0.1:8000/v1") -> str:
    return f"""schema_version: 1
name: s
casesets: [sets]
variants:
  - name: base
    baseline: true
    backend: fake
  - name: served
    backend: http
    model: m
    options:
      base_url: {url}
load:
{load}
"""


def _load(write, load: str, url: str = "http://127.0.0.1:8000/v1"):
    write("sets/cases.yaml", CASES)
    return load_suite(write("suite.yaml", suite(load, url)))


def test_a_load_block_becomes_settings_and_names_the_served_variants(write):
    s = _load(write, "  levels: [16, 1, 4]\n  requests: 12\n  mix: {short: 3, long: 1}\n  stream: 1\n  rounds: 3")
    assert s.load == LoadSettings(levels=(1, 4, 16), requests=12, mix={"short": 3.0, "long": 1.0}, stream=1.0, rounds=3)
    assert [v.name for v in s.loaded_variants()] == ["served"]


def test_no_load_block_loads_nothing(write):
    write("sets/cases.yaml", CASES)
    text = suite("  levels: [1]").replace("load:\n  levels: [1]\n", "")
    s = load_suite(write("suite.yaml", text))
    assert s.load is None and s.loaded_variants() == []


@pytest.mark.parametrize(
    "block, line, field, message",
    [
        ("  levels: [0, 4]", 14, "load.levels", "list of concurrency levels"),
        ("  levels: 4", 14, "load.levels", "list of concurrency levels"),
        ("  requests: -1", 14, "load.requests", "an integer in 1..10000"),
        ("  level: [1]", 14, "load.level", "did you mean levels?"),
        ("  mix: {short: 1, huge: 2}", 14, "load.mix", "short / long"),
        ("  stream: 2", 14, "load.stream", "a share in [0, 1]"),
        ("  rounds: 1\n  timeout_s: 0", 15, "load.timeout_s", "a positive number"),
        ("  variants: [nope]", 14, "load.variants", "unknown variant 'nope'"),
        ("  variants: [base]", 14, "load.variants", "is not served"),
    ],
)
def test_bad_load_settings_name_file_line_and_field(write, block, line, field, message):
    with pytest.raises(ValidationError) as exc:
        _load(write, block)
    [p] = exc.value.problems
    assert (p.line, p.field) == (line, field) and message in p.message
    assert str(p).startswith(f"{p.file}:{line}: {field}:")


def test_load_refuses_a_server_on_another_host(write):
    with pytest.raises(ValidationError) as exc:
        _load(write, "  levels: [1]", url="http://10.0.0.7:8000/v1")
    [p] = exc.value.problems
    assert p.field == "options.base_url" and p.case_id == "served" and p.line == 12
    assert "not on loopback" in p.message and "10.0.0.7" in p.message


@pytest.mark.parametrize(
    "url, ok",
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.9.9.9/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://localhost:1234/v1", True),
        ("http://10.0.0.1/v1", False),
        ("https://api.openai.com/v1", False),
        ("ftp://127.0.0.1/", False),
        ("not a url", False),
    ],
)
def test_is_loopback(url, ok):
    assert is_loopback(url) is ok
