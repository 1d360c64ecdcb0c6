"""Rubric parsing: stages and overrides, typed rules, and errors that name file, line, rule and field."""

from __future__ import annotations

import math

import pytest

from evalsuite.verdict.compare import MetricDelta, NoiseFloor, PerfDelta
from evalsuite.verdict.rubric import MetricRule, RubricError, VariantRule, load_rubric


def test_shipped_rubric_parses_with_three_stages(repo):
    r = load_rubric(repo / "rubrics" / "default.yaml")
    assert set(r.stages) == {"dev", "pilot", "production"}
    prod, dev, pilot = r.for_stage("production"), r.for_stage("dev"), r.for_stage("pilot")
    recall = prod.rule("kb-citation-recall")
    assert isinstance(recall, MetricRule) and recall.max_drop == 0.02 and recall.alpha == 0.05 and recall.above_noise and recall.severity == "block"
    assert dev.rule("kb-citation-recall").max_drop == 0.10 and dev.rule("kb-citation-recall").severity == "warn" and dev.alpha == 0.10
    assert pilot.rule("kb-citation-recall").max_drop == 0.05
    assert dev.rule("kb-no-new-leaks").severity == "block" and dev.rule("kb-no-new-leaks").max_flips == 0
    assert isinstance(prod.rule("speculative-exactness"), VariantRule) and prod.rule("speculative-exactness").min_exactness == 0.95
    assert prod.multiple_testing == "tarone"


def test_stage_overrides_remove_disable_and_add(write):
    p = write("r.yaml", """
        rules:
          - {name: a, metric: json.valid, scenario: brand, max_drop: 0.02, min: 0.9}
          - {name: b, max_error_rate: 0.01}
        stages:
          dev:
            rules:
              a: {min: null, max_drop: 0.2}
              b: {enabled: false}
            add:
              - {name: c, metric: code.pass, scenario: code, max_flips: 3}
    """)
    r = load_rubric(p)
    dev = r.for_stage("dev")
    assert [x.name for x in dev.rules] == ["a", "c"]
    assert dev.rule("a").min is None and dev.rule("a").max_drop == 0.2
    prod = r.for_stage("production")
    assert [x.name for x in prod.rules] == ["a", "b"] and prod.rule("a").min == 0.9
    with pytest.raises(Exception, match="unknown stage 'staging'"):
        r.for_stage("staging")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rules:\n  - name: a\n    metric: json.valid\n    max_dorp: 0.1\n", "r.yaml:4: rule #0 (a): max_dorp: unknown field (did you mean 'max_drop'?)"),
        ("rules:\n  - name: a\n    metric: json.valid\n    max_drop: lots\n", "r.yaml:4: rule #0 (a): max_drop: expected a number, got 'lots'"),
        ("rules:\n  - name: a\n    metric: json.valid\n    min: 0.5\n    severity: fatal\n", "r.yaml:5: rule #0 (a): severity: must be one of block, warn"),
        ("rules:\n  - {name: a, metric: json.valid, min: 0.5}\n  - {name: b, metric: x, scenario: kbqa, min: 1}\n", "r.yaml:3: rule #1 (b): scenario: unknown scenario 'kbqa'"),
        ("rules:\n  - {name: a, metric: json.valid}\n", "rule #0 (a): (checks): a metric rule needs at least one of"),
        ("rules:\n  - {metric: json.valid, min: 1}\n", "rule #0: name: every rule needs a name"),
        ("rules:\n  - {name: a, metric: json.valid, min: 1, max_error_rate: 0.1}\n", "rule #0 (a): max_error_rate: variant-level fields cannot be mixed"),
        ("rules:\n  - {name: a, metric: json.valid, min: 1, require_significance: true}\n", "rule #0 (a): require_significance: qualifies max_drop"),
        ("rules:\n  - {name: a, max_error_rate: 2}\n", "rule #0 (a): max_error_rate: must be at most 1"),
        ("rules:\n  - {name: a, metric: m, min: 1}\n  - {name: a, metric: m, min: 1}\n", "rule #1 (a): name: duplicate rule name"),
        ("rules:\n  - {name: a, metric: m, min: 1}\nstages:\n  staging: {}\n", "r.yaml:4: stages.staging: unknown stage"),
        ("rules:\n  - {name: a, metric: m, min: 1}\nstages:\n  dev:\n    rules:\n      aa: {min: 0}\n", "r.yaml:6: rule aa: stages.dev.rules: no base rule named 'aa' (did you mean 'a'?)"),
        ("rules:\n  - {name: a, metric: m, min: 1}\nstages:\n  dev:\n    rules:\n      a: {max_flips: -1}\n", "stages.dev: rule #0 (a): max_flips: must be at least 0"),
        ("rules: [\n", "r.yaml:2:"),
        ("alpha: 2\nrules:\n  - {name: a, metric: m, min: 1}\n", "r.yaml:1: alpha: must be at most 0.5"),
    ],
)
def test_bad_rubrics_name_file_line_rule_and_field(write, text, expected):
    p = write("r.yaml", text)
    with pytest.raises(RubricError) as ei:
        load_rubric(p)
    assert expected in str(ei.value).replace(str(p.parent) + "/", ""), str(ei.value)


