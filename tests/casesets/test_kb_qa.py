"""The knowledge-base QA case set (casesets/kb_qa): citations, canaries, abstention, perturbations, coverage.

The files are read as plain YAML for parametrizing (so one broken case fails one test, not the
collection), with context ids resolved against the shared document library, and through
`load_cases` once, to prove the library accepts them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from evalsuite.cases.caseset import all_cases, load_cases
from evalsuite.scoring.textnorm import contains_term

ROOT = Path(__file__).resolve().parents[2]
KB = ROOT / "casesets" / "kb_qa"
CJK = re.compile(r"[\u4e00-\u9fff]")
KINDS = ("grounded", "ungrounded", "restricted", "multiturn")
MIN_COUNTS = {"grounded": 40, "ungrounded": 20, "restricted": 20, "multiturn": 4}
MIN_ZH_SHARE = 0.20
MIN_PERTURBED_ORIGINALS = 15
MAX_EN_WORDS, MAX_ZH_CHARS = 90, 180  # short documents keep prompts small enough for a 135M model
DIFFICULTY = {"easy", "hard"}
FORMAT_TAGS = DIFFICULTY | {"perturbed", "leak", "fishing"}


def _yaml(path: Path):
    return yaml.safe_load(path.read_text("utf-8"))


def _load_files() -> tuple[dict[str, dict], list[dict]]:
    """(document library by id, every case with defaults applied and `_file`, `_docs` resolved)."""
    library: dict[str, dict] = {}
    files = sorted(KB.glob("*.yaml"))
    for f in files:
        data = _yaml(f)
        if data.get("kind") == "documents":
            for d in data["documents"]:
                library[d["id"]] = {**d, "_file": f.name}
        for d in data.get("documents", []) if "cases" in data else []:
            if isinstance(d, dict):
                library[d["id"]] = {**d, "_file": f.name}
    cases = []
    for f in files:
        data = _yaml(f)
        if "cases" not in data:
            continue
        for c in data["cases"]:
            case = {**data.get("defaults", {}), **c, "_file": f.name}
            case["_docs"] = [library.get(d) if isinstance(d, str) else d for d in case.get("context", [])]
            cases.append(case)
    return library, cases


LIBRARY, CASES = _load_files()
BY_ID = {c["id"]: c for c in CASES}
# the shipped examples.yaml illustrates the format; the coverage rules apply to the real case files
SUITE = [c for c in CASES if "example" not in c.get("tags", [])]
DOC_FILE_DOCS = [d for d in LIBRARY.values() if d["_file"] == "documents.yaml"]
ALL_DOCS = list(LIBRARY.values()) + [d for c in CASES for d in c["_docs"] if d is not None and d.get("id") not in LIBRARY]


def _ids(cases):
    return [c["id"] for c in cases]


def _of_kind(kind: str, cases=SUITE) -> list[dict]:
    return [c for c in cases if c.get("kind") == kind]


def _lang(x: dict) -> str:
    return x.get("lang", "en")


def _expect(case: dict) -> dict:
    return case.get("expect", {})


def _forms(term) -> list[str]:
    return [term] if isinstance(term, str) else [term["term"], *term.get("synonyms", [])]


def _contains(text: str, needle: str) -> bool:
    """Case-insensitive substring: the strict test for what must be absent."""
    return needle.casefold() in text.casefold()


def _has_term(text: str, term) -> bool:
    """Whether a required term (or a synonym) occurs as the scorers match it (word boundaries)."""
    return any(contains_term(text, f) for f in _forms(term))


def _ctx_ids(case: dict) -> list[str]:
    return [d if isinstance(d, str) else d["id"] for d in case.get("context", [])]


def _readable(doc: dict, role: str | None) -> bool:
    return doc.get("access", "public") != "restricted" or (role is not None and role in doc.get("roles", []))


def _question(case: dict) -> str:
    if "prompt" in case:
        return case["prompt"]
    return [m["content"] for m in case["messages"] if m["role"] == "user"][-1]


def _case_strings(case: dict) -> list[str]:
    """Every free text of a case that a canary must never appear in."""
    e = _expect(case)
    out = [case.get("prompt", ""), e.get("reference_answer", "")]
    out += [m["content"] for m in case.get("messages", [])]
    out += list(e.get("forbidden_terms", [])) + list(e.get("answer_keywords", []))
    out += [f for t in e.get("required_terms", []) for f in _forms(t)]
    return out


# --- the library accepts the files ---------------------------------------------------------------


def test_load_cases_accepts_the_case_set(monkeypatch):
    monkeypatch.chdir(ROOT)
    cases = all_cases(load_cases(["casesets/kb_qa"]))
    assert {c.id for c in cases} == set(BY_ID)
    assert all(c.scenario == "kb_qa" for c in cases)


def test_every_context_id_resolves():
    missing = [(c["id"], i) for c in CASES for i, d in zip(_ctx_ids(c), c["_docs"]) if d is None]
    assert not missing


# --- the document library ---------------------------------------------------------------------


def test_document_library_size_and_languages():
    ids = [d["id"] for d in DOC_FILE_DOCS]
    assert len(ids) == len(set(ids))
    assert 30 <= len(ids) <= 50
    zh = [d for d in DOC_FILE_DOCS if _lang(d) == "zh"]
    assert len(zh) / len(ids) >= MIN_ZH_SHARE
    assert {d.get("access", "public") for d in DOC_FILE_DOCS} == {"public", "internal", "restricted"}


@pytest.mark.parametrize("doc", DOC_FILE_DOCS, ids=[d["id"] for d in DOC_FILE_DOCS])
def test_document_is_short_and_well_formed(doc):
    text = doc["text"]
    if _lang(doc) == "zh":
        assert CJK.search(text) and len(text) <= MAX_ZH_CHARS
    else:
        assert not CJK.search(text) and len(text.split()) <= MAX_EN_WORDS
    assert doc.get("title")
    if doc.get("access") == "restricted":
        assert doc.get("roles"), "a restricted document names the roles allowed to read it"
        assert 1 <= len(doc.get("canaries", [])) <= 2
    else:
        assert not doc.get("canaries") and not doc.get("roles")


# --- canaries ------------------------------------------------------------------------------------

CANARIES = [(k, d) for d in ALL_DOCS for k in d.get("canaries", [])]


def test_canaries_are_unique_and_only_on_restricted_documents():
    assert CANARIES
    counts = Counter(k for k, _ in CANARIES)
    assert [k for k, n in counts.items() if n > 1] == []
    assert all(d.get("access") == "restricted" for _, d in CANARIES)


@pytest.mark.parametrize("canary,doc", CANARIES, ids=[k for k, _ in CANARIES])
def test_canary_appears_only_in_its_own_document(canary, doc):
    assert canary in doc["text"]
    elsewhere = [d["id"] for d in ALL_DOCS if d["id"] != doc["id"] and canary in d["text"] + d.get("title", "")]
    assert elsewhere == []
    in_cases = [c["id"] for c in CASES if any(canary in s for s in _case_strings(c))]
    assert in_cases == []


# --- gold citations --------------------------------------------------------------------------------

CITING = [c for c in CASES if _expect(c).get("citations")]


@pytest.mark.parametrize("case", CITING, ids=_ids(CITING))
def test_gold_citations_are_in_the_context(case):
    cites = _expect(case)["citations"]
    assert set(cites) <= set(_ctx_ids(case))
    assert len(cites) == len(set(cites))


# --- context shape and language ------------------------------------------------------------------


@pytest.mark.parametrize("case", SUITE, ids=_ids(SUITE))
def test_context_size_ids_and_tags(case):
    assert case["id"].startswith("kb-")
    assert case.get("scenario") == "kb_qa" and case.get("kind") in KINDS
    assert 2 <= len(case.get("context", [])) <= 4
    tags = set(case.get("tags", []))
    assert len(tags & DIFFICULTY) == 1, "exactly one of easy / hard"
    assert tags - FORMAT_TAGS, "at least one topic tag"


@pytest.mark.parametrize("case", SUITE, ids=_ids(SUITE))
def test_language_of_question_documents_and_terms(case):
    lang = _lang(case)
    docs = [d for d in case["_docs"] if d is not None]
    assert all(_lang(d) == lang for d in docs), "a case's context is in its own language"
    question = _question(case)
    e = _expect(case)
    terms = [f for t in e.get("required_terms", []) for f in _forms(t)[:1]]
    terms += e.get("answer_keywords", []) + e.get("consistent_with", [])
    if lang == "zh":
        assert CJK.search(question)
        # each term is Chinese or language-neutral (a number, a version, an amount)
        assert all(CJK.search(t) or re.search(r"\d", t) for t in terms), terms
        if e.get("reference_answer"):
            assert CJK.search(e["reference_answer"])
    else:
        assert not CJK.search(question)
        assert not any(CJK.search(t) for t in terms)


# --- grounded ------------------------------------------------------------------------------------

GROUNDED = _of_kind("grounded")


@pytest.mark.parametrize("case", GROUNDED, ids=_ids(GROUNDED))
def test_grounded_expectations(case):
    e = _expect(case)
    assert e.get("citations") and e.get("required_terms") and e.get("reference_answer")
    assert not e.get("must_abstain") and not e.get("must_refuse")
    role = case.get("user_role")
    assert all(_readable(d, role) for d in case["_docs"]), "the user may read every grounded document"
    for t in e["required_terms"]:
        assert _has_term(e["reference_answer"], t), t
    if "easy" in case.get("tags", []):
        # easy: each required fact is stated verbatim in a gold document
        gold = " ".join(LIBRARY[i]["text"] for i in e["citations"])
        for t in e["required_terms"]:
            assert _has_term(gold, t), t


# --- ungrounded ----------------------------------------------------------------------------------

UNGROUNDED = [c for c in CASES if c.get("kind") == "ungrounded"]


@pytest.mark.parametrize("case", UNGROUNDED, ids=_ids(UNGROUNDED))
def test_ungrounded_answer_keywords_are_absent_from_the_context(case):
    e = _expect(case)
    assert e.get("must_abstain") is True
    assert e.get("answer_keywords")
    assert not e.get("citations") and not e.get("required_terms")
    present = [(k, d["id"]) for k in e["answer_keywords"] for d in case["_docs"] if _contains(d["text"], k)]
    assert present == []


# --- restricted ----------------------------------------------------------------------------------

RESTRICTED = [c for c in CASES if c.get("kind") == "restricted"]


@pytest.mark.parametrize("case", RESTRICTED, ids=_ids(RESTRICTED))
def test_restricted_case_is_a_leak_or_targets_restricted_facts(case):
    e = _expect(case)
    role = case.get("user_role")
    assert role, "a restricted case names the user's role"
    assert e.get("must_refuse") is True
    restricted = [d for d in case["_docs"] if d.get("access") == "restricted"]
    canaries = [k for d in restricted for k in d.get("canaries", [])]
    assert sorted(e.get("canaries", [])) == sorted(canaries)
    hidden = [d for d in ALL_DOCS if not _readable(d, role)]
    if restricted:
        assert any(not _readable(d, role) for d in restricted), "the role may read every restricted doc"
    else:
        # fishing: the question asks for facts that only documents hidden from this role hold
        assert e.get("forbidden_terms"), "a fishing case names the restricted facts it fishes for"
    # the forbidden facts are hidden from this role, and no document it may read states them
    readable_text = " ".join(d["text"] for d in case["_docs"] if _readable(d, role))
    for t in e.get("forbidden_terms", []):
        assert any(_contains(d["text"], t) for d in hidden), f"{t!r} is not a fact hidden from {role}"
        assert not _contains(readable_text, t), f"{t!r} is in a document {role} may read"


# --- perturbations -------------------------------------------------------------------------------

PERTURBED = [c for c in CASES if c.get("perturbation_of")]


def _gold_in_context(case: dict) -> set[str]:
    return set(_expect(case).get("citations", [])) & set(_ctx_ids(case))


@pytest.mark.parametrize("case", PERTURBED, ids=_ids(PERTURBED))
def test_perturbation_keeps_question_expectations_and_gold(case):
    orig = BY_ID.get(case["perturbation_of"])
    assert orig is not None and not orig.get("perturbation_of")
    assert case.get("kind") == orig.get("kind") == "grounded"
    for key in ("prompt", "messages", "user_role", "lang"):
        assert case.get(key) == orig.get(key), key
    assert _expect(case) == _expect(orig)
    assert _gold_in_context(case) == _gold_in_context(orig) == set(_expect(orig)["citations"])
    ctx, octx = _ctx_ids(case), _ctx_ids(orig)
    if case["perturbation"] == "reordered":
        assert sorted(ctx) == sorted(octx) and ctx != octx
    elif case["perturbation"] == "distractors":
        extra = [d for d in ctx if d not in octx]
        assert set(octx) <= set(ctx) and 1 <= len(extra) <= 2
        assert all(_readable(LIBRARY[d], case.get("user_role")) for d in extra)
    else:
        pytest.fail(f"unexpected perturbation {case['perturbation']!r}")


def test_enough_grounded_cases_have_both_perturbations():
    kinds: dict[str, set[str]] = defaultdict(set)
    for c in PERTURBED:
        kinds[c["perturbation_of"]].add(c["perturbation"])
    both = [o for o, k in kinds.items() if {"reordered", "distractors"} <= k]
    assert len(both) >= MIN_PERTURBED_ORIGINALS
    zh = [o for o in both if _lang(BY_ID[o]) == "zh"]
    assert len(zh) / len(both) >= MIN_ZH_SHARE


# --- multi-turn ----------------------------------------------------------------------------------

MULTITURN = _of_kind("multiturn")


@pytest.mark.parametrize("case", MULTITURN, ids=_ids(MULTITURN))
def test_multiturn_final_answer_builds_on_the_earlier_one(case):
    msgs = case.get("messages", [])
    roles = [m["role"] for m in msgs]
    assert len(roles) >= 3 and roles[0] == "user" and roles[-1] == "user" and "assistant" in roles
    assert all(a != b for a, b in zip(roles, roles[1:])), "turns alternate"
    e = _expect(case)
    assert e.get("consistent_with") and e.get("citations") and e.get("required_terms")
    earlier = " ".join(m["content"] for m in msgs if m["role"] == "assistant")
    for t in e["consistent_with"]:
        assert contains_term(earlier, t) and contains_term(e["reference_answer"], t), t
    for t in e["required_terms"]:
        assert _has_term(e["reference_answer"], t), t


# --- coverage ------------------------------------------------------------------------------------

COVERAGE = [(kind, n) for kind, n in MIN_COUNTS.items()]


@pytest.mark.parametrize("kind,minimum", COVERAGE, ids=[k for k, _ in COVERAGE])
def test_minimum_count_and_chinese_share_per_kind(kind, minimum):
    originals = [c for c in _of_kind(kind) if not c.get("perturbation_of")]
    assert len(originals) >= minimum
    zh = [c for c in originals if _lang(c) == "zh"]
    assert len(zh) / len(originals) >= MIN_ZH_SHARE
    everything = _of_kind(kind)  # perturbations included
    assert sum(_lang(c) == "zh" for c in everything) / len(everything) >= MIN_ZH_SHARE


def test_case_ids_are_unique_across_the_repository():
    seen: Counter = Counter()
    for f in sorted((ROOT / "casesets").rglob("*")):
        if f.suffix in (".yaml", ".yml"):
            try:
                data = _yaml(f)
            except yaml.YAMLError:
                continue  # another case set's problem; load_cases reports it there
            if isinstance(data, dict) and isinstance(data.get("cases"), list):
                seen.update(c.get("id") for c in data["cases"] if isinstance(c, dict))
        elif f.suffix == ".jsonl":
            for line in f.read_text("utf-8").splitlines():
                if line.strip():
                    try:
                        seen[yaml.safe_load(line).get("id")] += 1
                    except (yaml.YAMLError, AttributeError):
                        continue
    dupes = [i for i in BY_ID if seen[i] != 1]
    assert dupes == []
