"""The pytest plugin, driven with pytester: items per (variant, rule), failures with evidence, JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path


# pytester's in-process runs drop modules first imported inside them; numpy does not survive a
# reload, so everything the plugin imports lazily is imported here, once
import evalsuite.verdict.compare  # noqa: F401
import evalsuite.run.degrade  # noqa: F401
import evalsuite.verdict.gate  # noqa: F401
import evalsuite.run.runner  # noqa: F401
import evalsuite.scoring.run as _scoring_run
import scipy.stats  # noqa: F401
import statsmodels.stats.contingency_tables  # noqa: F401
import statsmodels.stats.multitest  # noqa: F401

_scoring_run.load_scorers()

from verdict_synth import write_sets, write_suite

RUBRIC = """
schema_version: 1
name: plugin-test
rules:
  - name: citations
    scenario: kb_qa
    metric: citations.recall
    max_drop: 0.05
  - name: leaks
    scenario: kb_qa
    metric: grounding.leak
    max_flips: 0
  - name: brand-json
    scenario: brand
    metric: json.valid
    max_drop: 0.0
  - name: reliability
    max_error_rate: 0.0
"""


def _suite(root: Path, degrade: dict | None, name: str) -> Path:
    outputs = write_sets(root, n_kb=20)
    (root / "rubric.yaml").write_text(RUBRIC, "utf-8")
    variant = {"name": "opt", "quantization": {"method": "bnb", "bits": 4}}
    if degrade:
        variant["degrade"] = degrade
    return write_suite(root, outputs, [variant], name=name, rubric="rubric.yaml")


def test_passing_run_one_item_per_variant_and_rule(pytester):
    _suite(pytester.path, None, "evalsuite_ok")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    # 4 rules x 1 variant; brand-json has no brand cases in this run: skipped, not failed
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["PASSED evalsuite_ok.yaml::citations[[]opt[]]", "SKIPPED*evalsuite_ok.yaml*json.valid in brand (scenario not in this run)"])


def test_failing_run_reports_rule_cases_and_diff_and_writes_junit(pytester):
    suite = _suite(pytester.path, {"kind": "drop_citations", "rate": 0.5, "seed": 1}, "gate")
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--evalsuite-suite={suite}", "--evalsuite-stage=production", f"--junitxml={xml}")
    result.assert_outcomes(failed=1, passed=2, skipped=1)
    out = result.stdout.str()
    assert "evalsuite rule 'citations' failed for variant 'opt'" in out
    assert "kb_qa/citations.recall" in out and "max_drop 0.05" in out
    assert "offending cases" in out and "kb-0" in out
    assert "[-" in out and "[doc-0" in out  # the diff shows the removed citation marker
    tree = ET.parse(xml)
    cases = {tc.get("name"): tc for tc in tree.iter("testcase")}
    assert set(cases) == {"citations[opt]", "leaks[opt]", "brand-json[opt]", "reliability[opt]"}
    assert cases["citations[opt]"].find("failure") is not None
    assert cases["leaks[opt]"].find("failure") is None and cases["brand-json[opt]"].find("skipped") is not None
    assert "offending cases" in cases["citations[opt]"].find("failure").text


def test_stored_run_and_bad_rubric(pytester):
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    suite = _suite(pytester.path, {"kind": "leak_canary", "rate": 1.0, "seed": 0}, "stored")
    store = run_suite(load_suite(suite), RunOptions(progress=False)).store
    result = pytester.runpytest("-p", "no:cacheprovider", f"--evalsuite-suite={suite}", f"--evalsuite-run={store.dir}")
    result.assert_outcomes(failed=1, passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*rule 'leaks' failed*", "*pass->fail flip(s) > max_flips 0*"])
    # the stage the items judge for is named: no --evalsuite-stage, no `stage:` in the suite
    result.stdout.fnmatch_lines([f"evalsuite: {suite}, stage production (the default: no stage given and none in the suite)"])
    assert "(stage production, rubric" in result.stdout.str()

    (pytester.path / "bad.yaml").write_text("rules:\n  - name: x\n    metric: json.valid\n    max_dorp: 0.1\n", "utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--evalsuite-suite={suite}", f"--evalsuite-run={store.dir}", "--evalsuite-rubric=bad.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot judge: bad rubric:", "bad.yaml:4: rule #0 (x): max_dorp: unknown field (did you mean 'max_drop'?)*"])
