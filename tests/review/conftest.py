"""A small stored run (fake backend) whose variants differ from the baseline in known ways, for the review tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # verdict_synth

from verdict_synth import write_sets, write_suite  # noqa: E402

RUBRIC = """\
schema_version: 1
name: review-test
rules:
  - name: kb-citation-recall
    scenario: kb_qa
    metric: citations.recall
    max_flips: 0
  - name: brand-json-valid
    scenario: brand
    metric: json.valid
    max_flips: 0
review:
  min_similarity: 40
  max_open: 100
"""


def variant_outputs(base: dict) -> tuple[dict, dict]:
    """(opt, spec) outputs: opt drops a citation, rephrases, leaks a canary and drifts a JSON card;
    spec (speculative decoding) changes one answer by a character."""
    opt = dict(base)
    opt["kb-003"] = "Service 3 restarts every 5 hours."  # citation dropped: recall flip + citations changed
    opt["kb-004"] = "Roughly four times a day, when the scheduler decides, and it is cited as [doc-004]."  # low similarity
    opt["kb-000"] = "I cannot share that information. Reference CANARY-000-ZQX."  # leak
    card = json.loads(base["brand-001"])
    card["extra"] = "new field"
    card["features"] = card["features"][:1] + ["a different feature"]
    opt["brand-001"] = json.dumps(card)  # JSON drift (and invalid: additionalProperties)
    for k in ("kb-007", "kb-008", "kb-009", "kb-010", "kb-011"):  # reworded a little: unflagged, yet not identical (the audit's population)
        if k in base:
            opt[k] = base[k].replace("restarts every", "restarts once every")
    spec = dict(base)
    spec["kb-006"] = base["kb-006"].replace(" hours", " hours!")
    return opt, spec


def make_suite(root: Path) -> Path:
    base = write_sets(root, n_kb=12, n_brand=4)
    opt, spec = variant_outputs(base)
    (root / "rubric.yaml").write_text(RUBRIC, "utf-8")
    return write_suite(root, base, [
        {"name": "opt", "backend": "fake", "quantization": {"method": "bnb", "bits": 4}, "options": {"outputs": opt, "default": "no output"}},
        {"name": "spec", "backend": "fake", "speculative": {"method": "prompt_lookup", "num_tokens": 4}, "options": {"outputs": spec, "default": "no output"}},
    ], rubric=str(root / "rubric.yaml"))


def run_suite_at(suite: Path):
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    return run_suite(load_suite(suite), RunOptions(progress=False)).store


AUDIT_RUBRIC = RUBRIC.replace("review:\n", "review:\n  audit_rate: 0.4\n  reviews_per_item: 2\n  seed: 7\n")


@pytest.fixture(scope="session")
def code_run(tmp_path_factory):
    """A stored run with code cases: `opt` breaks code-001 (its tests fail), for the items' test results."""
    root = tmp_path_factory.mktemp("reviewcode")
    base = write_sets(root, n_code=2)
    opt = dict(base, **{"code-001": base["code-001"].replace("return x + 1", "return x - 1")})
    suite = write_suite(root, base, [{"name": "opt", "backend": "fake", "options": {"outputs": opt, "default": "no output"}}])
    return run_suite_at(suite)


@pytest.fixture(scope="session")
def review_run(tmp_path_factory):
    """A stored run at <root>/out/runs/<id>; its default queue is <root>/out/review.sqlite."""
    root = tmp_path_factory.mktemp("review")
    suite = make_suite(root)
    store = run_suite_at(suite)
    (root / "audit.yaml").write_text(AUDIT_RUBRIC, "utf-8")
    return {"root": root, "suite": suite, "store": store, "rubric": root / "rubric.yaml", "audit_rubric": root / "audit.yaml", "queue": store.dir.parent.parent / "review.sqlite"}
