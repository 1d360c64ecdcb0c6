"""Exact and near duplicates collapsed with MinHash; a seeded sample of N per stratum."""

from __future__ import annotations

from evalsuite.cases.traffic.infer import infer
from evalsuite.cases.traffic.records import TrafficRequest
from evalsuite.cases.traffic.sample import Candidate, dedup, stratified

LONG = (
    "Write a Python function that reads the nightly backup report, groups the failed jobs by region and team, sorts them by size, and returns the ten largest with their owners; "
    "skip the jobs that were retried and succeeded later, treat a missing region as unknown, and write a docstring and three unit tests for the edge cases"
)


def cand(text, line=1):
    r = TrafficRequest(source="t", line=line, messages=(("user", text),), answer="```python\n```")
    return Candidate(request=r, inferred=infer(r), text=text)


def test_exact_and_near_duplicates_collapsed_first_kept():
    items = [cand(LONG, 1), cand("  " + LONG.upper() + " ", 2), cand(LONG.replace("ten largest", "ten biggest"), 3), cand("Write a Python function for a quick sort", 4)]
    got = dedup(items, threshold=0.8)
    assert (got.exact, got.near) == (1, 1)
    assert [c.request.line for c in got.kept] == [1, 4]


def test_different_requests_are_kept():
    items = [cand(f"Write a Python function number {i} about {w}", i) for i, w in enumerate(("sorting lists", "parsing dates", "reading csv files", "http retries"))]
    assert len(dedup(items).kept) == 4


def test_stratified_sample_is_seeded_and_capped_per_stratum():
    items = [cand(f"Write a Python function {i} " + "x" * (i % 3) * 150, i) for i in range(60)]
    one, strata = stratified(items, per_stratum=5, seed=1)
    again, _ = stratified(items, per_stratum=5, seed=1)
    other, _ = stratified(items, per_stratum=5, seed=2)
    assert [c.request.line for c in one] == [c.request.line for c in again] != [c.request.line for c in other]
    assert strata == {("code", "en", "short"): (40, 5), ("code", "en", "medium"): (20, 5)}
    assert len(one) == 10
