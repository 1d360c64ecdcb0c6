"""Code scorers: extraction, unit tests in the sandbox, AST checks, test writing, concepts, pass@k."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evalsuite import sandbox
from evalsuite.cases.caseset import Case, Expect, Term, load_caseset
from evalsuite.scoring import SCORERS, ScoreInput
from evalsuite.scoring import code as C

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {c.id: c for c in load_caseset(REPO / "casesets/code/examples.yaml").cases}
COMPLETION = EXAMPLES["code-ex-completion-001"]
REFACTOR = EXAMPLES["code-ex-refactor-001"]
TESTS_CASE = EXAMPLES["code-ex-tests-001"]
EXPLAIN = EXAMPLES["code-ex-explanation-001"]

PAL = 'def is_palindrome(s: str) -> bool:\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n'
PAL_BODY = "    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n"

# (name, text, expected code, expected how)
EXTRACTION = [
    ("python fence + trailing prose", f"```python\n{PAL}```\n\nThis works because it compares the list with its reverse.", PAL, "fence:python"),
    ("explanation before the fence", f"Sure! Here is the function you asked for:\n\n```py\n{PAL}```", PAL, "fence:python"),
    ("bare fence", f"```\n{PAL}```", PAL, "fence"),
    ("no fence, prose around", f"Here is my solution:\n{PAL}\nHope this helps, it runs in O(n).", PAL, "raw-trimmed"),
    ("no fence, pure code", PAL, PAL, "raw"),
    ("unclosed fence (truncated output)", f"```python\n{PAL}", PAL, "fence-unclosed"),
    # seen from the embedded model: the opening fence omitted, the closing one kept, prose after
    ("code, a lone closing fence, then prose", f"{PAL}```\n\nThis function compares the list with its reverse.", PAL, "raw"),
    ("python block preferred over a shell block", f"```bash\npip install nothing\n```\n```python\n{PAL}```", PAL, "fence:python"),
    (
        "the block defining the entry point wins",
        f"```python\nprint(is_palindrome('x'))\n```\nand the function:\n```python\n{PAL}```",
        PAL,
        "fence:python",
    ),
]


@pytest.mark.parametrize("name,text,code,how", EXTRACTION, ids=[e[0] for e in EXTRACTION])
def test_extract_code(name, text, code, how):
    assert C.extract_code(text, entry_point="is_palindrome", kind="refactor") == (code, how)


SIG = 'def is_palindrome(s: str) -> bool:\n    """Return True if s reads the same backwards, ignoring case and non-alphanumerics."""\n'


@pytest.mark.parametrize(
    "text,how",
    [
        (PAL_BODY, "raw+prompt-signature"),
        (PAL_BODY.replace("    ", "", 1).replace("\n    ", "\n"), "raw+prompt-signature"),  # dedented body
        (f"```python\n{PAL_BODY}```\nThat's it.", "fence:python+prompt-signature"),
        (PAL_BODY + "\nThis strips punctuation first.", "raw+prompt-signature"),
    ],
)
def test_body_only_completion_gets_the_prompt_signature(text, how):
    code, got_how = C.extract_code(text, prompt=COMPLETION.prompt, entry_point="is_palindrome")
    assert (code, got_how) == (SIG + PAL_BODY, how)


def test_whole_function_gets_prompt_imports_and_helpers():
    prompt = "from typing import List\n\n\ndef helper(x):\n    return x * 2\n\n\ndef doubled(xs: List[int]) -> List[int]:\n    \"\"\"Double each.\"\"\"\n"
    answer = "```python\ndef doubled(xs: List[int]) -> List[int]:\n    return [helper(x) for x in xs]\n```"
    code, how = C.extract_code(answer, prompt=prompt, entry_point="doubled")
    assert how == "fence:python+prompt-imports"
    assert code == "from typing import List\ndef helper(x):\n    return x * 2\n\ndef doubled(xs: List[int]) -> List[int]:\n    return [helper(x) for x in xs]\n"


def test_extract_nothing():
    assert C.extract_code("", entry_point="f") == ("", "none")


def _inp(case: Case, text: str, sample: int = 0, error: str | None = None) -> ScoreInput:
    return ScoreInput(case=case, text=text, sample=sample, variant="v", error=error)


def _one(name: str, inp: ScoreInput):
    (score,) = SCORERS.get(name).fn(inp)
    return score


# (name, case, text, value, status)
PASS_TABLE = [
    ("correct, fenced", COMPLETION, f"```python\n{PAL}```", 1.0, "passed"),
    ("correct body only", COMPLETION, PAL_BODY, 1.0, "passed"),
    ("wrong", COMPLETION, "```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```", 0.0, "failed"),
    ("crashes", COMPLETION, "```python\ndef is_palindrome(s):\n    raise ValueError('no')\n```", 0.0, "failed"),
    ("syntax error", COMPLETION, "```python\ndef is_palindrome(s)\n    return True\n```", 0.0, "failed"),
    ("exits early", COMPLETION, "```python\nimport sys\ndef is_palindrome(s):\n    return True\nsys.exit(0)\n```", 0.0, "failed"),
    ("refactor correct", REFACTOR, "```python\ndef squares(n):\n    return [i * i for i in range(n)]\n```", 1.0, "passed"),
    ("generation error", COMPLETION, "", 0.0, "failed"),
]


@pytest.mark.parametrize("name,case,text,value,status", PASS_TABLE, ids=[p[0] for p in PASS_TABLE])
def test_code_pass(name, case, text, value, status):
    s = _one("code.pass", _inp(case, text, error="backend timeout" if name == "generation error" else None))
    assert (s.metric, s.value, s.passed, s.higher_is_better, s.details["status"]) == ("code.pass", value, value == 1.0, True, status)
    assert "how" in s.details


def test_code_pass_details_carry_stderr_tail():
    s = _one("code.pass", _inp(COMPLETION, "```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```"))
    assert "AssertionError" in s.details["stderr_tail"]
    assert s.details["how"] == "fence:python"


# (name, code, spec, failed requirements)
AST_TABLE = [
    ("meets all", "def squares(n):\n    return [i * i for i in range(n)]\n", REFACTOR.expect.ast_check, []),
    (
        "still a loop",
        "def squares(n):\n    out = []\n    for i in range(n):\n        out.append(i * i)\n    return out\n",
        REFACTOR.expect.ast_check,
        ["must_use_nodes: no ListComp", "must_not_use_nodes: uses For"],
    ),
    ("wrong name", "def sq(n):\n    return [i * i for i in range(n)]\n", REFACTOR.expect.ast_check, ["must_define: squares is not defined"]),
    ("must_call attr", "def j(xs):\n    return ', '.join(xs)\n", {"must_call": ["join", "sorted"]}, ["must_call: sorted is never called"]),
    ("must_not_call", "def c(s):\n    return eval(s)\n", {"must_not_call": ["eval", "exec"]}, ["must_not_call: eval is called"]),
    ("max_statements", "import os\ndef f(x):\n    y = x\n    return y\n", {"max_statements": 3}, ["max_statements: 4 statements > 3"]),
    ("max_statements ok", "def f(x):\n    return x\n", {"max_statements": 2}, []),
    ("syntax error", "def f(:\n", {"must_define": ["f"]}, ["syntax error: invalid syntax (<unknown>, line 1)"]),
]


@pytest.mark.parametrize("name,code,spec,failed", AST_TABLE, ids=[a[0] for a in AST_TABLE])
def test_check_ast(name, code, spec, failed):
    assert C.check_ast(code, spec) == failed


def test_code_ast_ok_scorer():
    good = _one("code.ast_ok", _inp(REFACTOR, "Here:\n```python\ndef squares(n):\n    return [i * i for i in range(n)]\n```"))
    bad = _one("code.ast_ok", _inp(REFACTOR, "```python\ndef squares(n):\n    return list(map(lambda i: i * i, range(n)))\n```"))
    assert (good.value, good.passed, good.details["failed"]) == (1.0, True, [])
    assert (bad.value, bad.passed, bad.details["failed"]) == (0.0, False, ["must_use_nodes: no ListComp"])


GOOD_TESTS = """```python
from clamp import clamp

def test_inside():
    assert clamp(5, 0, 10) == 5

def test_below():
    assert clamp(-1, 0, 10) == 0

def test_above():
    assert clamp(11, 0, 10) == 10
```
These cover the three regions."""
WEAK_TESTS = "```python\nfrom solution import clamp\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n```"
WRONG_TESTS = "```python\ndef test_bad():\n    assert clamp(5, 0, 10) == 6\n```"
NO_ASSERT = "```python\ndef test_nothing():\n    clamp(1, 0, 2)\n```"
PYTEST_TESTS = (
    "```python\nimport pytest\nfrom mymodule import clamp\n\n@pytest.mark.parametrize('x,want', [(5, 5), (-1, 0), (11, 10)])\n"
    "def test_clamp(x, want):\n    assert clamp(x, 0, 10) == want\n```"
)

# (name, output, tests_pass_reference, mutants_caught)
TESTWRITING = [
    ("good tests, module import", GOOD_TESTS, 1.0, 1.0),
    ("weak tests", WEAK_TESTS, 1.0, 1 / 3),
    ("wrong tests", WRONG_TESTS, 0.0, 0.0),
    ("no asserts", NO_ASSERT, 0.0, 0.0),
    ("pytest parametrize", PYTEST_TESTS, 1.0, 1.0),
]


@pytest.mark.parametrize("name,text,ref,caught", TESTWRITING, ids=[t[0] for t in TESTWRITING])
def test_test_writing(name, text, ref, caught):
    r = _one("code.tests_pass_reference", _inp(TESTS_CASE, text))
    m = _one("code.mutants_caught", _inp(TESTS_CASE, text))
    assert (r.value, r.passed) == (ref, ref == 1.0)
    assert m.value == pytest.approx(caught)
    assert m.passed is None and m.higher_is_better


def test_weak_tests_miss_the_right_mutants():
    # clamp(5, 0, 10): mutant 0 -> min(0, max(5, 10)) = 0 (caught); mutant 1 -> max(0, 5) = 5; mutant 2 -> 5
    m = _one("code.mutants_caught", _inp(TESTS_CASE, WEAK_TESTS))
    assert (m.details["caught"], m.details["missed"]) == ([0], [1, 2])


def test_generated_test_functions_are_called():
    # a test function that fails must fail the run: proves test_* are called, not only defined
    r = _one("code.tests_pass_reference", _inp(TESTS_CASE, WRONG_TESTS))
    assert (r.value, r.details["status"]) == (0.0, "failed")
    ok = _one("code.tests_pass_reference", _inp(TESTS_CASE, GOOD_TESTS))
    assert ok.details["tests_run"] == 3


# (text, value, missing)
CONCEPTS = [
    ("It counts the occurrences of each element and returns a dict.", 1.0, []),
    ("Builds a MAPPING from item to its FREQUENCY.", 1.0, []),
    ("It returns a dictionary.", 0.5, ["count"]),
    ("It loops.\n```python\nxs.count(x)  # dict\n```", 0.0, ["count", "dictionary"]),  # quoted code does not count
    ("A dictator discounts nothing.", 0.0, ["count", "dictionary"]),  # no match inside other words
]


@pytest.mark.parametrize("text,value,missing", CONCEPTS)
def test_concepts(text, value, missing):
    s = _one("code.concepts", _inp(EXPLAIN, text))
    assert (s.value, s.passed, s.details["missing"]) == (value, not missing, missing)


@pytest.mark.parametrize(
    "term,text,hit",
    [
        (Term("base case", ("n <= 1",)), "it stops when n <= 1", True),
        (Term("base case"), "the Base-Case returns 1", True),
        (Term("factorial", ("n!",)), "computes n! recursively", True),
        (Term("recursion"), "recursions", True),
        (Term("set"), "the settings", False),
    ],
)
def test_mentions(term, text, hit):
    assert C.mentions(text, term) is hit


# (n, c, k, expected): closed form 1 - C(n-c, k) / C(n, k)
PASSK = [
    (1, 0, 1, 0.0),
    (1, 1, 1, 1.0),
    (4, 1, 1, 0.25),
    (4, 1, 2, 0.5),
    (4, 2, 2, 1 - 1 / 6),
    (4, 3, 2, 1.0),
    (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5)),
    (10, 0, 10, 0.0),
    (200, 13, 10, 1 - math.comb(187, 10) / math.comb(200, 10)),
]


@pytest.mark.parametrize("n,c,k,want", PASSK)
def test_pass_at_k(n, c, k, want):
    assert C.pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, 1, 4), (3, 1, 0)])
def test_pass_at_k_rejects_bad_input(n, c, k):
    with pytest.raises(ValueError):
        C.pass_at_k(n, c, k)


def test_pass_at_k_case_scorer_reuses_sample_runs(monkeypatch):
    sandbox.clear_cache()
    texts = [f"```python\n{PAL}```", "```python\ndef is_palindrome(s):\n    return False\n```", PAL_BODY, "no code here at all, sorry"]
    inputs = [_inp(COMPLETION, t, sample=i) for i, t in enumerate(texts)]
    calls = []
    real = sandbox.run_tests
    monkeypatch.setattr(sandbox.pool, "run_tests", lambda *a, **k: calls.append(a) or real(*a, **k))  # what cached and pooled runs call
    per_sample = [_one("code.pass", i).value for i in inputs]
    scores = SCORERS.get("code.pass@k").fn(COMPLETION, inputs)
    assert per_sample == [1.0, 0.0, 1.0, 0.0]
    assert [(s.metric, s.value) for s in scores] == [("code.pass@1", 0.5), ("code.pass@2", pytest.approx(1 - 1 / 6))]
    assert scores[0].details["statuses"] == ["passed", "failed", "passed", "failed"]
    assert len(calls) == 3  # three programs (two textually different correct ones), each run once


def test_registered_specs():
    specs = {n: SCORERS.get(n) for n in ("code.pass", "code.pass@k", "code.ast_ok", "code.tests_pass_reference", "code.mutants_caught", "code.concepts")}
    assert {n: (s.level, s.kinds) for n, s in specs.items()} == {
        "code.pass": ("output", ("completion", "refactor")),
        "code.pass@k": ("case", ("completion", "refactor")),
        "code.ast_ok": ("output", ("refactor",)),
        "code.tests_pass_reference": ("output", ("tests",)),
        "code.mutants_caught": ("output", ("tests",)),
        "code.concepts": ("output", ("explanation",)),
    }
    assert specs["code.pass"].args["timeout_s"] == C.LIMITS["timeout_s"]


def test_expect_without_tests_is_skipped():
    case = Case(id="x", scenario="code", kind="completion", prompt="p", expect=Expect(entry_point="f"))
    s = _one("code.pass", _inp(case, "def f(): pass"))
    assert (s.value, s.passed) == (None, None)


# Issue 16: every code scorer reads a run that executed no test as a failure. One table of test-file
# shapes x answers; code.pass, code.pass@k and the test-writing scorers must agree with each other.
ADD_OK = "def add(a, b):\n    return a + b\n"
ADD_WRONG = "def add(a, b):\n    return a - b\n"
ADD_MISSING = "def plus(a, b):\n    return a + b\n"
ADD_EXITS = "import sys\ndef add(a, b):\n    return a + b\nsys.exit(0)\n"
ANSWERS = {"correct": (ADD_OK, 1.0), "wrong": (ADD_WRONG, 0.0), "no entry point": (ADD_MISSING, 0.0), "exits early": (ADD_EXITS, 0.0)}
TEST_SHAPES = {
    "plain asserts": "assert add(1, 2) == 3\n",
    "check(candidate), not called": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "check(candidate), called": "def check(candidate):\n    assert candidate(1, 2) == 3\ncheck(add)\n",
    "unittest class": "import unittest\nclass TestAdd(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(1, 2), 3)\n",
    "pytest functions": "import pytest\n@pytest.mark.parametrize('a', [1, 2])\ndef test_add(a):\n    assert add(a, 1) == a + 1\n",
}


def _add_case(tests: str) -> Case:
    return Case(id="add", scenario="code", kind="completion", prompt="Write add(a, b).", expect=Expect(entry_point="add", tests=tests))


@pytest.mark.parametrize("shape", list(TEST_SHAPES), ids=list(TEST_SHAPES))
def test_pass_and_pass_at_k_agree_on_every_shape(shape):
    case = _add_case(TEST_SHAPES[shape])
    inputs = [_inp(case, f"```python\n{code}```", sample=i) for i, (code, _) in enumerate(ANSWERS.values())]
    (at1, at2) = SCORERS.get("code.pass@k").fn(case, inputs)  # runs all four, pooled and cached
    per_sample = [_one("code.pass", inp) for inp in inputs]
    assert [s.value for s in per_sample] == [v for _, v in ANSWERS.values()], [s.details for s in per_sample]
    assert at1.details["statuses"] == [s.details["status"] for s in per_sample] == ["passed", "failed", "failed", "failed"]
    assert (at1.value, at2.value) == (0.25, 0.5)
    missing = per_sample[2].details
    assert (missing["status"], missing["reason"]) == ("failed", "entry point 'add' not defined")


NEVER_RUN = [
    ("check is never called (no entry point)", "def check(candidate):\n    assert candidate(1, 2) == 3\n", None),
    ("asserts only in a helper nobody calls", "def helper():\n    assert add(1, 2) == 3\n", "add"),
]


@pytest.mark.parametrize("name,tests,entry_point", NEVER_RUN, ids=[n[0] for n in NEVER_RUN])
def test_code_pass_fails_when_no_test_ran(name, tests, entry_point):
    case = Case(id="x", scenario="code", kind="completion", prompt="p", expect=Expect(entry_point=entry_point, tests=tests))
    s = _one("code.pass", _inp(case, f"```python\n{ADD_OK}```"))
    (k1,) = SCORERS.get("code.pass@k").fn(case, [_inp(case, f"```python\n{ADD_OK}```")])
    assert (s.value, s.details["status"], s.details["reason"], k1.value) == (0.0, "failed", "no test ran", 0.0)


WRITING_CASE = Case(
    id="tw",
    scenario="code",
    kind="tests",
    prompt="Write tests for add(a, b).",
    expect=Expect(entry_point="add", reference=ADD_OK, mutants=(ADD_WRONG, ADD_MISSING, ADD_EXITS, "def add(a, b):\n    return a + b if a else 0\n")),
)
# (name, generated tests, tests_pass_reference, mutants caught, reason on the reference)
WRITTEN = [
    ("plain asserts", "assert add(1, 2) == 3\n", 1.0, [0, 1, 2], ""),
    ("check(candidate) not called", "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 5) == 5\n", 1.0, [0, 1, 2, 3], ""),
    ("unittest class", "import unittest\nfrom solution import add\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(2, 2), 4)\n", 1.0, [0, 1, 2], ""),
    ("pytest functions", "def test_a():\n    assert add(1, 2) == 3\n", 1.0, [0, 1, 2], ""),
    ("asserts never executed", "def helper():\n    assert add(1, 2) == 3\n", 0.0, [], "no test ran"),
]


@pytest.mark.parametrize("name,tests,ref,caught,reason", WRITTEN, ids=[w[0] for w in WRITTEN])
def test_test_writing_agrees(name, tests, ref, caught, reason):
    text = f"```python\n{tests}```"
    r = _one("code.tests_pass_reference", _inp(WRITING_CASE, text))
    m = _one("code.mutants_caught", _inp(WRITING_CASE, text))
    assert (r.value, r.details["reason"]) == (ref, reason)
    assert (m.details["caught"], m.value) == (caught, len(caught) / 4)
    if reason:
        assert m.details["reason"] == f"the tests fail on the reference ({reason})"


def test_scorers_never_count_a_zero_test_pass(monkeypatch):
    """Whatever the sandbox says, a `passed` run with no test counts as failed in every scorer."""
    fake = sandbox.SandboxResult(status="passed", stdout="", stderr="", returncode=0, duration_s=0.0, verdict_seen=True, tests_run=0)
    monkeypatch.setattr(sandbox, "run_tests_cached", lambda *a, **k: fake)
    monkeypatch.setattr(sandbox, "run_tests_many", lambda jobs, **k: [fake for _ in jobs])
    case = _add_case("assert add(1, 2) == 3\n")
    inp = _inp(case, f"```python\n{ADD_OK}```")
    s = _one("code.pass", inp)
    (k1,) = SCORERS.get("code.pass@k").fn(case, [inp])
    text = "```python\nassert add(1, 2) == 3\n```"
    r = _one("code.tests_pass_reference", _inp(WRITING_CASE, text))
    m = _one("code.mutants_caught", _inp(WRITING_CASE, text))
    assert (s.value, s.details["reason"], k1.value, k1.details["statuses"]) == (0.0, "no test ran", 0.0, ["failed"])
    assert (r.value, r.details["reason"], m.value) == (0.0, "no test ran", 0.0)


def test_isolation_shared_case_says_its_verdict_is_forgeable():
    """Issue 33: a shared case runs in one interpreter, and its evidence says what that means."""
    answer = "```python\nclass Box:\n    def __init__(self, v):\n        self.v = v\ndef box(v):\n    return Box(v)\n```"
    expect = dict(entry_point="box", tests="assert box(3).v == 3\n")
    isolated = Case(id="box", scenario="code", kind="completion", prompt="box", expect=Expect(**expect))
    shared = Case(id="box-shared", scenario="code", kind="completion", prompt="box", expect=Expect(**expect, isolation="shared"))
    s_iso, s_shared = _one("code.pass", _inp(isolated, answer)), _one("code.pass", _inp(shared, answer))
    assert (s_iso.value, "not plain data" in s_iso.details["reason"], "verdict" in s_iso.details) == (0.0, True, False)
    assert (s_shared.value, s_shared.details["verdict"]) == (1.0, C.SHARED_VERDICT)
    assert "forgeable" in C.SHARED_VERDICT
