"""Code scorers: unit tests in the sandbox (pass, pass@k), AST shape, test writing, explanations.

Every program runs in `evalsuite.sandbox` (a separate, OS-isolated process), never in the suite's
process. Runs are memoised by (code, tests, entry point, limits): the per-sample `code.pass` and the
case-level `code.pass@k` share results, so no program runs twice in one process.
"""

from __future__ import annotations

import ast
import math
import re
import sys
from collections.abc import Sequence

from .. import sandbox
from ..cases.caseset import Case, Term
from ..executors import sandbox_jobs  # the sandbox's own functions, or a cluster's (executor: ray)
from .base import Score, ScoreInput, scorer
from .code_extract import FENCE, case_code
from .code_extract import extract_code as extract_code  # re-exported: the code scorers' extraction

#: limits of every sandboxed run made by these scorers (part of the cache key, recorded in the specs)
LIMITS: dict = {"timeout_s": 10.0, "memory_mb": 512, "max_procs": 32, "max_file_mb": 16}
PASS_AT_K = (1, 2, 5, 10)
STDERR_TAIL = 1500
#: the evidence of a case run with `isolation: shared` (docs/security.md)
SHARED_VERDICT = "forgeable: isolation: shared runs the program in the tests' interpreter, where it can reach the verdict"

# ----------------------------------------------------------------------------------------------
# Unit tests: code.pass and pass@k
# ----------------------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021), numerically stable: 1 - prod(1 - k / arange(n-c+1, n+1))."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def _tail(s: str, n: int = STDERR_TAIL) -> str:
    return s if len(s) <= n else "..." + s[-n:]


def _status(res: sandbox.SandboxResult) -> str:
    """The run's status as every code scorer reads it: a pass that ran no test is a failure."""
    if res.status == "passed" and not res.tests_run:
        return "failed"
    return res.status


def _reason(res: sandbox.SandboxResult) -> str:
    return "no test ran" if res.status == "passed" and not res.tests_run else res.reason


def _run_details(res: sandbox.SandboxResult, isolation: str = "process") -> dict:
    d: dict[str, object] = {
        "status": _status(res),
        "reason": _reason(res),
        "tests_run": res.tests_run,
        "stderr_tail": _tail(res.stderr),
        "duration_s": res.duration_s,
        "isolation": res.isolation,
    }
    if res.warnings:
        d["sandbox_warnings"] = list(res.warnings)
    if isolation == "shared":
        d["verdict"] = SHARED_VERDICT
    elif sandbox.forgeable(res.warnings):
        d["verdict"] = sandbox.forgeable(res.warnings)
    return d


def _sample_job(inp: ScoreInput) -> tuple[str, str] | None:
    """(code, how) of one sample, or None when there is nothing to run."""
    if inp.error:
        return None
    code, how = case_code(inp.case, inp.text)
    return (code, how) if code.strip() else None


@scorer("code.pass", scenarios=("code",), kinds=("completion", "refactor"), **LIMITS)
def code_pass(inp: ScoreInput) -> list[Score]:
    """1.0 when the answer's code passes the case's unit tests in the sandbox."""
    ex = inp.case.expect
    if not ex.tests:
        return [Score("code.pass", None, None, True, {"skipped": "the case has no tests"})]
    job = _sample_job(inp)
    if job is None:
        why = f"generation failed: {inp.error}" if inp.error else "no code in the output"
        return [Score("code.pass", 0.0, False, True, {"status": "failed", "reason": why, "how": "none"})]
    code, how = job
    res = sandbox_jobs.run_tests_cached(code, ex.tests, ex.entry_point, isolation=ex.isolation, **LIMITS)
    if res.status == "error":
        return [Score("code.pass", None, None, True, {"how": how, **_run_details(res, ex.isolation)})]
    ok = _status(res) == "passed"
    return [Score("code.pass", 1.0 if ok else 0.0, ok, True, {"how": how, **_run_details(res, ex.isolation)})]


@scorer("code.pass@k", level="case", scenarios=("code",), kinds=("completion", "refactor"), ks=PASS_AT_K, **LIMITS)
def code_pass_at_k(case: Case, inputs: Sequence[ScoreInput]) -> list[Score]:
    """pass@k for k in PASS_AT_K (k <= n) over the samples of one case (metrics code.pass@1, ...)."""
    ex = case.expect
    n = len(inputs)
    if n == 0 or not ex.tests:
        return []
    jobs = [_sample_job(inp) for inp in inputs]
    runnable = [(i, j) for i, j in enumerate(jobs) if j is not None]
    results = sandbox_jobs.run_tests_many([(code, ex.tests, ex.entry_point) for _, (code, _) in runnable], isolation=ex.isolation, **LIMITS)
    statuses: list[str] = ["failed"] * n
    for (i, _), res in zip(runnable, results):
        statuses[i] = _status(res)
    errors = statuses.count("error")
    n_eff = n - errors  # sandbox failures are not the model's: leave those samples out
    c = statuses.count("passed")
    details = {"n": n_eff, "c": c, "statuses": statuses}
    if errors:
        details["sandbox_errors"] = errors
    if ex.isolation == "shared":
        details["verdict"] = SHARED_VERDICT
    out = []
    for k in PASS_AT_K:
        if k <= n_eff:
            out.append(Score(f"code.pass@{k}", pass_at_k(n_eff, c, k), None, True, dict(details, k=k)))
    return out


