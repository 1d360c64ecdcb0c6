"""Planted regressions: damage functions, reproducible case choice, and the acceptance check that the
production gate catches each degrader at a 10% rate and names the right rule."""

from __future__ import annotations

import json

import pytest

from evalsuite.backends.base import Request
from evalsuite.backends.fake import FakeBackend
from evalsuite.cases.caseset import load_caseset
from evalsuite.run.degrade import DAMAGE, choose_cases, parse_spec, wrap_backend
from evalsuite.errors import EvalsuiteError
from evalsuite.run.prompting import render_messages
from evalsuite.cases.suite import Variant
from verdict_synth import write_sets, write_suite


@pytest.mark.parametrize(
    "kind, text, hints, check",
    [
        ("drop_citations", "It lasts 12 hours [ex-vpn]. Costs 29 USD [1]【2】 (source: ex-pricing).", {}, lambda t: t == "It lasts 12 hours. Costs 29 USD."),
        ("corrupt_json", '{"product": "Nimbus Vault", "features": ["a", "b"]}', {}, lambda t: _not_json(t)),
        ("corrupt_json", 'Here:\n```json\n{"a": 1, "b": [1, 2]}\n```', {}, lambda t: _not_json(t)),
        ("forbidden_terms", '{"product": "Nimbus Vault"}', {"term_pairs": [("Nimbus Vault", "NimbusVault")]}, lambda t: t == '{"product": "NimbusVault"}'),
        ("forbidden_terms", '{"product": "Other"}', {"term_pairs": [], "forbidden": ["N-Vault"]}, lambda t: t == '{"product": "N-Vault Other"}'),
        ("break_code", "```python\ndef f(x):\n    \"\"\"Doc.\"\"\"\n    return x\n```", {"entry_point": "f"}, lambda t: "def f(x):\n    raise RuntimeError" in t and _raises(t)),
        ("break_code", "```python\ndef helper():\n    return 1\n\ndef f(x):\n    return helper() + x\n```", {"entry_point": "f"}, lambda t: t.count("raise RuntimeError") == 1 and "def f(x):\n    raise" in t),
        ("leak_canary", "I cannot share that.", {"canaries": ["CANARY-7Q2X-SALARY"], "restricted_text": "Band E3 pays 240k."}, lambda t: "CANARY-7Q2X-SALARY" in t and "Band E3" in t),
        ("leak_canary", "I cannot share that.", {}, lambda t: t == "I cannot share that."),
    ],
)
def test_damage_functions(kind, text, hints, check):
    out = DAMAGE[kind](text, hints)
    assert check(out), out


def _not_json(t: str) -> bool:
    from evalsuite.scoring.jsonformat import extract_json

    ex = extract_json(t)
    return not ex.ok or not isinstance(ex.value, dict)


def _raises(t: str) -> bool:
    code = t.split("```python\n")[1].split("```")[0]
    ns: dict = {}
    exec(compile(code, "<t>", "exec"), ns)  # noqa: S102 - our own fixed snippet
    try:
        ns["f"](1)
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize(
    "spec, error",
    [
        ({"kind": "drop_citation"}, "unknown kind 'drop_citation' (did you mean 'drop_citations'?)"),
        ({"kind": "corrupt_json", "rate": 1.5}, "rate: expected a share between 0 and 1"),
        ({"kind": "corrupt_json", "sed": 1}, "unknown field(s) ['sed']"),
        ({"kind": "corrupt_json", "seed": "x"}, "seed: expected an integer"),
    ],
)
def test_bad_specs(spec, error):
    with pytest.raises(EvalsuiteError) as ei:
        parse_spec(spec)
    assert error in str(ei.value)


@pytest.fixture(scope="module")
def kb_cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb")
    write_sets(root, n_kb=100)
    return list(load_caseset(root / "sets" / "kb.yaml").cases)


