"""Score reuse (evalsuite/scoring/reuse.py): a warm rescoring calls no scorer and changes nothing;
a changed case, output or scorer is rescored, and only where it matters."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path

import pytest

from evalsuite.backends.base import Generation
from evalsuite.cases.caseset import Case, all_cases, load_cases
from evalsuite.scoring import reuse
from evalsuite.scoring.base import Score, ScoreInput
from evalsuite.scoring.run import load_scorers, score_generations
from evalsuite.run.store import GenerationCache

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cases():
    return [c for c in all_cases(load_cases([REPO / "casesets"])) if "example" in c.tags]


def outputs(cases, changed: dict | None = None) -> list[Generation]:
    """Two samples per case for a baseline and two variants (var2 says what var says); the code
    completion answers with its reference, so its tests pass in the sandbox."""
    changed = changed or {}
    gens = []
    for c in cases:
        text = f"```python\n{c.expect.reference}\n```" if c.id == "code-ex-completion-001" else f"An answer to {c.id} [doc-1]."
        for s in range(2):
            gens.append(Generation(c.id, "base", s, text=text, new_tokens=3, extra={"token_ids": [1, 2, s]}))
            for v in ("var", "var2"):
                gens.append(Generation(c.id, v, s, text=changed.get((v, c.id, s), text), new_tokens=3, extra={"token_ids": [1, 2, s]}))
    return gens


def counting(specs):
    """The specs with each function wrapped to count its calls (name, module and qualname kept, so
    the scorer keys are those of the real scorers)."""
    calls: Counter = Counter()

    def wrap(fn, name):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return counted

    return [dataclasses.replace(s, fn=wrap(s.fn, s.name)) for s in specs], calls


@pytest.fixture
def cache(tmp_path):
    c = GenerationCache(tmp_path / "cache.sqlite")
    yield c
    c.close()


def rows(records):
    return [r.to_dict() for r in records]


def test_every_score_input_field_is_keyed_or_declared_unread():
    """A new ScoreInput field must be put in the key (or declared unread), or reuse could go stale."""
    assert reuse.check_fields() == []


def test_warm_rescoring_calls_no_scorer_and_equals_the_cold_scores(cases, cache):
    specs, calls = counting(load_scorers())
    cold = score_generations(cases, outputs(cases), "base", specs, cache=cache)
    assert calls["code.pass"] > 0 and calls["code.pass@k"] > 0 and calls["json.valid"] > 0  # code execution included
    assert cache.count_scores() > 0
    calls.clear()
    warm = score_generations(cases, outputs(cases), "base", specs, cache=cache)
    assert sum(calls.values()) == 0, calls
    assert rows(warm) == rows(cold)
    # and both equal scoring without any cache (the stored form loses nothing)
    plain = score_generations(cases, outputs(cases), "base", load_scorers())
    assert [(r.variant, r.case_id, r.sample, r.metric, r.value, r.passed) for r in plain] == [(r.variant, r.case_id, r.sample, r.metric, r.value, r.passed) for r in warm]


def test_identical_outputs_are_scored_once(cases, cache):
    """Variant and sample are not in the key: a variant saying what another said reuses its scores."""
    specs, calls = counting([s for s in load_scorers() if s.name == "citations.valid"])
    score_generations(cases, outputs(cases), "base", specs, cache=cache)
    applicable = [c for c in cases if specs[0].applies(c)]
    # per case, 2 samples of base and 2 of var (base's have no baseline text, var's do); var2 reuses var's
    assert calls["citations.valid"] == 4 * len(applicable)


def test_changed_expectation_rescores_exactly_that_cases_outputs(cases, cache):
    specs, calls = counting(load_scorers())
    score_generations(cases, outputs(cases), "base", specs, cache=cache)
    calls.clear()
    target = next(c for c in cases if c.id == "kb-ex-grounded-001")
    raw = dict(target.raw, expect=dict(target.raw["expect"], required_terms=[{"term": "24 hours"}]))
    edited = Case.build(raw, context=target.context, json_schema=target.json_schema, glossary=target.glossary, source=target.source, line=target.line)
    assert edited.digest() != target.digest()
    changed_cases = [edited if c.id == target.id else c for c in cases]
    seen = []
    specs2 = [dataclasses.replace(s, fn=_recording(s, seen)) for s in specs]
    score_generations(changed_cases, outputs(changed_cases), "base", specs2, cache=cache)
    assert seen, "the edited case was not rescored"
    assert {case_id for _, case_id in seen} == {target.id}
    # per-output scorers: the 4 distinct inputs of the case (base and var, 2 samples; var2 reuses var's);
    # case-level scorers: once for base and once for var
    expected = {s.name: 4 if s.level == "output" else 2 for s in specs if s.applies(edited)}
    assert Counter(name for name, _ in seen) == Counter(expected)


def _recording(spec, seen):
    fn = spec.fn

    @functools.wraps(fn)
    def rec(*args):
        case = args[0].case if spec.level == "output" else args[0]
        seen.append((spec.name, case.id))
        return fn(*args)

    return rec


def test_changed_scorer_config_or_version_rescores_only_that_scorer(cases, cache):
    specs, calls = counting(load_scorers())
    score_generations(cases, outputs(cases), "base", specs, cache=cache)
    for change in ({"args": {"min_words": 99, "min_cjk": 99}}, {"version": "2"}):
        calls.clear()
        changed = [dataclasses.replace(s, **change) if s.name == "grounding.leak" else s for s in specs]
        assert reuse.scorer_key(changed[[s.name for s in specs].index("grounding.leak")]) != reuse.scorer_key(next(s for s in specs if s.name == "grounding.leak"))
        score_generations(cases, outputs(cases), "base", changed, cache=cache)
        assert set(calls) == {"grounding.leak"}, (change, calls)
        leak = next(s for s in specs if s.name == "grounding.leak")
        assert calls["grounding.leak"] == 4 * sum(1 for c in cases if leak.applies(c))


def test_scorer_source_change_invalidates(cases, monkeypatch):
    """The scoring code is part of every scorer key: an edited scorer module is a new scorer."""
    spec = next(s for s in load_scorers() if s.name == "json.valid")
    before = reuse.scorer_key(spec)
    monkeypatch.setattr(reuse, "code_digest", lambda: "edited")
    reuse._environment.cache_clear()
    try:
        assert reuse.scorer_key(spec) != before
    finally:
        monkeypatch.undo()
        reuse._environment.cache_clear()
    assert reuse.scorer_key(spec) == before


def test_changed_output_rescores_it_and_the_drift_that_depends_on_it(cases, cache):
    specs, _ = counting(load_scorers())
    score_generations(cases, outputs(cases), "base", specs, cache=cache)
    seen = []
    specs2 = [dataclasses.replace(s, fn=_recording(s, seen)) for s in specs]
    # only var's sample 1 of the brand card changes (var2 keeps the old text: reused)
    gens = outputs(cases, {("var", "brand-ex-card-001", 1): '{"name": "changed"}'})
    score_generations(cases, gens, "base", specs2, cache=cache)
    assert {case_id for _, case_id in seen} == {"brand-ex-card-001"}
    card = next(c for c in cases if c.id == "brand-ex-card-001")
    assert Counter(n for n, _ in seen) == Counter({s.name: 1 for s in specs if s.applies(card)})


@pytest.mark.parametrize(
    "scores, stored",
    [
        ([Score("code.pass", 1.0, True, True, {"status": "passed"})], True),
        ([Score("code.pass", None, None, True, {"status": "error", "reason": "sandbox could not start"})], False),
        ([Score("code.pass@1", 0.5, None, True, {"n": 1, "sandbox_errors": 1})], False),
        ([Score("code.mutants_caught", None, None, True, {"reason": "sandbox error"})], False),
        ([], True),
    ],
)
def test_sandbox_failures_are_not_stored(scores, stored):
    assert reuse.storable(scores) is stored


def test_failing_scorer_is_retried_next_time(cases, cache):
    boom = Counter()

    def explode(inp: ScoreInput):
        boom["n"] += 1
        raise RuntimeError("broken scorer")

    spec = dataclasses.replace(next(s for s in load_scorers() if s.name == "json.valid"), fn=explode)
    first = score_generations(cases, outputs(cases), "base", [spec], cache=cache)
    n = boom["n"]
    assert n > 0 and any(r.metric == "json.valid.scorer_error" for r in first)
    score_generations(cases, outputs(cases), "base", [spec], cache=cache)
    assert boom["n"] == 2 * n


@pytest.mark.parametrize("field, value", [("text", "other"), ("error", "boom"), ("tokens", (9,)), ("baseline_text", "b"), ("baseline_tokens", (9,))])
def test_input_key_follows_every_keyed_field(cases, field, value):
    inp = ScoreInput(case=cases[0], text="t", sample=0, variant="v", tokens=(1,))
    d = cases[0].digest()
    assert reuse.input_key(d, dataclasses.replace(inp, **{field: value})) != reuse.input_key(d, inp)
    assert reuse.input_key(d, dataclasses.replace(inp, sample=3, variant="w")) == reuse.input_key(d, inp)
    assert reuse.input_key(cases[1].digest(), inp) != reuse.input_key(d, inp)
