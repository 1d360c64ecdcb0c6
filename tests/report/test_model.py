"""What the report shows, computed from a run: the verdict grid, flagged cases and evidence helpers."""

from __future__ import annotations

import json

import pytest

from evalsuite.report.model import default_report_dir, scenarios_of, verdict_grid
from evalsuite.scoring.evidence import flatten_json, json_drift_rows


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"a": 1, "b": {"c": [1, 2]}}, {"$.a": 1, "$.b.c[0]": 1, "$.b.c[1]": 2}),
        ([], {"$": []}),
        ({"a": {}}, {"$.a": {}}),
        ("x", {"$": "x"}),
    ],
)
def test_flatten_json(value, expected):
    assert flatten_json(value) == expected


def test_json_drift_rows_by_key():
    b = json.dumps({"product": "Nimbus Vault", "features": ["a", "b"], "tagline": "t"})
    v = "```json\n" + json.dumps({"product": "NimbusVault", "features": ["a"], "extra": 1}) + "\n```"
    out = json_drift_rows(b, v)
    by = {r["path"]: r["change"] for r in out["rows"]}
    assert by == {"$.product": "changed", "$.features[0]": "same", "$.features[1]": "missing", "$.tagline": "missing", "$.extra": "added"}
    assert out["changed"] == 4 and out["baseline_error"] is None and out["variant_error"] is None
    broken = json_drift_rows(b, '{"product": "Nimbus')
    assert broken["variant_error"] and all(r["change"] == "unparsed" for r in broken["rows"])
    assert json_drift_rows("no json here", "nor here") is None


def test_grid_scenarios_come_from_the_verdict(report):
    v = report.data.verdict
    assert sorted(scenarios_of(v)) == ["brand", "code", "kb_qa"]
    grid = {g["variant"]: g for g in verdict_grid(v)}
    assert grid["nocite"]["cells"]["kb_qa"] == {"status": "fail", "fail": ["kb-citations"], "warn": []}
    assert grid["badcode"]["status"] == "warn" and grid["clean"]["status"] == "pass"
    assert grid["clean"]["cells"]["run"]["status"] == "ok"  # the reliability rule was checked and passed


def test_flagged_evidence(report):
    by = {(f.variant, f.case_id): f for f in report.data.flagged}
    code = next(f for f in by.values() if f.variant == "badcode")
    assert code.severity == "warn" and code.code["baseline"]["passed"] is True and code.code["variant"]["passed"] is False
    assert code.code["pass_at_k"][0]["metric"] == "code.pass@1" and code.code["pass_at_k"][0]["variant"] == 0.0
    cite = next(f for f in by.values() if f.variant == "nocite")
    assert cite.severity == "block" and cite.citations["variant_cited"] == [] and cite.citations["baseline_cited"] == cite.citations["gold"]
    assert any(s["metric"] == "citations.recall" and s["worse"] for s in cite.scores)
    js = next(f for f in by.values() if f.variant == "badjson")
    assert js.json_drift["variant_error"] and js.citations is None and js.code is None
    # severity order: failures first, warnings last
    sev = [f.severity for f in report.data.flagged]
    assert sev == sorted(sev, key=lambda s: {"block": 0, "warn": 1, "flip": 2}[s])


def test_default_report_dir(tmp_path):
    class S:
        dir = tmp_path / "reports" / "runs" / "r1"

    assert default_report_dir(S()) == tmp_path / "reports" / "r1"
    S.dir = tmp_path / "elsewhere" / "r2"
    assert str(default_report_dir(S())) == "reports/r2"
