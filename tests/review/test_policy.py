"""The flagging policy: each reason fires where planted and only there; the rubric's `review:` section."""

from __future__ import annotations

import pytest

from evalsuite.verdict.compare import Comparison, MetricDelta, PerfDelta
from evalsuite.review.policy import DEFAULT_POLICY, ReviewPolicy, flag_comparison
from evalsuite.verdict.rubric import RubricError, load_rubric
from evalsuite.scoring.base import ScoreRecord


def delta(metric, p2f=(), f2p=(), variant="opt", noise=False):
    return MetricDelta(variant=variant, scenario="kb_qa", metric=metric, pass_fail=True, higher_is_better=True, n=10, baseline_mean=1.0, variant_mean=0.9, delta=-0.1, ci_low=-0.2, ci_high=0.0, p_value=0.5, p_worse=0.5, pass_to_fail=tuple(p2f), fail_to_pass=tuple(f2p), noise=noise)


def perf(variant, speculative=False):
    return PerfDelta(variant=variant, generations=10, errors=0, timeouts=0, error_rate=0.0, timeout_rate=0.0, baseline_error_rate=0.0, baseline_timeout_rate=0.0, latency_p95_ratio=None, tokens_per_s_ratio=None, peak_memory_ratio=None, speculative=speculative, exactness=None)


def rec(case, metric, value, passed=None, variant="opt", details=None):
    return ScoreRecord(variant=variant, case_id=case, sample=0, scenario="kb_qa", kind="grounded", metric=metric, value=value, passed=passed, higher_is_better=True, details=details or {})


def cmp_of(deltas=(), variants=("opt",), spec=(), outputs=None):
    outs = {("base", "c1"): "base one", ("opt", "c1"): "opt one", ("base", "c2"): "same", ("opt", "c2"): "same"}
    outs.update(outputs or {})
    return Comparison(run_id="run-1", baseline="base", variants=tuple(variants), noise_runs=(), deltas=tuple(deltas), perf=tuple(perf(v, v in spec) for v in variants), scenarios=("kb_qa",), outputs=outs)


@pytest.mark.parametrize(
    "deltas, records, spec, policy, expected",
    [
        ([delta("citations.recall", p2f=["c1"])], [], (), DEFAULT_POLICY, {("c1", "flip")}),
        ([delta("citations.recall", p2f=["c1"])], [], (), ReviewPolicy(flip_metrics=("json.*",)), set()),
        ([delta("citations.recall", p2f=["c1"])], [], (), ReviewPolicy(flips=False, disagreement=False), set()),
        ([delta("citations.recall", p2f=["c1"], noise=True)], [], (), DEFAULT_POLICY, set()),  # noise runs are never flagged
        ([], [rec("c1", "similarity.chrf", 35.0), rec("c2", "similarity.chrf", 100.0)], (), DEFAULT_POLICY, {("c1", "similarity")}),
        ([], [rec("c1", "similarity.chrf", 35.0)], (), ReviewPolicy(min_similarity=30), set()),
        ([], [rec("c1", "json.drift", 2.0, details={"missing_keys": ["$.x"]}), rec("c2", "json.drift", 0.0)], (), DEFAULT_POLICY, {("c1", "json_drift")}),
        ([], [rec("c1", "json.drift", 2.0)], (), ReviewPolicy(max_json_drift=2), set()),
        ([], [rec("c1", "citations.agreement", 0.5, details={"only_baseline": ["d1"]}), rec("c2", "citations.agreement", 1.0)], (), DEFAULT_POLICY, {("c1", "citations")}),
        ([], [rec("c1", "grounding.leak", 1.0, False, details={"canaries": ["CANARY-1"]}), rec("c2", "grounding.leak", 0.0, True)], (), DEFAULT_POLICY, {("c1", "leak")}),
        ([], [rec("c1", "grounding.leak", 1.0, False)], (), ReviewPolicy(leaks=False), set()),
        ([], [rec("c1", "exactness.identical", 0.0, False), rec("c2", "exactness.identical", 1.0, True)], ("opt",), DEFAULT_POLICY, {("c1", "speculative")}),
        ([], [rec("c1", "exactness.identical", 0.0, False)], (), DEFAULT_POLICY, set()),  # not a speculative variant
        ([], [], ("opt",), DEFAULT_POLICY, {("c1", "speculative")}),  # no exactness scores: the texts are compared
        # scorer disagreement: one citations metric got worse and another got better on the same case
        ([delta("citations.recall", p2f=["c1"]), delta("citations.precision", f2p=["c1"])], [], (), ReviewPolicy(flips=False), {("c1", "disagreement")}),
        ([delta("citations.recall", p2f=["c1"]), delta("grounding.refused", f2p=["c1"])], [], (), ReviewPolicy(flips=False), set()),  # different families
        ([delta("citations.recall", p2f=["c1"]), delta("grounding.refused", f2p=["c1"])], [], (), ReviewPolicy(flips=False, related=(("citations.recall", "grounding.*"),)), {("c1", "disagreement")}),
        ([delta("citations.recall", p2f=["c1"]), delta("citations.precision", p2f=["c1"])], [], (), ReviewPolicy(flips=False), set()),  # both worse: they agree
    ],
)
def test_each_reason_fires_where_planted(deltas, records, spec, policy, expected):
    items = flag_comparison(cmp_of(deltas, spec=spec), policy, records=records, fingerprints={"opt": "fp-opt"})
    got = {(it.case_id, r["code"]) for it in items for r in it.reasons}
    assert got == expected
    for it in items:
        assert it.fingerprint == "fp-opt" and it.run_id == "run-1" and it.baseline == "base"
        assert (it.baseline_output, it.variant_output) == ((("base one", "opt one") if it.case_id == "c1" else ("same", "same")))


