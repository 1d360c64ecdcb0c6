"""The package's code keeps a shape a newcomer can read: no class over 300 lines (issue 28).

A class that grows past the limit does several jobs; split it by concern (as backends/http.py is
split into options, transport, stream reader and launchers) rather than raising the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "evalsuite"
MAX_CLASS_LINES = 300


def class_sizes(source: str, filename: str = "<source>") -> list[tuple[str, int]]:
    """(class name, lines from `class` to its last line) for every class in a module, nested ones too."""
    tree = ast.parse(source, filename=filename)
    return [(n.name, (n.end_lineno or n.lineno) - n.lineno + 1) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def oversized(root: Path, limit: int = MAX_CLASS_LINES) -> list[str]:
    """`path:Class (N lines)` for every class under `root` longer than `limit` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for name, lines in class_sizes(path.read_text(encoding="utf-8"), str(path)):
            if lines > limit:
                found.append(f"{path.relative_to(root.parent)}:{name} ({lines} lines)")
    return found


def test_no_class_in_evalsuite_is_over_300_lines():
    offenders = oversized(PACKAGE)
    assert not offenders, f"classes over {MAX_CLASS_LINES} lines (split them by concern): " + ", ".join(offenders)


@pytest.mark.parametrize(
    "body_lines, limit, flagged",
    [(3, 5, False), (4, 5, True), (298, 300, False), (299, 300, True)],  # class line + docstring + body lines
)
def test_the_check_counts_from_the_class_line_to_its_last_line(tmp_path, body_lines, limit, flagged):
    pkg = tmp_path / "evalsuite"
    (pkg / "sub").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(body_lines))
    (pkg / "sub" / "big.py").write_text(f'class Big:\n    """doc"""\n{body}\n\n\nclass Small:\n    pass\n')
    expected = [f"evalsuite/sub/big.py:Big ({body_lines + 2} lines)"] if flagged else []
    assert oversized(pkg, limit) == expected


def test_nested_classes_are_measured_too():
    assert class_sizes("class A:\n    class B:\n        x = 1\n        y = 2\n") == [("A", 4), ("B", 3)]
