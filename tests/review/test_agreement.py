"""Reviewer agreement (Cohen's kappa per pair, statsmodels) and the audit's miss-rate estimate (Clopper-Pearson)."""

from __future__ import annotations

import pytest

from evalsuite.review.agreement import agreement, miss_rate, miss_rate_line


def hist(*votes):
    return [{"id": i + 1, "verdict": v, "reviewer": r, "role": role, "retracts": None} for i, (r, v, role) in enumerate((*x, "review")[:3] for x in votes)]


def test_kappa_per_pair_matches_the_hand_computed_value_and_lists_disagreements():
    # alice and bob on 6 items: 3 both acceptable, 2 both regression, 1 split -> po = 5/6, pe = (4*3 + 2*3)/36 = 1/2, kappa = 2/3
    h = {i: hist(("alice", "acceptable"), ("bob", "acceptable")) for i in range(1, 4)}
    h |= {i: hist(("alice", "regression"), ("bob", "regression")) for i in (4, 5)}
    h[6] = hist(("alice", "acceptable"), ("bob", "regression"), ("carol", "regression", "adjudication"))
    ag = agreement(h, {6: {"variant": "opt", "case_id": "kb-6"}})
    (p,) = ag["pairs"]
    assert p["reviewers"] == ["alice", "bob"] and (p["items"], p["agree"], p["disagree"]) == (6, 5, 1)
    assert p["kappa"] == pytest.approx(2 / 3, abs=1e-4) and p["table"] == [[3, 1], [0, 2]]
    assert ag["disagreements"] == [{"id": 6, "variant": "opt", "case_id": "kb-6", "verdicts": {"alice": "acceptable", "bob": "regression"}, "adjudicated": "regression", "adjudicator": "carol"}]


def test_kappa_is_undefined_when_every_verdict_is_in_one_category():
    ag = agreement({i: hist(("a", "acceptable"), ("b", "acceptable")) for i in range(3)})
    assert ag["pairs"][0]["kappa"] is None and ag["pairs"][0]["agree"] == 3


def test_the_miss_rate_is_a_clopper_pearson_interval_scaled_to_the_population():
    from statsmodels.stats.proportion import proportion_confint

    pops = [{"run_id": "r", "variant": "opt", "population": 200, "sampled": 10, "rate": 0.05, "seed": 0}]
    audited = [{"verdict": "regression"}] + [{"verdict": "acceptable"}] * 8 + [{"verdict": None}]
    est = miss_rate(pops, audited)
    lo, hi = proportion_confint(1, 9, alpha=0.05, method="beta")
    assert (est["sampled"], est["reviewed"], est["regressions"]) == (10, 9, 1)
    assert est["miss_rate"] == pytest.approx(1 / 9, abs=1e-4) and est["ci"] == [pytest.approx(lo, abs=1e-4), pytest.approx(hi, abs=1e-4)]
    assert est["missed"] == pytest.approx(200 / 9, abs=0.1) and est["missed_ci"][1] == pytest.approx(200 * hi, abs=0.1)
    assert "the flags miss about 11%" in miss_rate_line(est) and "10 of 200 unflagged" in miss_rate_line(est)
    none = miss_rate(pops, [{"verdict": None}])
    assert none["miss_rate"] is None and "none reviewed yet" in miss_rate_line(none)
