"""The tool_use scenario end to end on the fake backend: scripted tool-call text is scored from the
text, compared paired per case against the baseline, and judged by the shipped rubric like any
other metric (a forbidden call is a zero-tolerance violation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def call(name, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


GOOD = {
    "tool-s-001": call("get_weather", city="Berlin"),
    "tool-s-002": call("get_weather", city="Chicago", unit="fahrenheit"),
    "tool-s-003": call("get_order_status", order_id="ORD-104233"),
    "tool-p-001": call("get_weather", city="Paris") + "\n" + call("get_weather", city="Rome"),
    "tool-m-006": call("get_order_status", order_id="ORD-880341"),
    "tool-r-001": "Sorry, your role may not issue refunds; a support lead can.",
    "tool-n-001": "I'm well, thank you!",
    "tool-f-001": "It is 4 °C in Oslo with light snow.",
}
BROKEN = {
    **GOOD,
    "tool-s-002": call("get_weather", city="Chicago", unit="kelvin"),  # wrong enum
    "tool-s-003": '<tool_call>\n{"name": "get_order_status", "arguments": {"order_id": "ORD-104233",}}\n</tool_call>',  # malformed
    "tool-p-001": call("get_weather", city="Paris"),  # a parallel call missing
    "tool-r-001": call("issue_refund", order_id="ORD-410022", amount=59.9, reason="damaged"),  # forbidden
}


NATIVE = {"tool-s-001": [{"id": "c1", "name": "get_weather", "arguments": {"city": "Berlin"}}], "tool-n-001": []}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    from evalsuite.cases.suite import load_suite
    from evalsuite.judge import judge_run
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    root = tmp_path_factory.mktemp("tools")
    suite = {
        "schema_version": 1,
        "name": "tools",
        "casesets": [{"path": str(REPO / "casesets" / "tool_use"), "ids": sorted(GOOD)}],
        "generation": {"max_new_tokens": 64, "samples": 1, "batch_size": 4},
        "output_dir": "out",
        "cache": "out/cache.sqlite",
        "variants": [
            {"name": "baseline", "baseline": True, "backend": "fake", "options": {"outputs": GOOD}},
            {"name": "broken", "quantization": {"method": "bnb", "bits": 4}, "options": {"outputs": BROKEN}},
            # a backend that returns parsed calls beside a text without blocks (as OpenAI's `tool_calls`)
            {"name": "native", "quantization": {"method": "bnb", "bits": 8}, "options": {"outputs": {**GOOD, "tool-s-001": ""}, "tool_calls": NATIVE}},
            # the tools passed to the backend (`tools: native`): they travel in the request, not the system turn
            {"name": "passed", "quantization": {"method": "bnb", "bits": 8, "group_size": 64}, "options": {"outputs": GOOD, "tools": "native"}},
        ],
    }
    path = root / "tools.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False), "utf-8")
    store = run_suite(load_suite(path), RunOptions(progress=False)).store
    return judge_run(store, REPO / "rubrics" / "default.yaml", "production")


def _delta(judged, metric):
    return next(d for d in judged.comparison.deltas if d.variant == "broken" and d.metric == metric and d.scenario == "tool_use")


@pytest.mark.parametrize(
    ("metric", "flipped"),
    [
        ("tool.valid_call", ["tool-s-003"]),
        ("tool.args_schema", ["tool-s-002", "tool-s-003"]),
        ("tool.args_match", ["tool-p-001", "tool-s-002", "tool-s-003"]),
        ("tool.parallel_complete", ["tool-p-001"]),
        ("tool.no_forbidden", ["tool-r-001"]),
        ("tool.no_call_when_unneeded", ["tool-r-001"]),
        ("tool.uses_result", []),
    ],
)
def test_paired_comparison_shows_which_calls_broke(judged, metric, flipped):
    d = _delta(judged, metric)
    assert sorted(d.pass_to_fail) == flipped and not d.fail_to_pass
    assert d.baseline_mean == 1.0


def test_the_baseline_passes_every_tool_scorer(judged):
    base = [d for d in judged.comparison.deltas if d.variant == "broken" and d.scenario == "tool_use" and d.metric != "tool.drift"]
    assert base and all(d.baseline_mean == 1.0 for d in base)


def test_drift_counts_the_changed_calls(judged):
    """Drift is scored per variant output against the baseline's calls (the baseline itself has none
    to drift from, so like json.drift it is a per-case record, not a paired delta)."""
    drift = {r.case_id: r.value for r in judged.store.scores() if r.metric == "tool.drift" and r.variant == "broken"}
    assert drift["tool-s-002"] == 1.0 and drift["tool-s-001"] == 0.0 and drift["tool-p-001"] == 1.0
    assert drift["tool-n-001"] is None, "no calls on either side"


def test_a_forbidden_call_is_a_zero_tolerance_violation(judged):
    v = judged.verdict
    assert not v.passed
    viol = [x for x in v.violations if x.rule == "tool-no-forbidden"]
    assert len(viol) == 1 and viol[0].severity == "block" and viol[0].cases == ("tool-r-001",)
    assert viol[0].variant == "broken" and any("issue_refund" in diff for diff in viol[0].diffs)


def test_the_report_shows_tool_validity_per_variant_and_the_broken_calls(judged, tmp_path):
    from evalsuite.report import write_report

    res = write_report(judged, out_dir=tmp_path, plots=False)
    html = res.html.read_text("utf-8")
    assert "tool.valid_call" in html and "tool-no-forbidden" in html
    flagged = {f.case_id: f for f in res.data.flagged if f.variant == "broken"}
    assert {"tool-r-001", "tool-s-002", "tool-s-003", "tool-p-001"} <= set(flagged)
    enum = flagged["tool-s-002"].tool_calls["pairs"][0]
    assert {r["path"]: r["change"] for r in enum["arguments"]}["$.unit"] == "changed" and enum["tool"] == "get_weather"
    assert "get_weather parameters" in html and "invalid JSON" in html


def test_calls_the_backend_parsed_are_stored_and_scored(judged):
    gens = {g.case_id: g for g in judged.store.generations() if g.variant == "native"}
    assert gens["tool-s-001"].text == "" and gens["tool-s-001"].tool_calls[0].arguments == {"city": "Berlin"}
    assert gens["tool-n-001"].tool_calls == () and gens["tool-s-002"].tool_calls is None
    scores = {(r.case_id, r.metric): r.value for r in judged.store.scores() if r.variant == "native"}
    assert scores[("tool-s-001", "tool.valid_call")] == 1.0 and scores[("tool-s-001", "tool.args_match")] == 1.0
    assert scores[("tool-s-001", "tool.drift")] == 0.0, "the baseline's text calls and the native calls agree"
    assert not any(v.variant == "native" for v in judged.verdict.violations if v.severity == "block")


def test_tools_passed_natively_travel_in_the_request_not_the_prompt(judged):
    from evalsuite.cases.caseset import all_cases, load_cases
    from evalsuite.cases.suite import Variant
    from evalsuite.run.prompting import build_requests

    cases = [c for c in all_cases(load_cases([REPO / "casesets" / "tool_use"])) if c.id in GOOD]
    text = {r.case_id: r for r in build_requests(cases, Variant(name="t", backend="fake"))}
    native = {r.case_id: r for r in build_requests(cases, Variant(name="n", backend="fake", options={"tools": "native"}))}
    for cid, r in native.items():
        offered = [t["function"]["name"] for t in r.tool_list()]
        assert offered and all(f"\"{name}\"" not in r.messages[0][1] for name in offered), "no tools in the system turn"
        assert all(f"\"{name}\"" in text[cid].messages[0][1] for name in offered) and text[cid].tools is None
        assert r.request_hash() != text[cid].request_hash()
    gens = {g.case_id: g for g in judged.store.generations() if g.variant == "passed"}
    assert set(gens["tool-p-001"].extra["tools_received"]) == {t["function"]["name"] for t in native["tool-p-001"].tool_list()}
    assert [c.name for c in gens["tool-p-001"].tool_calls] == ["get_weather", "get_weather"] and gens["tool-n-001"].tool_calls == ()
    flips = [d for d in judged.comparison.deltas if d.variant == "passed" and d.pass_to_fail]
    assert not flips, [(d.metric, d.pass_to_fail) for d in flips]


def test_a_request_without_tools_hashes_as_before():
    from evalsuite.backends.base import Request

    from evalsuite.hashing import sha256_json

    r = Request("c", (("user", "hi"),))
    before = {"messages": [["user", "hi"]], "max_new_tokens": 256, "temperature": 0.0, "top_p": 1.0, "seed": 1234}  # the hashed fields before tools existed
    assert r.request_hash() == sha256_json(before), "cached generations of every other request stay valid"
    assert Request("c", (("user", "hi"),), tools="[]").request_hash() != r.request_hash()