def test_missing_rubric_file(tmp_path):
    with pytest.raises(RubricError, match="rubric file not found"):
        load_rubric(tmp_path / "nope.yaml")


def delta(base, var, *, flips=0, back=0, p=0.5, n=100, pass_fail=True, hib=True):
    return MetricDelta(variant="opt", scenario="kb_qa", metric="m", pass_fail=pass_fail, higher_is_better=hib, n=n, baseline_mean=base, variant_mean=var, delta=var - base, ci_low=math.nan, ci_high=math.nan, p_value=2 * p, p_worse=p, p_min=p,
                       pass_to_fail=tuple(f"c{i}" for i in range(flips)), fail_to_pass=tuple(f"d{i}" for i in range(back)))


@pytest.mark.parametrize(
    "rule, d, noise, expected",
    [
        (MetricRule("r", ("*",), "m", min=0.9), delta(0.95, 0.89), None, "pass rate 0.890 < min 0.9"),
        (MetricRule("r", ("*",), "m", min=0.9), delta(0.95, 0.91), None, None),
        (MetricRule("r", ("*",), "m", max=2.0), delta(1.0, 2.5, pass_fail=False, hib=False), None, "mean 2.500 > max 2"),
        (MetricRule("r", ("*",), "m", max_drop=0.02), delta(0.9, 0.87), None, "drop 0.030 > max_drop 0.02"),
        (MetricRule("r", ("*",), "m", max_drop=0.02), delta(0.9, 0.885), None, None),
        (MetricRule("r", ("*",), "m", max_drop_rel=0.05), delta(0.5, 0.47), None, "relative drop 6.0% > max_drop_rel 5%"),
        (MetricRule("r", ("*",), "m", max_drop=0.5), delta(1.0, 2.0, pass_fail=False, hib=False), None, "drop 1.000 > max_drop 0.5"),
        (MetricRule("r", ("*",), "m", max_flips=2), delta(0.9, 0.87, flips=3), None, "3 pass->fail flip(s) > max_flips 2"),
        (MetricRule("r", ("*",), "m", max_flips=3), delta(0.9, 0.87, flips=3), None, None),
        (MetricRule("r", ("*",), "m", max_drop=0.02, alpha=0.05), delta(0.9, 0.8, p=0.2), None, None),  # not significant
        (MetricRule("r", ("*",), "m", max_drop=0.02, alpha=0.05), delta(0.9, 0.8, p=0.01), None, "p=0.0100 < alpha 0.05"),
        (MetricRule("r", ("*",), "m", max_flips=0, above_noise=True), delta(1, 0.97, flips=3), NoiseFloor("kb_qa", "m", ("n1",), 3, 0.03), None),
        (MetricRule("r", ("*",), "m", max_flips=0, above_noise=True), delta(1, 0.96, flips=4), NoiseFloor("kb_qa", "m", ("n1",), 3, 0.03), "above noise floor 3 flip(s)"),
        (MetricRule("r", ("*",), "m", max_drop=0.0, above_noise=True), delta(1, 0.97, pass_fail=False), NoiseFloor("kb_qa", "m", ("n1",), 0, 0.05), None),
    ],
)
def test_metric_rule_fails(rule, d, noise, expected):
    got = rule.fails(d, noise)
    if expected is None:
        assert got is None
    else:
        assert got is not None and expected in got, got


def perf(**kw):
    base = dict(variant="opt", generations=100, errors=0, timeouts=0, error_rate=0.0, timeout_rate=0.0, baseline_error_rate=0.0, baseline_timeout_rate=0.0,
                latency_p95_ratio=1.0, tokens_per_s_ratio=1.0, peak_memory_ratio=1.0, speculative=False, exactness=None)
    base.update(kw)
    return PerfDelta(**base)


@pytest.mark.parametrize(
    "rule, p, expected",
    [
        (VariantRule("r", max_error_rate=0.01), perf(errors=2, error_rate=0.02), "error rate 0.020 (2/100) > max_error_rate 0.01"),
        (VariantRule("r", max_timeout_rate=0.01), perf(timeouts=1, timeout_rate=0.01), None),
        (VariantRule("r", max_latency_p95_ratio=1.2), perf(latency_p95_ratio=1.3), "latency p95 x1.30"),
        (VariantRule("r", min_tokens_per_s_ratio=0.9), perf(tokens_per_s_ratio=0.8), "tokens/s x0.80"),
        (VariantRule("r", max_peak_memory_ratio=1.1), perf(peak_memory_ratio=1.5), "peak memory x1.50"),
        (VariantRule("r", max_peak_memory_ratio=1.1), perf(peak_memory_ratio=None), None),
        (VariantRule("r", min_exactness=0.95), perf(speculative=True, exactness=0.9), "speculative exactness 0.900"),
        (VariantRule("r", min_exactness=0.95), perf(speculative=False, exactness=0.1), None),
    ],
)
def test_variant_rule_fails(rule, p, expected):
    got = rule.fails(p)
    assert (got is None) if expected is None else (expected in got), got
