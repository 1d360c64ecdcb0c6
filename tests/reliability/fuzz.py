"""Hypothesis strategies for the input-file fuzz tests: YAML-ish trees and mutations of valid files."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: deterministic: the same examples on every machine and every run, no example database
FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
#: EVALSUITE_FUZZ_SCALE=10 runs ten times the examples (a deeper search, outside `make test`)
SCALE = float(os.environ.get("EVALSUITE_FUZZ_SCALE", "1"))


def fuzz(examples: int) -> settings:
    """The deterministic profile with a bounded number of examples (times EVALSUITE_FUZZ_SCALE)."""
    return settings(FUZZ, max_examples=max(1, int(examples * SCALE)))

#: words the loaders know, so mutations often stay close to valid files and reach deep checks
WORDS = [
    "schema_version", "name", "version", "defaults", "documents", "cases", "glossary", "id", "scenario", "kind", "lang",
    "prompt", "messages", "role", "content", "system", "context", "expect", "tags", "text", "access", "roles", "canaries",
    "required_terms", "forbidden_terms", "citations", "must_abstain", "must_refuse", "schema", "tests", "reference", "mutants",
    "entry_point", "perturbation_of", "perturbation", "user_role", "term", "synonyms", "terms", "tone",
    "casesets", "variants", "generation", "rubric", "stage", "output_dir", "cache", "limit", "baseline", "noise", "backend",
    "model", "options", "quantization", "speculative", "degrade", "changes", "path", "exclude_tags", "kinds", "scenarios", "ids",
    "max_new_tokens", "temperature", "top_p", "samples", "seed", "batch_size", "timeout_s",
    "rules", "stages", "alpha", "multiple_testing", "metric", "min", "max", "max_drop", "max_drop_rel", "max_flips",
    "require_significance", "above_noise", "severity", "enabled", "required", "max_error_rate", "max_timeout_rate", "add",
    "dev", "pilot", "production", "kb_qa", "code", "brand", "grounded", "completion", "structured", "user", "assistant",
    "fake", "http", "d1", "q1", "q2", "c1", "en", "zh", "*", "block", "warn", "tarone", "holm", "citations.recall",
]
EDGE_STRINGS = ["", " ", "\n", "-", "~", "null", "1e400", "../../etc/passwd", "/dev/null", "x" * 300, "\u0000", "é中文", "def f(:", "{", "[d1]"]

scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(WORDS + EDGE_STRINGS) | st.text(max_size=12))
keys = st.sampled_from(WORDS) | st.text(max_size=8) | st.integers(-3, 3) | st.booleans() | st.none()
yamlish = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4), max_leaves=16)


def _nodes(doc: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _nodes(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _nodes(v, path + (i,))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def mutate(data: st.DataObject, doc: Any, max_mutations: int = 3) -> Any:
    """A copy of `doc` with 1..max_mutations random edits: replace a subtree, delete, add a key, duplicate an item."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, max_mutations), label="mutations")):
        nodes = _nodes(doc)
        path = data.draw(st.sampled_from(nodes), label="at")
        op = data.draw(st.sampled_from(["replace", "delete", "add", "duplicate"]), label="op")
        if not path or op == "replace":
            new = data.draw(yamlish, label="value")
            if not path:
                doc = new
            else:
                _get(doc, path[:-1])[path[-1]] = new
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        node = parent[key]
        if op == "delete":
            del parent[key]
        elif op == "add" and isinstance(node, dict):
            node[data.draw(keys, label="key")] = data.draw(yamlish, label="value")
        elif op == "add" and isinstance(node, list):
            node.append(data.draw(yamlish, label="value"))
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(node))
        else:
            parent[key] = data.draw(yamlish, label="value")
    return doc


def splice(data: st.DataObject, text: str) -> str:
    """Text-level damage: random text inserted at, or replacing a stretch from, a random position."""
    pos = data.draw(st.integers(0, len(text)), label="pos")
    cut = data.draw(st.integers(0, 20), label="cut")
    junk = data.draw(st.text(max_size=12) | st.sampled_from([":", "- ", "  ", "\t", "[", "{", "'", '"', "&a", "*a", "!!python/object:os.system", "---\n", "\n  x: y\n"]), label="junk")
    return text[:pos] + junk + text[pos + cut:]


def snapshot(root: Path) -> dict:
    """Every file under `root` with its size and modification time: a loader must change none of them."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            st_ = p.stat()
            out[str(p.relative_to(root))] = (st_.st_size, st_.st_mtime_ns)
    return out


class Counter:
    """Counts the examples the properties ran and how each ended (valid object or clear error);
    the reliability conftest prints them at the end of the session (figures for docs/reliability.md)."""

    counts: dict[tuple[str, str], int] = {}

    @classmethod
    def hit(cls, name: str, outcome: str) -> None:
        cls.counts[(name, outcome)] = cls.counts.get((name, outcome), 0) + 1


def check_error(exc: BaseException, root: Path) -> None:
    """A clear error: an EvalsuiteError naming a file of the fuzzed folder, each problem with its
    field, and a line that exists in that file when one is given."""
    from evalsuite.errors import EvalsuiteError, ValidationError
    from evalsuite.verdict.rubric import RubricError

    assert isinstance(exc, EvalsuiteError), f"{type(exc).__name__}: {exc}"
    msg = str(exc)
    assert str(root) in msg, f"the error does not name the file: {msg}"
    if isinstance(exc, ValidationError):
        assert exc.problems
        for p in exc.problems:
            assert p.file.startswith(str(root)) and p.field and p.message, p
            if p.line is not None:
                assert 1 <= p.line <= _line_count(p.file) + 1, (p, _line_count(p.file))
    if isinstance(exc, RubricError):
        for line in exc.problems:
            assert line.startswith(str(root)), line
            head = line[len(str(root)):].split(" ", 1)[0]
            parts = head.rstrip(":").split(":")
            if len(parts) > 1 and parts[1].isdigit():
                assert 1 <= int(parts[1]) <= _line_count(str(root) + parts[0]) + 1, line


def _line_count(file: str) -> int:
    try:
        return len(Path(file).read_bytes().splitlines())
    except OSError:
        return 0
