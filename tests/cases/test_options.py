"""The suite's option blocks are parsed when the suite loads: a bad `timing:` block is reported with
its file, line and field by `load_suite` and by `evalsuite validate SUITE`, like `executor:`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from evalsuite.cases.options import TimingSettings
from evalsuite.cases.suite import load_suite
from evalsuite.cli import app
from evalsuite.errors import ValidationError

SUITE = """
schema_version: 1
name: t
casesets: [cases.yaml]
generation: {{max_new_tokens: 8}}
stage: pilot
{timing}
variants:
  - name: base
    baseline: true
    backend: fake
"""
CASES = """
schema_version: 1
defaults: {scenario: kb_qa, kind: grounded, lang: en}
documents:
  - {id: d1, text: The VPN session lasts 12 hours.}
cases:
  - {id: q1, prompt: 'Question 1?', context: [d1]}
"""


def suite_with(write, timing: str):
    write("cases.yaml", CASES)
    return write("suite.yaml", SUITE.format(timing=timing))


@pytest.mark.parametrize(
    "timing,expected",
    [("", None), ("timing: sequential", None), ("timing: interleaved", TimingSettings()), ("timing: {rounds: 4, block: 2}", TimingSettings(rounds=4, block=2))],
)
def test_timing_is_parsed_when_the_suite_loads(write, timing, expected):
    assert load_suite(suite_with(write, timing)).timing == expected


# (timing entry, line of the problem, field, words of the message)
BAD = [
    ("timing: fast", 6, "timing.mode", "must be one of interleaved, sequential"),
    ("timing:\n  rounds: 1", 7, "timing.rounds", "expected an integer of at least 2"),
    ("timing:\n  mode: interleaved\n  blocks: 3", 8, "timing.blocks", "unknown setting"),
    ("timing:\n  level: 1.5", 7, "timing.level", "expected a number in [0.5, 1)"),
    ("timing:\n  rounds: 8\n  max_rounds: 4", 8, "timing.max_rounds", "must be at least rounds (8)"),
    ("timing: [interleaved]", 6, "timing", "expected 'interleaved', 'sequential' or a mapping"),
]


@pytest.mark.parametrize("timing,line,field,words", BAD, ids=[b[2] + ":" + b[3] for b in BAD])
def test_a_bad_timing_block_names_file_line_and_field(write, timing, line, field, words):
    path = suite_with(write, timing)
    with pytest.raises(ValidationError) as err:
        load_suite(path)
    [problem] = [p for p in err.value.problems if p.field.startswith("timing")]
    assert (problem.file, problem.line, problem.field) == (str(path), line, field)
    assert words in problem.message


def test_validate_reports_a_bad_suite_block_and_passes_a_good_suite(write):
    bad = suite_with(write, "timing:\n  rounds: 1")
    res = CliRunner().invoke(app, ["validate", str(bad)])
    assert res.exit_code == 4 and f"{bad}:7: timing.rounds: expected an integer of at least 2" in res.output  # issue 38: your input is wrong exits 4
    good = suite_with(write, "timing: interleaved")
    res = CliRunner().invoke(app, ["validate", str(good)])
    assert res.exit_code == 0 and f"suite {good}: OK" in res.output and "stage pilot" in res.output


def test_an_unknown_stage_in_the_suite_is_a_located_problem(write):
    path = suite_with(write, "")
    path.write_text(path.read_text().replace("stage: pilot", "stage: staging"))
    with pytest.raises(ValidationError) as err:
        load_suite(path)
    [problem] = [p for p in err.value.problems if p.field == "stage"]
    assert problem.line == 5 and "unknown stage 'staging'" in problem.message
