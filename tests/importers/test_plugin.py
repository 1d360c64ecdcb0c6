"""The pytest plugin gates an imported run through the run's own suite.yaml and rubric (no suite file of its own)."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalsuite.importers import ImportOptions, import_lm_eval

LM = Path(__file__).parent / "data" / "lmeval-0.4.13"


def test_plugin_items_per_variant_and_rule_of_an_imported_run(pytester):
    res = import_lm_eval(LM / "base", [LM / "rtn"], options=ImportOptions(runs_dir=pytester.path / "runs", names=["base", "rtn4"]))
    # the run's own rubric, with one rule of one's own naming an imported metric by task and name
    rubric = yaml.safe_load(res.rubric.read_text())
    rubric["rules"].append({"name": "acc-floor", "scenario": "lm-eval:tiny_mc", "metric": "acc", "min": 0.99})
    res.rubric.write_text(yaml.safe_dump(rubric))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", f"--evalsuite-suite={res.store.dir / 'suite.yaml'}")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*PASSED*tiny_gen-exact_match[[]rtn4[]]*", "*PASSED*tiny_gen-flips[[]rtn4[]]*", "*PASSED*tiny_mc-acc[[]rtn4[]]*"])
    result.stdout.fnmatch_lines(["*evalsuite rule 'acc-floor' failed for variant 'rtn4'*", "*lm-eval:tiny_mc/acc*< min 0.99*"])
