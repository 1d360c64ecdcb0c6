"""Promotion up the stages and rollback, through the one judging path, the review queue and the ledger."""

from __future__ import annotations

import shutil

import pytest

from evalsuite import promotion
from evalsuite.judge import judge_run
from evalsuite.promotion import PromoteRequest
from evalsuite.releases import LedgerError, ReleaseLedger, record_gate
from evalsuite.report.releases import ledger_status
from evalsuite.review import api as review

from .conftest import BAD_CASE, TWEAK_CASE


def gate(run, stage, paths, *, flag=False):
    return record_gate(judge_run(run["store"], None, stage, paths["queue"], flag=flag), paths["ledger"])


def promote(run, variant, stage, paths):
    return promotion.promote(PromoteRequest(variant=variant, stage=stage, run=run["store"].run_id, runs_dir=run["runs_dir"], rubric=None, queue=paths["queue"], ledger=paths["ledger"]))


def to_production(run, variant, paths):
    for stage in ("pilot", "production"):
        res = promote(run, variant, stage, paths)
        assert res.promoted, res.reason


def rows(paths):
    with ReleaseLedger(paths["ledger"]) as led:
        return led.decisions(), led.deployments()


def status(paths):
    return ledger_status(paths["ledger"], paths["queue"])


def item_of(paths, variant, case):
    return next(i for i in review.list_items(paths["queue"], status="all") if i["variant"] == variant and i["case_id"] == case)


@pytest.mark.parametrize(
    ("stage", "below"),
    [("pilot", "dev"), ("production", "pilot")],
)
def test_promote_refuses_without_the_lower_stage_and_records_nothing(release_run, paths, stage, below):
    res = promote(release_run, "good-a", stage, paths)
    assert not res.promoted and res.decision is None and res.judgment is None
    assert f"good-a ({res.fingerprint[:12]}) is not cleared for {below}: no {below} decision is recorded" in res.reason
    assert not paths["ledger"].exists()  # nothing recorded, not even an empty ledger


def test_promote_passes_with_the_lower_stage_and_records_the_decision_and_the_deployment(release_run, paths):
    dev = gate(release_run, "dev", paths)
    assert {d.variant: d.status for d in dev} == {"good-a": "pass", "good-b": "pass", "tweak": "pass", "bad": "pass"}  # dev only warns on bad's flip
    res = promote(release_run, "good-a", "pilot", paths)
    assert res.promoted, res.reason
    assert res.lower is not None and res.lower.cleared and res.lower.stage == "dev"
    decisions, deployments = rows(paths)
    assert [(d.kind, d.stage, d.variant, d.status) for d in decisions[len(dev) :]] == [("promote", "pilot", "good-a", "pass")]
    assert [(d.action, d.stage, d.variant, d.decision_id, d.replaces) for d in deployments] == [("promote", "pilot", "good-a", decisions[-1].id, "")]
    assert decisions[-1].event == deployments[0].event  # one command, one transaction
    assert decisions[-1].identity["artefacts"]["model"]["sha256"] and decisions[-1].rubric_digest
    assert status(paths).of(res.fingerprint, "pilot").cleared


def test_promote_refuses_a_variant_that_fails_this_stage_and_records_that_decision(release_run, paths):
    gate(release_run, "dev", paths)
    res = promote(release_run, "bad", "pilot", paths)
    assert not res.promoted and "does not pass the pilot gate" in res.reason and "kb-citation-recall" in res.reason
    decisions, deployments = rows(paths)
    assert (decisions[-1].kind, decisions[-1].stage, decisions[-1].status) == ("promote", "pilot", "regression") and deployments == []
    assert not status(paths).of(res.fingerprint, "pilot").cleared


def test_a_reviewers_regression_after_promotion_makes_the_variant_no_longer_cleared(release_run, paths):
    gate(release_run, "dev", paths, flag=True)  # tweak's rephrased answer goes to the queue, open
    to_production(release_run, "tweak", paths)
    fp = promote(release_run, "tweak", "production", paths).fingerprint  # promoting again is allowed
    assert all(status(paths).of(fp, s).cleared for s in ("dev", "pilot", "production"))
    item = item_of(paths, "tweak", TWEAK_CASE)
    review.annotate(item["id"], "regression", note="the order reads wrong", reviewer="rita", queue=paths["queue"])
    for stage in ("dev", "pilot", "production"):
        c = status(paths).of(fp, stage)
        assert not c.cleared and f"a reviewer judged 1 of its output(s) a regression: #{item['id']} ({TWEAK_CASE}, rita)" in c.reason
    res = promote(release_run, "tweak", "production", paths)
    assert not res.promoted and "is not cleared for pilot" in res.reason


def test_an_accepted_flip_is_a_waiver_and_a_later_regression_verdict_expires_it(release_run, paths):
    gate(release_run, "dev", paths, flag=True)
    item = item_of(paths, "bad", BAD_CASE)
    review.annotate(item["id"], "acceptable", note="the citation is implied", reviewer="rita", queue=paths["queue"])
    res = promote(release_run, "bad", "pilot", paths)
    assert res.promoted, res.reason
    assert res.decision.waivers == {BAD_CASE: {"item": item["id"], "why": f"item #{item['id']}, rita: the citation is implied"}}
    assert status(paths).of(res.fingerprint, "pilot").cleared
    review.annotate(item["id"], "regression", note="no, it must cite", reviewer="sam", queue=paths["queue"])
    c = status(paths).of(res.fingerprint, "pilot")
    assert not c.cleared
    assert f"waiver expired: item #{item['id']} ({BAD_CASE}) is now regression (sam)" in c.reasons