def test_an_item_carries_both_sides_scores_and_every_reason():
    records = [rec("c1", "citations.recall", 0.0, False), rec("c1", "citations.recall", 1.0, True, variant="base"), rec("c1", "similarity.chrf", 10.0)]
    (it,) = flag_comparison(cmp_of([delta("citations.recall", p2f=["c1"])]), records=records)
    assert [r["code"] for r in it.reasons] == ["flip", "similarity"]
    assert it.variant_scores["citations.recall"] == {"value": 0.0, "passed": False} and it.baseline_scores["citations.recall"]["passed"] is True
    assert (it.scenario, it.kind) == ("kb_qa", "grounded") and it.fingerprint == "name:opt"


def test_the_rubric_review_section_is_parsed(write):
    p = write("r.yaml", """
        rules:
          - {name: a, metric: json.valid, min: 0.5}
        review:
          min_similarity: 30
          max_json_drift: null
          flip_metrics: citations.*
          related: [[citations.recall, grounding.refused]]
          max_open: 5
        """)
    pol = load_rubric(p).review
    assert pol == ReviewPolicy(min_similarity=30.0, max_json_drift=None, flip_metrics=("citations.*",), related=(("citations.recall", "grounding.refused"),), max_open=5)
    assert load_rubric(write("plain.yaml", "rules:\n  - {name: a, metric: json.valid, min: 0.5}\n")).review == DEFAULT_POLICY


@pytest.mark.parametrize(
    "section, line, message",
    [
        ("review:\n  min_similarity: high\n", 4, "review.min_similarity: expected a number or null, got 'high'"),
        ("review:\n  max_open: -1\n", 4, "review.max_open: must be at least 0"),
        ("review:\n  max_open: 2.5\n", 4, "review.max_open: expected an integer"),
        ("review:\n  leaks: yes please\n", 4, "review.leaks: expected true or false"),
        ("review:\n  min_simlarity: 3\n", 4, "review.min_simlarity: unknown field (did you mean 'min_similarity'?)"),
        ("review:\n  related: [[citations.recall]]\n", 4, "review.related: expected a list of groups"),
        ("review: 3\n", 3, "review: expected a mapping"),
    ],
)
def test_review_section_errors_name_file_line_and_field(write, section, line, message):
    p = write("bad.yaml", "rules:\n  - {name: a, metric: json.valid, min: 0.5}\n" + section)
    with pytest.raises(RubricError) as ei:
        load_rubric(p)
    assert f"{p}:{line}: {message}" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# triage, the audit sample, blind sides, the new settings


def logit(case, margin, first=3):
    return rec(case, "logits.top1_agreement", 0.9, details={"first_disagreement": first, "baseline_margin": margin})


