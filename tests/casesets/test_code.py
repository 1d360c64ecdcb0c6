"""The code case set (casesets/code): references pass their tests, mutants fail them, refactors
satisfy their AST checks, explanations' reference answers name their concepts, coverage per kind.

The case files are read as plain YAML for parametrizing (one broken case fails one test, not the
collection) and through `load_cases` once, to prove the library accepts them. All programs of one
case run in one subprocess (`python -c`), each in a fresh namespace with the tests appended; a
program passes only if the line appended after its tests ran, and the run counts only if the
harness printed its closing marker: exit code 0 alone proves nothing.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from evalsuite.cases.caseset import all_cases, load_cases

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "casesets" / "code"
FILES = {"completion": "completion.yaml", "explanation": "explanation.yaml", "refactor": "refactor.yaml", "tests": "tests.yaml"}
MIN_CASES = {"completion": 30, "explanation": 15, "refactor": 15, "tests": 15}
MIN_ZH_SHARE = 0.2
MUTANT_RANGE = {"completion": (1, 3), "refactor": (1, 3), "tests": (3, 10)}
ASSERT_RANGE = {"completion": (3, 6), "refactor": (3, 8), "tests": (3, 10)}
CODE_START = re.compile(r"^(def |class |import |from |@)")
CJK = re.compile(r"[\u4e00-\u9fff]")
CASE_TIMEOUT_S = 30
PROGRAM_TIMEOUT_S = 5

# Runs [(label, code)] against `tests`, each program in its own namespace, and prints
# MARKER + JSON results at the very end. SIGALRM bounds a looping program.
HARNESS = r"""
import contextlib, io, json, signal, sys
marker = sys.argv[1]
job = json.loads(sys.stdin.read())
def _timeout(*_):
    raise TimeoutError("program timed out")
signal.signal(signal.SIGALRM, _timeout)
results = []
for label, code in job["programs"]:
    done = []
    ns = {"__name__": "__main__", "__evalsuite_done__": done.append}
    src = code + "\n\n" + job["tests"] + "\n\n__evalsuite_done__(True)\n"
    error = None
    signal.alarm(job["timeout"])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, "<" + label + ">", "exec"), ns)
    except BaseException as exc:
        error = type(exc).__name__ + ": " + str(exc)[:200]
    finally:
        signal.alarm(0)
    results.append({"label": label, "passed": bool(done) and error is None, "error": error})
