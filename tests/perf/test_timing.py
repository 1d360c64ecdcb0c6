"""Interleaved timing blocks (evalsuite/perf/timing.py): settings, the runner hook, and verdicts
that hold on a loaded machine."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from evalsuite.backends.base import Request
from evalsuite.backends.fake import FakeBackend
from evalsuite.verdict.compare import VariantInfo, compare_records, compare_run
from evalsuite.errors import EvalsuiteError
from evalsuite.verdict.gate import gate
from evalsuite.cases.options import TimingSettings, parse_timing
from evalsuite.run.timing import precise_enough, time_interleaved
from evalsuite.verdict.rubric import parse_rubric
from evalsuite.run.runner import RunOptions
from evalsuite.scoring.pipeline import run_suite
from evalsuite.scoring.base import ScoreRecord
from evalsuite.cases.suite import load_suite


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, None),
        ("sequential", None),
        ("interleaved", TimingSettings()),
        ({"rounds": 4, "block": 2, "warmup": 0, "level": 0.9, "max_rounds": 10, "precision": 0.2}, TimingSettings(mode="interleaved", rounds=4, block=2, warmup=0, level=0.9, max_rounds=10, precision=0.2)),
    ],
)
def test_parse_timing(raw, expected):
    assert parse_timing(raw) == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ("fast", "timing.mode: must be one of interleaved, sequential"),
        ({"rounds": 1}, "timing.rounds: expected an integer of at least 2"),
        ({"blocks": 3}, "timing.blocks: unknown setting"),
        ({"level": 1.0}, "timing.level"),
        ({"rounds": 8, "max_rounds": 4}, "timing.max_rounds: must be at least rounds (8)"),
        ({"precision": 0}, "timing.precision"),
        (3, "expected 'interleaved'"),
    ],
)
def test_parse_timing_errors_name_the_field(raw, message):
    with pytest.raises(EvalsuiteError, match=re.escape(message)):
        parse_timing(raw)


class _V:
    """The part of a Variant the fake backend reads."""

    def __init__(self, name: str, delay_s: float):
        from evalsuite.backends.base import GenerationSettings

        self.name, self.options, self.generation = name, {"delay_s": delay_s, "default": "four words of output"}, GenerationSettings()


RULES = {"rules": [{"name": "speed", "max_latency_p95_ratio": 1.25, "min_tokens_per_s_ratio": 0.8}]}
NAMES = ("base", "copy", "slow", "rerun")
INFOS = [VariantInfo("base", baseline=True), VariantInfo("copy"), VariantInfo("slow"), VariantInfo("rerun", noise=True)]
RECORDS = [ScoreRecord(variant=v, case_id="c0", sample=0, scenario="kb_qa", kind="k", metric="m.pass", value=1.0, passed=True, higher_is_better=True, details={}) for v in NAMES]
SUMMARY = {v: {"generations": 2, "errors": 0, "timeouts": 0} for v in NAMES}


@pytest.fixture
def loaded_machine():
    """A CPU-burning background process for the duration of the test."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield burner
    finally:
        burner.kill()
        burner.wait()


def test_verdicts_hold_on_a_loaded_machine(loaded_machine):
    """Baseline vs an unchanged copy never fails the performance rule in 20 tries; a variant made
    2x slower (twice the fake backend's delay) fails it every time. Both are judged against the
    noise floor of a rerun of the baseline timed the same way."""
    rubric = parse_rubric(RULES, "t.yaml")
    delays = {"base": 0.025, "copy": 0.025, "slow": 0.05, "rerun": 0.025}
    backends = {n: FakeBackend(_V(n, d)) for n, d in delays.items()}
    requests = {n: [Request("c0", (("user", "q0"),))] for n in NAMES}
    # 6 rounds, more (up to 40) while an interval is wider than x/÷ 1.2: a burst of load buys rounds
    settings = TimingSettings(rounds=6, block=1, warmup=0, max_rounds=40, precision=0.2)
    outcomes = {"copy": [], "slow": []}
    for _ in range(20):
        assert loaded_machine.poll() is None  # still burning
        doc = time_interleaved(backends, requests, "base", settings)
        assert 6 <= doc["rounds"] <= 40
        verdict = gate(compare_records(RECORDS, INFOS, perf=SUMMARY, timing=doc), rubric.for_stage("production"))
        for name in outcomes:
            res = verdict.result(name, "speed")
            outcomes[name].append((res.status, doc["rounds"], res.note))
    assert not [o for o in outcomes["copy"] if o[0] == "fail"], outcomes["copy"]
    assert [o for o in outcomes["slow"] if o[0] != "fail"] == [], outcomes["slow"]


def test_blocks_alternate_on_the_same_cases_and_bypass_the_cache():
    backends = {n: FakeBackend(_V(n, 0.0)) for n in ("base", "v1", "v2")}
    requests = {n: [Request(f"c{i}", (("user", f"q{i}"),), sample=s) for i in (3, 1, 2, 0) for s in (0, 1)] for n in backends}
    doc = time_interleaved(backends, requests, "base", TimingSettings(rounds=2, block=3, warmup=1))
    assert doc["cases"] == ["c0", "c1", "c2"]  # sample 0 of the first case ids
    order = [(b["round"], b["variant"]) for b in doc["blocks"]]
    # the warm-up round (0, forward) is not kept; round 1 runs backwards, round 2 forwards again
    assert order == [(0, "v2"), (0, "v1"), (0, "base"), (1, "base"), (1, "v1"), (1, "v2")]
    assert all(b["requests"] == 3 and b["errors"] == 0 and b["new_tokens"] > 0 for b in doc["blocks"])
    assert backends["base"].calls == 9  # 3 rounds x 3 requests, every one generated afresh