def test_choice_is_exact_share_reproducible_and_seeded(kb_cases):
    spec = {"kind": "drop_citations", "rate": 0.1, "seed": 0}
    a, b = choose_cases(kb_cases, spec), choose_cases(list(reversed(kb_cases)), spec)
    grounded = [c for c in kb_cases if c.expect.citations]
    assert a == b and len(a) == round(0.1 * len(grounded)) and all(c in {g.id for g in grounded} for c in a)
    assert choose_cases(kb_cases, {**spec, "seed": 1}) != a
    assert len(choose_cases(kb_cases, {"kind": "leak_canary", "rate": 0.25})) == 5  # 20 restricted cases
    assert choose_cases(kb_cases, {"kind": "corrupt_json", "rate": 0.5}) == set()  # default scenario brand: none here


def test_wrapper_delegates_damages_chosen_cases_and_changes_fingerprint(kb_cases):
    outputs = {c.id: f"Answer [{c.context[0].id}]." for c in kb_cases}
    base = Variant("v", options={"outputs": outputs})
    deg = Variant("v", options={"outputs": outputs}, degrade={"kind": "drop_citations", "rate": 0.2, "seed": 5})
    inner = FakeBackend(deg)
    be = wrap_backend(inner, deg, kb_cases)
    assert be.fingerprint() != inner.fingerprint() != FakeBackend(base).fingerprint()
    assert wrap_backend(FakeBackend(deg), Variant("v", degrade={"kind": "drop_citations", "rate": 0.3}), kb_cases).fingerprint() != be.fingerprint()
    reqs = [Request(c.id, render_messages(c), s) for c in kb_cases for s in range(2)]
    gens = be.generate(reqs)
    changed = {g.case_id for g in gens if g.text != outputs[g.case_id]}
    assert changed == be.chosen and len(changed) == 14  # 20% of the 70 grounded cases, both samples
    assert all(g.extra.get("degraded") == "drop_citations" for g in gens if g.case_id in changed)


# --------------------------------------------------------------------------- acceptance

DEGRADERS = {
    "drop_citations": "kb-citation-recall",
    "corrupt_json": "brand-json-valid",
    "forbidden_terms": "brand-forbidden-terms",
    "break_code": "code-unit-tests",
    "leak_canary": "kb-no-new-leaks",
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory, repo_root=None):
    """One run: ~shipped-size case sets (100 kb_qa, 75 code, 80 brand), a noise rerun, and every
    degrader at 10% on its scenario; judged at the shipped production thresholds."""
    from pathlib import Path

    from evalsuite.judge import judge_run
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    repo = Path(__file__).resolve().parents[1]
    root = tmp_path_factory.mktemp("planted")
    outputs = write_sets(root, n_kb=100, n_code=75, n_brand=80)
    variants = [{"name": "rerun", "noise": True}] + [{"name": f"deg-{k}", "degrade": {"kind": k, "rate": 0.1, "seed": 0}} for k in DEGRADERS]
    store = run_suite(load_suite(write_suite(root, outputs, variants)), RunOptions(progress=False)).store
    return judge_run(store, repo / "rubrics" / "default.yaml", "production", judge_noise=True).verdict


@pytest.mark.parametrize("kind, rule", sorted(DEGRADERS.items()))
def test_production_gate_catches_each_degrader_at_10_percent(planted, kind, rule):
    failed = planted.failed_rules(f"deg-{kind}")
    assert rule in failed, failed
    viol = next(v for v in planted.violations if v.variant == f"deg-{kind}" and v.rule == rule)
    assert viol.cases and viol.diffs and viol.numbers["pass_to_fail"] >= 1 and viol.numbers["fail_to_pass"] == 0
    # only the planted scenario regresses
    scen = {"drop_citations": "kb_qa", "leak_canary": "kb_qa", "break_code": "code"}.get(kind, "brand")
    assert {v.scenario for v in planted.violations if v.variant == f"deg-{kind}"} == {scen}


def test_noise_rerun_passes_and_the_verdict_fails_overall(planted):
    assert planted.failed_rules("rerun") == []
    assert not planted.passed and planted.exit_code == 1
    json.dumps(planted.to_dict())  # the verdict is plain data
