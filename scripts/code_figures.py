"""Print figures about the shape of evalsuite's code, for before/after comparisons of a refactoring.

    python scripts/code_figures.py [-v] [PACKAGE_DIR]      (-v lists each occurrence)

- the largest classes, in lines (end_lineno - lineno + 1);
- `Any` in function signatures (parameters and return annotations);
- calls of a class (a capitalised name) with more than 6 positional arguments;
- private names (`_x`) imported from another module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _mentions_any(node: ast.AST | None) -> int:
    if node is None:
        return 0
    return sum(1 for n in ast.walk(node) if (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any"))


def _signature_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return sum(_mentions_any(p.annotation) for p in params) + _mentions_any(fn.returns)


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def figures(root: Path) -> dict[str, object]:
    classes: list[tuple[int, str]] = []
    any_sigs: list[str] = []
    long_calls: list[str] = []
    private_imports: list[str] = []
    for path in _files(root):
        rel = path.relative_to(root.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ClassDef):
                classes.append(((node.end_lineno or node.lineno) - node.lineno + 1, f"{rel}:{node.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                any_sigs.extend([f"{where} {node.name}"] * _signature_any(node))
            elif isinstance(node, ast.Call):
                name = _callee(node)
                positional = [a for a in node.args if not isinstance(a, ast.Starred)]
                if name[:1].isupper() and len(positional) > 6:
                    long_calls.append(f"{where} {name}({len(positional)})")
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private_imports.append(f"{where} {node.module}.{alias.name}")
    classes.sort(reverse=True)
    return {"classes": classes, "any_in_signatures": any_sigs, "long_positional_calls": long_calls, "private_imports": private_imports}


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv[1:] if a != "-v"]
    root = Path(args[0]).resolve() if args else Path(__file__).resolve().parent.parent / "evalsuite"
    f = figures(root)
    classes = f["classes"]
    assert isinstance(classes, list)
    print("largest classes (lines):")
    for lines, name in classes[:5]:
        print(f"  {lines:5d}  {name}")
    print(f"classes over 300 lines: {sum(1 for n, _ in classes if n > 300)}")
    for key in ("any_in_signatures", "long_positional_calls", "private_imports"):
        items = f[key]
        assert isinstance(items, list)
        print(f"{key.replace('_', ' ')}: {len(items)}")
        if verbose:
            for item in items:
                print(f"  {item}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