def test_rounds_are_added_in_pairs_until_precise_or_capped():
    backends = {"base": FakeBackend(_V("base", 0.0)), "v": FakeBackend(_V("v", 0.0))}
    requests = {n: [Request("c0", ())] for n in backends}
    # zero delays on a busy machine: ratios of microseconds, never within x/÷ 1.0001
    doc = time_interleaved(backends, requests, "base", TimingSettings(rounds=3, block=1, warmup=0, max_rounds=7, precision=0.0001))
    assert doc["rounds"] == 7  # 3 rounds, then pairs (keeping the ABBA balance) up to the cap
    fixed = time_interleaved({"base": FakeBackend(_V("base", 0.0)), "v": FakeBackend(_V("v", 0.0))}, requests, "base", TimingSettings(rounds=5, block=1, warmup=0))
    assert fixed["rounds"] == 5  # no max_rounds: exactly `rounds`, odd or even


def _doc(walls: dict[str, list[float]]) -> dict:
    blocks = [{"round": r, "variant": v, "wall_s": w, "errors": 0, "new_tokens": 10, "latency_p95_s": w} for v, ws in walls.items() for r, w in enumerate(ws)]
    return {"baseline": "base", "variants": list(walls), "blocks": blocks}


def test_precision_looks_at_interval_widths_only():
    settings = TimingSettings(precision=0.1)
    base = [1.0, 1.2, 0.9, 1.1]
    assert precise_enough(_doc({"base": base, "v": [3 * b for b in base]}), settings)  # far from 1, but tight
    assert not precise_enough(_doc({"base": base, "v": [1.0, 2.0, 0.6, 1.5]}), settings)


def test_failing_blocks_are_recorded_and_left_out_of_the_ratios():
    from evalsuite.perf.verdict import ratios_from_timing

    broken = _V("v", 0.0)
    broken.options["errors"] = {"c0": "boom"}
    backends = {"base": FakeBackend(_V("base", 0.0)), "v": FakeBackend(broken)}
    requests = {n: [Request("c0", ())] for n in backends}
    doc = time_interleaved(backends, requests, "base", TimingSettings(rounds=3, block=1, warmup=0))
    bad = [b for b in doc["blocks"] if b["variant"] == "v"]
    assert len(bad) == 3 and all(b["errors"] == 1 and "injected error" in b["error"] for b in bad)
    assert ratios_from_timing(doc, "v")["latency_p95_ratio"].n == 0  # nothing to pair: cannot be judged


def test_missing_cases_in_a_variant_are_an_error():
    backends = {n: FakeBackend(_V(n, 0.0)) for n in ("base", "v1")}
    requests = {"base": [Request("c0", ()), Request("c1", ())], "v1": [Request("c0", ())]}
    with pytest.raises(EvalsuiteError, match="'v1' lacks case"):
        time_interleaved(backends, requests, "base", TimingSettings(block=2))


SUITE = """
schema_version: 1
name: t
casesets: [cases.yaml]
generation: {{max_new_tokens: 8, batch_size: 2}}
output_dir: out
cache: out/cache.sqlite
timing: {timing}
variants:
  - name: base
    baseline: true
    backend: fake
    options: {{delay_s: 0.01}}
  - name: slow
    backend: fake
    model: other
    options: {{delay_s: 0.05}}
  - name: rerun
    backend: fake
    noise: true
    options: {{delay_s: 0.01}}
"""

CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: d1, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'How long?', context: [d1]}
  - {id: q2, prompt: 'How long again?', context: [d1]}
  - {id: q3, prompt: 'And now?', context: [d1]}
"""


def test_run_suite_times_interleaved_and_the_gate_judges_it(write, tmp_path):
    write("cases.yaml", CASES)
    path = write("suite.yaml", SUITE.format(timing="{mode: interleaved, rounds: 4, block: 2, warmup: 1, max_rounds: 30, precision: 0.25}"))
    res = run_suite(load_suite(path), RunOptions(progress=False))
    doc = json.loads((res.run_dir / "timing.json").read_text())
    assert doc["settings"]["rounds"] == 4 and 4 <= doc["rounds"] <= 30 and len(doc["blocks"]) == 3 * doc["rounds"]
    cmp = compare_run(res.store)
    slow = cmp.perf_for("slow")
    assert slow.timing == "interleaved" and slow.latency_p95_ratio_ci[0] > 1.5
    rubric = parse_rubric({"rules": [{"name": "speed", "max_latency_p95_ratio": 1.5}]}, "t.yaml")
    assert gate(cmp, rubric.for_stage("production")).result("slow", "speed").status == "fail"
    # a second run of the same suite: outputs come from the cache, the timing blocks are fresh
    again = run_suite(load_suite(path), RunOptions(progress=False))
    assert again.cached == 9 and again.generated == 0
    assert len(json.loads((again.run_dir / "timing.json").read_text())["blocks"]) >= 12


def test_run_option_overrides_the_suite_and_bad_settings_stop_the_run_early(write, tmp_path):
    write("cases.yaml", CASES)
    path = write("suite.yaml", SUITE.format(timing="sequential"))
    res = run_suite(load_suite(path), RunOptions(progress=False, score=False))
    assert not (res.run_dir / "timing.json").exists()
    res = run_suite(load_suite(path), RunOptions(progress=False, score=False, timing={"rounds": 2, "block": 1, "warmup": 0}))
    assert len(json.loads((res.run_dir / "timing.json").read_text())["blocks"]) == 6
    with pytest.raises(EvalsuiteError, match=r"suite\.yaml: timing\.rounds"):
        run_suite(load_suite(path), RunOptions(progress=False, timing={"rounds": 0}))