def test_a_changed_stage_rule_uncleares_that_stage_only(release_run, paths, tmp_path):
    rubric = tmp_path / "rubric.yaml"
    shutil.copy(release_run["rubric"], rubric)
    for stage in ("dev", "pilot"):
        record_gate(judge_run(release_run["store"], rubric, stage, paths["queue"]), paths["ledger"])
    fp = release_run["store"].signature["variants"]["good-a"]
    assert status(paths).of(fp, "dev").cleared and status(paths).of(fp, "pilot").cleared
    rubric.write_text(rubric.read_text().replace("{severity: warn}", "{severity: warn, max_flips: 1}"), "utf-8")  # dev's rules only
    assert not status(paths).of(fp, "dev").cleared and status(paths).of(fp, "pilot").cleared
    assert "the dev rules of" in status(paths).of(fp, "dev").reason and "changed since decision" in status(paths).of(fp, "dev").reason
    rubric.unlink()
    assert "cannot be read now" in status(paths).of(fp, "pilot").reason


def test_rollback_names_the_previous_cleared_variant_and_records_it(release_run, paths):
    gate(release_run, "dev", paths)
    for v in ("good-a", "good-b"):
        to_production(release_run, v, paths)
    res = promotion.rollback("production", ledger=paths["ledger"], queue=paths["queue"])
    assert (res.previous.variant, res.deployment.variant, res.deployment.action) == ("good-b", "good-a", "rollback")
    assert res.identity.ok and "model.safetensors" not in res.identity.summary() and str(release_run["root"] / "models" / "a") in res.identity.summary()
    assert res.deployment.replaces == res.previous.fingerprint and res.deployment.decision_id == res.clearance.decision.id
    assert res.deployment.spec["model"].endswith("models/a")
    deps = rows(paths)[1]
    assert [(d.action, d.variant) for d in deps if d.stage == "production"] == [("promote", "good-a"), ("promote", "good-b"), ("rollback", "good-a")]
    # issue 38: good-b, which the rollback took off, was a deployment and is still cleared: the next target
    again = promotion.rollback("production", ledger=paths["ledger"], queue=paths["queue"])
    assert (again.previous.variant, again.deployment.variant) == ("good-a", "good-b")
    assert len(rows(paths)[1]) == len(deps) + 1


def test_rollback_skips_a_variant_that_is_no_longer_cleared(release_run, paths):
    gate(release_run, "dev", paths, flag=True)
    for v in ("good-a", "tweak", "good-b"):
        to_production(release_run, v, paths)
    assert status(paths).deployments["production"].target.variant == "tweak"
    review.annotate(item_of(paths, "tweak", TWEAK_CASE)["id"], "regression", reviewer="rita", queue=paths["queue"])
    res = promotion.rollback("production", ledger=paths["ledger"], queue=paths["queue"])
    assert (res.previous.variant, res.deployment.variant) == ("good-b", "good-a")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: (d / "model.safetensors").write_bytes(b"weights a, retrained"), "its files changed since it was cleared"),
        (lambda d: d.rename(d.with_name("a-moved")), "not found"),
    ],
    ids=["weights-changed", "directory-gone"],
)
def test_rollback_refuses_when_the_targets_files_changed_and_records_nothing(release_run, paths, change, expected):
    gate(release_run, "dev", paths)
    for v in ("good-a", "good-b"):
        to_production(release_run, v, paths)
    before = rows(paths)
    model = release_run["root"] / "models" / "a"
    saved = shutil.copytree(model, release_run["root"] / "models" / "a-saved")
    try:
        change(model)
        with pytest.raises(LedgerError) as err:
            promotion.rollback("production", ledger=paths["ledger"], queue=paths["queue"])
        assert "rollback production to good-a" in str(err.value) and expected in str(err.value)
        assert rows(paths) == before
    finally:
        shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(model.with_name("a-moved"), ignore_errors=True)
        saved.rename(model)
    assert promotion.rollback("production", ledger=paths["ledger"], queue=paths["queue"]).deployment.variant == "good-a"  # restored: allowed again


def test_rollback_with_nothing_promoted_is_a_clear_error(release_run, paths):
    with pytest.raises(LedgerError, match="no release ledger"):
        promotion.rollback("production", ledger=paths["ledger"])
    gate(release_run, "dev", paths)
    with pytest.raises(LedgerError, match=r"nothing was promoted to production yet \(evalsuite promote VARIANT --to production\)"):
        promotion.rollback("production", ledger=paths["ledger"])


def test_promote_names_the_runs_variants_when_the_variant_is_unknown(release_run, paths):
    from evalsuite.errors import EvalsuiteError

    with pytest.raises(EvalsuiteError, match=r"'baseline' is not a judged variant of run .* \(its variants: good-a, good-b, tweak, bad\)"):
        promote(release_run, "baseline", "dev", paths)
