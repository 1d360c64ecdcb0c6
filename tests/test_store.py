"""The cache's scores table (evalsuite/run/store.py): what score reuse stores and reads back."""

from __future__ import annotations

from evalsuite.run.store import GenerationCache


def test_scores_round_trip_in_bulk_and_survive_reopening(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = GenerationCache(path)
    rows = [("scorer-a", f"in{i:04d}", f"[{i}]") for i in range(1200)]  # more than one IN chunk (500)
    cache.put_scores(rows + [("scorer-b", "in0000", "[-1]")])
    got = cache.get_scores("scorer-a", [f"in{i:04d}" for i in range(0, 1300, 7)] + ["in0007"])
    assert got == {f"in{i:04d}": f"[{i}]" for i in range(0, 1200, 7)}  # missing keys are absent, duplicates harmless
    assert cache.get_scores("scorer-b", ["in0000", "in0001"]) == {"in0000": "[-1]"}
    assert cache.get_scores("scorer-c", []) == {}
    cache.put_scores([("scorer-a", "in0001", "[replaced]")])
    cache.close()
    again = GenerationCache(path)
    try:
        assert again.get_scores("scorer-a", ["in0001"]) == {"in0001": "[replaced]"}
        assert again.count_scores() == 1201 and again.count() == 0  # scores live beside, not among, generations
    finally:
        again.close()