# ----------------------------------------------------------------------------------------------
# AST shape (refactor)
# ----------------------------------------------------------------------------------------------


def _called_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = []
            f = node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            if parts:
                names.add(parts[0])  # the called name itself: `join` in ", ".join(x)
                names.add(".".join(reversed(parts)))  # and the dotted path: `str.join`, `os.path.join`
    return names


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            if isinstance(t, ast.Name):
                names.add(t.id)
    return names


def check_ast(code: str, spec: dict) -> list[str]:
    """Failed requirements of an `ast_check` spec (empty: all met).

    max_statements counts every statement of the module (defs and imports included).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        return [f"syntax error: {exc}"]
    failed = []
    defined = _defined_names(tree)
    called = _called_names(tree)
    used = {type(node).__name__ for node in ast.walk(tree)}
    for name in spec.get("must_define", ()):
        if name not in defined:
            failed.append(f"must_define: {name} is not defined")
    for name in spec.get("must_call", ()):
        if name not in called:
            failed.append(f"must_call: {name} is never called")
    for name in spec.get("must_not_call", ()):
        if name in called:
            failed.append(f"must_not_call: {name} is called")
    for name in spec.get("must_use_nodes", ()):
        if name not in used:
            failed.append(f"must_use_nodes: no {name}")
    for name in spec.get("must_not_use_nodes", ()):
        if name in used:
            failed.append(f"must_not_use_nodes: uses {name}")
    if "max_statements" in spec:
        count = sum(isinstance(node, ast.stmt) for node in ast.walk(tree))
        if count > spec["max_statements"]:
            failed.append(f"max_statements: {count} statements > {spec['max_statements']}")
    return failed


@scorer("code.ast_ok", scenarios=("code",), kinds=("refactor",))
def code_ast_ok(inp: ScoreInput) -> list[Score]:
    """1.0 when the answer's code meets every structural requirement of `expect.ast_check`."""
    spec = inp.case.expect.ast_check
    if not spec:
        return [Score("code.ast_ok", None, None, True, {"skipped": "the case has no ast_check"})]
    code, how = case_code(inp.case, inp.text) if not inp.error else ("", "none")
    failed = check_ast(code, spec) if code.strip() else ["no code in the output"]
    return [Score("code.ast_ok", 0.0 if failed else 1.0, not failed, True, {"failed": failed, "how": how})]


# ----------------------------------------------------------------------------------------------
# Test writing
# ----------------------------------------------------------------------------------------------

_STDLIB = set(getattr(sys, "stdlib_module_names", ())) | {"pytest", "unittest", "hypothesis"}


def tests_prelude(tests: str) -> str:
    """Lines that make `import solution` / `from solution import f` resolve to the code under test.

    Models import the function from a module they guess the name of; any top-level, non-stdlib module
    a test imports is served from the namespace the code under test was run in.
    """
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return ""
    mods = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods.append(node.module)
        elif isinstance(node, ast.Import):
            mods.extend(a.name for a in node.names)
    mods = [m for m in dict.fromkeys(mods) if "." not in m and m not in _STDLIB]
    if not mods:
        return ""
    return (
        "import sys as _es_s, types as _es_t\n"
        f"for _es_name in {mods!r}:\n"
        "    _es_m = _es_t.ModuleType(_es_name)\n"
        "    _es_m.__dict__.update({_k: _v for _k, _v in globals().items() if not _k.startswith('__')})\n"
        "    _es_s.modules[_es_name] = _es_m\n"
    )


def _tests_of(inp: ScoreInput) -> tuple[str, str]:
    if inp.error:
        return "", "none"
    code, how = extract_code(inp.text, kind="tests")
    return code, how


def _has_checks(tests: str) -> bool:
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return True  # let the run report the syntax error
    return any(isinstance(n, ast.Assert) for n in ast.walk(tree)) or any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (n.func.attr.startswith("assert") or n.func.attr in ("raises", "fail"))
        for n in ast.walk(tree)
    )