sys.stdout.write(marker + json.dumps(results) + "\n")
"""


def _yaml(path: Path):
    return yaml.safe_load(path.read_text("utf-8"))


def raw_cases() -> list[dict]:
    """Every case of the four case files, defaults applied, with `_file` added."""
    out = []
    for f in FILES.values():
        data = _yaml(CODE / f)
        for c in data["cases"]:
            out.append({**data.get("defaults", {}), **c, "_file": f})
    return out


CASES = raw_cases()
BY_KIND = {k: [c for c in CASES if c["kind"] == k] for k in FILES}


def ids(kind: str | None = None) -> list[str]:
    return [c["id"] for c in CASES if kind is None or c["kind"] == kind]


def case(cid: str) -> dict:
    return next(c for c in CASES if c["id"] == cid)


def prompt_code(prompt: str) -> str:
    """The code shown in a prompt: from the first line that starts code to the end."""
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        if CODE_START.match(line):
            return "\n".join(lines[i:]) + "\n"
    raise AssertionError("no code in the prompt")


def prompt_instruction(prompt: str) -> str:
    code = prompt_code(prompt)
    return prompt[: prompt.index(code.splitlines()[0])]


def run_programs(programs: list[tuple[str, str]], tests: str) -> dict[str, dict]:
    """Run each program with the tests appended; results by label."""
    marker = f"@@evalsuite-{uuid.uuid4().hex}@@"
    job = json.dumps({"programs": programs, "tests": tests, "timeout": PROGRAM_TIMEOUT_S})
    proc = subprocess.run(
        [sys.executable, "-I", "-c", HARNESS, marker], input=job, capture_output=True, text=True, timeout=CASE_TIMEOUT_S
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith(marker)]
    assert lines, f"harness did not finish (rc={proc.returncode}): {proc.stderr[-2000:]}"
    return {r["label"]: r for r in json.loads(lines[-1][len(marker):])}


def _call_names(func: ast.AST) -> set[str]:
    """Names a call counts as: `f` for f(), `join` and `sep.join` for sep.join()."""
    if isinstance(func, ast.Name):
        return {func.id}
    if isinstance(func, ast.Attribute):
        names = {func.attr}
        parts, node = [func.attr], func.value
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            names.add(".".join(reversed(parts)))
        return names
    return set()


def ast_violations(code: str, check: dict) -> list[str]:
    """Rules of `check` the code breaks (empty: satisfied). Statements are counted over the whole module."""
    tree = ast.parse(code)
    nodes = list(ast.walk(tree))
    kinds = {type(n).__name__ for n in nodes}
    defined = {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    called: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Call):
            called |= _call_names(n.func)
    statements = sum(isinstance(n, ast.stmt) for n in nodes)
    out = [f"does not define {n}" for n in check.get("must_define", []) if n not in defined]
    out += [f"does not call {n}" for n in check.get("must_call", []) if n not in called]
    out += [f"calls {n}" for n in check.get("must_not_call", []) if n in called]
    out += [f"has no {n}" for n in check.get("must_use_nodes", []) if n not in kinds]
    out += [f"uses {n}" for n in check.get("must_not_use_nodes", []) if n in kinds]
    if "max_statements" in check and statements > check["max_statements"]:
        out.append(f"{statements} statements > {check['max_statements']}")
    return out


def _asserts(tests: str) -> int:
    return sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(tests)))


def _identifiers(code: str) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(code)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


def _defines(code: str, name: str) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.parse(code).body)


def _mentions(text: str, term) -> bool:
    names = [term] if isinstance(term, str) else [term["term"], *term.get("synonyms", [])]
    folded = text.casefold()
    return any(n.casefold() in folded for n in names)


# ------------------------------------------------------------------ the checker itself


@pytest.mark.parametrize(
    ("code", "check", "expected"),
    [
        ("def f(n):\n    return [i for i in range(n)]\n", {"must_use_nodes": ["ListComp"], "must_not_use_nodes": ["For"]}, []),
        ("def f(n):\n    out = []\n    for i in range(n):\n        out.append(i)\n    return out\n",
         {"must_use_nodes": ["ListComp"], "must_not_use_nodes": ["For"]}, ["has no ListComp", "uses For"]),
        ("def f(xs):\n    return ', '.join(xs)\n", {"must_call": ["join"], "must_define": ["f", "g"]}, ["does not define g"]),
        ("import os\ndef f(p):\n    return os.path.join(p, 'x')\n", {"must_not_call": ["os.path.join"]}, ["calls os.path.join"]),
        ("def f(s):\n    return eval(s)\n", {"must_not_call": ["eval"], "max_statements": 1}, ["calls eval", "2 statements > 1"]),
    ],
)
def test_ast_checker(code, check, expected):
    assert ast_violations(code, check) == expected


def test_harness_passes_only_programs_whose_tests_all_ran():
    results = run_programs(
        [
            ("right", "def f():\n    return 1\n"),
            ("wrong", "def f():\n    return 2\n"),
            ("exits-early", "import sys\nsys.exit(0)\n"),
            ("missing", "x = 1\n"),
        ],
        "assert f() == 1\nassert f() + 1 == 2\n",
    )
    assert {k: r["passed"] for k, r in results.items()} == {"right": True, "wrong": False, "exits-early": False, "missing": False}


def test_harness_killed_mid_run_is_not_a_pass():
    with pytest.raises(AssertionError, match="harness did not finish"):
        run_programs([("hard-exit", "import os\nos._exit(0)\n")], "assert True\n")


# ------------------------------------------------------------------ the set as a whole


def test_load_cases_accepts_the_code_set():
    loaded = {c.id: c for c in all_cases(load_cases([CODE]))}
    for c in CASES:
        assert c["id"] in loaded, c["id"]
        got = loaded[c["id"]]
        assert (got.scenario, got.kind, got.lang) == ("code", c["kind"], c.get("lang", "en"))
        assert got.expect.entry_point == c["expect"].get("entry_point")


def test_ids_are_unique_across_the_repo():
    mine = ids()
    assert len(mine) == len(set(mine))
    assert all(i.startswith("code-") for i in mine)
    others = []
    for f in sorted((ROOT / "casesets").rglob("*.yaml")):
        if f.parent == CODE and f.name in FILES.values():
            continue
        data = _yaml(f)
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            others += [c.get("id") for c in data["cases"] if isinstance(c, dict)]
    assert not set(mine) & set(others)


@pytest.mark.parametrize("kind", list(FILES))
def test_counts_and_languages(kind):
    data = _yaml(CODE / FILES[kind])
    assert data["schema_version"] == 1 and data["version"] == 1 and data["name"]
    assert data["defaults"]["scenario"] == "code"
    cases = BY_KIND[kind]
    assert all(c["_file"] == FILES[kind] for c in cases)
    assert all(c["kind"] == kind for c in CASES if c["_file"] == FILES[kind])
    assert len(cases) >= MIN_CASES[kind]
    zh = [c for c in cases if c.get("lang") == "zh"]
    assert len(zh) / len(cases) >= MIN_ZH_SHARE, f"{len(zh)} of {len(cases)} in Chinese"
    levels = {c["id"]: [t for t in c.get("tags", []) if t in ("easy", "hard")] for c in cases}
    assert all(len(v) == 1 for v in levels.values()), levels
    assert all(len(c.get("tags", [])) >= 2 for c in cases), "every case needs a topic tag besides easy/hard"
    if kind == "completion":
        easy = sum(v == ["easy"] for v in levels.values())
        assert 0.35 <= easy / len(cases) <= 0.65, f"{easy} easy of {len(cases)}"


# ------------------------------------------------------------------ per case


@pytest.mark.parametrize("cid", ids())
def test_case_shape(cid):
    c = case(cid)
    prompt, expect, kind = c["prompt"], c["expect"], c["kind"]
    code = prompt_code(prompt)
    compile(code, cid, "exec")
    instruction = prompt_instruction(prompt)
    if c.get("lang") == "zh":
        assert CJK.search(instruction), "a Chinese case needs a Chinese instruction"
        if kind in ("completion", "tests"):
            assert CJK.search(code), "a Chinese case needs a Chinese docstring or comments"
    else:
        assert not CJK.search(prompt)
    if kind == "explanation":
        assert expect["concepts"] and expect["reference_answer"].strip()
        return
    if kind in ("completion", "refactor"):
        assert "```python" in instruction
    ep = expect["entry_point"]
    assert _defines(code, ep), f"the prompt does not show def {ep}"
    assert _defines(expect["reference"], ep)
    assert all(i.isascii() for i in _identifiers(expect["reference"]))
    lo, hi = ASSERT_RANGE[kind]
    assert lo <= _asserts(expect["tests"]) <= hi
    lo, hi = MUTANT_RANGE[kind]
    assert lo <= len(expect["mutants"]) <= hi
    assert all(_defines(m, ep) for m in expect["mutants"])
    assert len({m.strip() for m in expect["mutants"]}) == len(expect["mutants"]), "duplicate mutants"
    if kind == "tests":
        assert ast.dump(ast.parse(code)) == ast.dump(ast.parse(expect["reference"])), "the reference differs from the function shown"
    if kind == "completion":
        # the unit tests are hidden: no assert line of them shows in the prompt
        assert not any(line.strip() in prompt for line in expect["tests"].splitlines() if line.strip())


@pytest.mark.parametrize("cid", ids("completion") + ids("refactor") + ids("tests"))
def test_reference_passes_and_mutants_fail(cid):
    c = case(cid)
    expect = c["expect"]
    programs = [("reference", expect["reference"])]
    programs += [(f"mutant-{i}", m) for i, m in enumerate(expect["mutants"])]
    shown = prompt_code(c["prompt"])
    # completion: the bare stub must fail (tests are not vacuous); refactor: the original code and
    # tests: the function under test, as shown, must pass
    programs.append(("prompt", shown))
    results = run_programs(programs, expect["tests"])
    assert results["reference"]["passed"], results["reference"]["error"]
    survivors = [label for label, r in results.items() if label.startswith("mutant") and r["passed"]]
    assert not survivors, f"mutants pass every test: {survivors}"
    if c["kind"] == "completion":
        assert not results["prompt"]["passed"], "the prompt's stub passes the tests"
    else:
        assert results["prompt"]["passed"], results["prompt"]["error"]


@pytest.mark.parametrize("cid", ids("refactor"))
def test_refactor_reference_satisfies_ast_check(cid):
    c = case(cid)
    check = c["expect"]["ast_check"]
    assert check, "a refactor case needs an ast_check"
    assert ast_violations(c["expect"]["reference"], check) == []
    assert ast_violations(prompt_code(c["prompt"]), check), "the original code already satisfies the check"
    assert c["expect"]["entry_point"] in check.get("must_define", [])


@pytest.mark.parametrize("cid", ids("explanation"))
def test_explanation_reference_answer_names_every_concept(cid):
    expect = case(cid)["expect"]
    missing = [t for t in expect["concepts"] if not _mentions(expect["reference_answer"], t)]
    assert not missing
    assert 2 <= len(expect["concepts"]) <= 5
