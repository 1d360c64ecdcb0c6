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


def test_score_table_keeps_a_few_versions_of_each_scorer(tmp_path):
    """Each new version (scorer key) of a scorer drops the scores of all but the most recent
    KEEP_SCORER_VERSIONS versions of that scorer, and scores no scorer claims; other scorers' scores
    and the versions in use stay. Using a known version again drops nothing."""
    from evalsuite.run.store import KEEP_SCORER_VERSIONS

    cache = GenerationCache(tmp_path / "cache.sqlite")
    try:
        cache.put_scores([("legacy-key", "in", "[0]")])  # stored before scorer keys were recorded
        cache.use_scorer_keys({"other": "o1"})
        cache.put_scores([("o1", "in", "[1]")])
        assert cache.get_scores("legacy-key", ["in"]) == {}
        versions = [f"a{i}" for i in range(KEEP_SCORER_VERSIONS + 2)]
        for i, key in enumerate(versions):
            cache.use_scorer_keys({"a": key, "other": "o1"})
            cache.put_scores([(key, f"in{j}", "[2]") for j in range(10)])
            alive = [k for k in versions[: i + 1] if cache.get_scores(k, ["in0"])]
            assert alive == versions[max(0, i + 1 - KEEP_SCORER_VERSIONS) : i + 1], (i, alive)
        assert cache.count_scores() == 10 * KEEP_SCORER_VERSIONS + 1
        assert cache.get_scores("o1", ["in"]) == {"in": "[1]"}
        # an old version used again becomes the newest; nothing is dropped when no key is new
        assert cache.use_scorer_keys({"a": versions[-KEEP_SCORER_VERSIONS]}) == 0
        assert cache.use_scorer_keys({"a": "a-new"}) == 10  # drops the least recently used, versions[-2]
        assert cache.get_scores(versions[-KEEP_SCORER_VERSIONS], ["in0"]) and not cache.get_scores(versions[-2], ["in0"])
    finally:
        cache.close()