@pytest.mark.parametrize(
    "records, label, margin",
    [
        ([logit("c1", 0.05)], "knife-edge", 0.05),  # a near-tie that flipped
        ([logit("c1", 2.5)], "substantive", 2.5),
        ([logit("c1", None, first=None)], None, None),  # the top tokens never differed: no divergence recorded
        ([], None, None),  # no logit scores: no label
    ],
)
def test_triage_labels_come_from_the_baselines_margin_at_the_first_divergent_token(records, label, margin):
    from evalsuite.review.policy import FlagInputs, flag_plan

    plan = flag_plan(cmp_of([delta("citations.recall", p2f=["c1"])]), DEFAULT_POLICY, FlagInputs(records=records))
    (it,) = plan.items
    assert (it.review.triage, it.review.margin) == (label, margin)
    assert it.review.priority == (1.5 if label == "knife-edge" else 3.0)  # a flip weighs 3; knife-edge items count half


def test_priority_orders_leaks_before_flips_before_similarity():
    from evalsuite.review.policy import priority

    assert priority(["leak"], None) > priority(["flip"], None) > priority(["citations"], None) > priority(["similarity"], None)
    assert priority(["flip", "citations"], None) == 5.0 and priority(["flip", "citations"], "knife-edge") == 2.5


def test_the_audit_sample_is_a_seeded_share_of_unflagged_outputs_that_differ():
    from evalsuite.review.policy import audit_sample

    outs = {("base", f"c{i}"): f"b{i}" for i in range(20)} | {("opt", f"c{i}"): (f"b{i}" if i < 5 else f"v{i}") for i in range(20)}
    cmp = cmp_of(outputs=outs)
    pol = ReviewPolicy(audit_rate=0.2, seed=3)
    picked, (pop,) = audit_sample(cmp, pol, flagged={("opt", "c5")})
    assert pop.population == 14 and pop.sampled == len(picked) == 3  # 20 outputs - 5 identical to the baseline - 1 flagged
    assert all(v == "opt" and int(c[1:]) >= 5 and c != "c5" for v, c in picked)
    assert audit_sample(cmp, pol, flagged={("opt", "c5")})[0] == picked and audit_sample(cmp, ReviewPolicy(audit_rate=0.2, seed=4), {("opt", "c5")})[0] != picked
    assert audit_sample(cmp, ReviewPolicy(audit_rate=0.0), set()) == ([], [])


def test_blind_sides_are_seeded_per_item_and_balanced():
    from evalsuite.review.policy import blind_left

    sides = [blind_left(f"key-{i}", 0) for i in range(400)]
    assert sides == [blind_left(f"key-{i}", 0) for i in range(400)] and 160 < sides.count("variant") < 240


def test_the_new_review_settings_are_parsed(write):
    p = write("r.yaml", """
        rules:
          - {name: a, metric: json.valid, min: 0.5}
        review:
          mode: pairwise
          reviews_per_item: 2
          audit_rate: 0.1
          seed: 11
          knife_edge_margin: 0.25
        """)
    pol = load_rubric(p).review
    assert (pol.mode, pol.reviews_per_item, pol.audit_rate, pol.seed, pol.knife_edge_margin) == ("pairwise", 2, 0.1, 11, 0.25)


@pytest.mark.parametrize(
    "section, message",
    [
        ("review:\n  mode: blind\n", "review.mode: expected one of anchors, pairwise, got 'blind'"),
        ("review:\n  reviews_per_item: 0\n", "review.reviews_per_item: must be at least 1, got 0"),
        ("review:\n  audit_rate: 1.5\n", "review.audit_rate: must be at most 1, got 1.5"),
        ("review:\n  audit_rate: null\n", "review.audit_rate: expected a number, got None"),
        ("review:\n  seed: 1.5\n", "review.seed: expected an integer, got 1.5"),
    ],
)
def test_new_review_settings_errors_name_file_line_and_field(write, section, message):
    p = write("bad.yaml", "rules:\n  - {name: a, metric: json.valid, min: 0.5}\n" + section)
    with pytest.raises(RubricError) as ei:
        load_rubric(p)
    assert f"{p}:4: {message}" in str(ei.value)
