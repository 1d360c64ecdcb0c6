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


# ---------------------------------------------------------------------------------------------
# the run directory: generations kept in memory, batched cache reads and writes, scorer keys once


def _gen(case: str, variant: str = "v", sample: int = 0, error: str | None = None, text: str = "ok"):
    from evalsuite.backends.base import Generation

    return Generation(case, variant, sample, text="" if error else text, error=error, request_hash=f"h-{case}", fingerprint="fp")


def test_a_writer_does_not_read_back_what_it_appended(tmp_path, monkeypatch):
    """The store's own appends extend what it read; another writer's appends make it read again."""
    from evalsuite.run.store import RunStore

    store = RunStore.create(tmp_path / "runs", "s", {"name": "s"}, {"case_digest": "d"})
    reads = []
    real = RunStore.iter_generations
    monkeypatch.setattr(RunStore, "iter_generations", lambda self: (reads.append(1), real(self))[1])
    assert store.generations() == [] and len(reads) == 1
    for i in range(50):
        store.append([_gen(f"c{i:02d}", error="boom")])
        store.append([_gen(f"c{i:02d}")])  # a later success replaces the error, in place
    gens = store.generations()
    assert len(reads) == 1, "its own appends are not read back"
    assert [g.case_id for g in gens] == [f"c{i:02d}" for i in range(50)] and all(g.ok for g in gens)
    assert [g.case_id for g in store.lookup([("v", "c07", 0), ("v", "nope", 0)])] == ["c07"]
    RunStore(store.dir).append([_gen("other")])  # another writer (a second process, or object)
    assert [g.case_id for g in store.generations()][-1] == "other" and len(reads) == 2
    assert store.generations() == RunStore(store.dir).generations()


def test_cache_reads_and_writes_a_batch_at_once(tmp_path):
    cache = GenerationCache(tmp_path / "cache.sqlite")
    try:
        gens = [_gen(f"c{i:04d}") for i in range(1100)] + [_gen("bad", error="boom")]
        cache.put_many(gens)
        assert cache.count() == 1100, "errors are not cached"
        keys = [(f"h-c{i:04d}", 0) for i in range(0, 1100, 3)] + [("h-c0001", 1), ("h-bad", 0)]
        got = cache.get_many("fp", keys)
        assert set(got) == {(f"h-c{i:04d}", 0) for i in range(0, 1100, 3)}
        assert got[("h-c0003", 0)]["case_id"] == "c0003"
        assert cache.get_many("other-fp", keys) == {}
    finally:
        cache.close()


def test_scorer_keys_are_recorded_once_per_connection(tmp_path, monkeypatch):
    cache = GenerationCache(tmp_path / "cache.sqlite")
    try:
        writes = []
        db = cache._db
        monkeypatch.setattr(cache, "_db", type("DB", (), {"__getattr__": lambda s, n: getattr(db, n),
                                                          "executemany": lambda s, q, rows: (writes.append(q), db.executemany(q, rows))[1]})())
        recorded = lambda: len([q for q in writes if q.startswith("INSERT") and "scorer_keys" in q])  # noqa: E731
        for _ in range(5):  # an adaptive run scores batch after batch with the same scorers
            cache.use_scorer_keys({"a": "a1", "b": "b1"})
        assert recorded() == 1
        cache.use_scorer_keys({"a": "a2", "b": "b1"})  # a new version is recorded
        cache.use_scorer_keys({"a": "a1"})  # and an older one used again
        assert recorded() == 3
    finally:
        cache.close()