def _run_generated(case: Case, tests: str) -> list[sandbox.SandboxResult]:
    """The generated tests against the reference, then against each mutant (pooled, cached).

    The model wrote the tests, so they are the untrusted side: `isolation="tests"` runs them in an
    interpreter of their own that never holds the program under test or the verdict (docs/security.md)."""
    ex = case.expect
    full = tests_prelude(tests) + tests
    programs = [ex.reference or ""] + list(ex.mutants)
    isolation = "tests" if ex.isolation == "process" else ex.isolation
    return sandbox_jobs.run_tests_many([(p, full, ex.entry_point) for p in programs], isolation=isolation, **LIMITS)


@scorer("code.tests_pass_reference", scenarios=("code",), kinds=("tests",), **LIMITS)
def code_tests_pass_reference(inp: ScoreInput) -> list[Score]:
    """1.0 when the generated tests pass on the reference implementation (and check something)."""
    name = "code.tests_pass_reference"
    if not inp.case.expect.reference:
        return [Score(name, None, None, True, {"skipped": "the case has no reference"})]
    tests, how = _tests_of(inp)
    if not tests.strip():
        return [Score(name, 0.0, False, True, {"reason": "no code in the output", "how": how})]
    if not _has_checks(tests):
        return [Score(name, 0.0, False, True, {"reason": "the tests check nothing (no assert)", "how": how})]
    ref = _run_generated(inp.case, tests)[0]
    if ref.status == "error":
        return [Score(name, None, None, True, {"how": how, **_run_details(ref, inp.case.expect.isolation)})]
    ok = _status(ref) == "passed"
    return [Score(name, 1.0 if ok else 0.0, ok, True, {"how": how, **_run_details(ref, inp.case.expect.isolation)})]


@scorer("code.mutants_caught", scenarios=("code",), kinds=("tests",), **LIMITS)
def code_mutants_caught(inp: ScoreInput) -> list[Score]:
    """Share of `expect.mutants` the generated tests fail on (0 when they fail the reference too)."""
    name = "code.mutants_caught"
    ex = inp.case.expect
    if not ex.mutants or not ex.reference:
        return [Score(name, None, None, True, {"skipped": "the case has no mutants or no reference"})]
    tests, how = _tests_of(inp)
    if not tests.strip() or not _has_checks(tests):
        return [Score(name, 0.0, None, True, {"reason": "no tests in the output", "how": how, "caught": [], "missed": list(range(len(ex.mutants)))})]
    runs = _run_generated(inp.case, tests)
    ref, muts = runs[0], runs[1:]
    if ref.status == "error" or any(m.status == "error" for m in muts):
        return [Score(name, None, None, True, {"how": how, "reason": "sandbox error", "statuses": [r.status for r in runs]})]
    if _status(ref) != "passed":
        # tests that fail everything would "catch" every mutant
        return [
            Score(
                name,
                0.0,
                None,
                True,
                {"how": how, "reason": f"the tests fail on the reference ({_reason(ref)})", "caught": [], "missed": list(range(len(muts)))},
            )
        ]
    statuses = [_status(m) for m in muts]
    caught = [i for i, st in enumerate(statuses) if st != "passed"]
    missed = [i for i, st in enumerate(statuses) if st == "passed"]
    return [Score(name, len(caught) / len(muts), None, True, {"how": how, "caught": caught, "missed": missed, "statuses": statuses})]


# ----------------------------------------------------------------------------------------------
# Explanations
# ----------------------------------------------------------------------------------------------

_SUFFIX = r"(?:s|es|ed|d|ing|er|ers|ly)?"


def _term_pattern(term: str) -> re.Pattern:
    words = [re.escape(w) for w in term.casefold().split()]
    body = r"[\s\-_]+".join(words)
    return re.compile(rf"(?<!\w){body}{_SUFFIX}(?!\w)")


def mentions(text: str, term: Term) -> bool:
    """Whether `text` names the term or one of its synonyms (case-insensitive, simple inflections)."""
    t = text.casefold()
    return any(_term_pattern(w).search(t) for w in (term.term, *term.synonyms) if w.strip())


def _prose(text: str) -> str:
    """The answer without its fenced code blocks (quoting the code is not explaining it)."""
    return FENCE.sub(" ", text)


@scorer("code.concepts", scenarios=("code",), kinds=("explanation",))
def code_concepts(inp: ScoreInput) -> list[Score]:
    """Share of `expect.concepts` the explanation mentions (synonyms count)."""
    concepts = inp.case.expect.concepts
    if not concepts:
        return [Score("code.concepts", None, None, True, {"skipped": "the case has no concepts"})]
    prose = _prose(inp.text) if not inp.error else ""
    found = [c.term for c in concepts if mentions(prose, c)]
    missing = [c.term for c in concepts if c.term not in found]
    value = len(found) / len(concepts)
    return [Score("code.concepts", value, not missing, True, {"found": found, "missing": missing})]
