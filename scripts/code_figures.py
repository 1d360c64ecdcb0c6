"""Print figures about the shape of evalsuite's code, for before/after comparisons of a refactoring.

    python scripts/code_figures.py [-v] [PACKAGE_DIR]      (-v lists each occurrence)

- the largest classes, in lines (end_lineno - lineno + 1);
- `Any` in function signatures (parameters and return annotations);
- calls of a class (a capitalised name) with more than 6 positional arguments;
- private names (`_x`) imported from another module (and outside `sandbox/`);
- the counts of issue 41's acceptance table: `getattr` on a backend under `run/`, SSE parsers,
  Prometheus parsers, percentile functions (and inline nearest-rank formulas), tables of fault
  kinds, modules over 500 lines.
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


_FAULT_NAMES = {"retry", "disconnect", "burst", "server_killed", "overlong_input", "load_failure"}
_PERCENTILE_NAMES = {"percentile", "pct", "quantile", "_percentile", "_pct"}


def _backend_getattr(node: ast.Call) -> bool:
    """`getattr(<a backend>, ...)`: its first argument names a backend (`backend`, `be`, `inner`, `x.backend`)."""
    if _callee(node) != "getattr" or not isinstance(node.func, ast.Name) or not node.args:
        return False
    text = ast.unparse(node.args[0])
    return "backend" in text or text in ("be", "inner", "self.inner")


def _sse_parser(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function that reads server-sent events itself (it looks for `data:` lines)."""
    return any(isinstance(n, ast.Constant) and n.value == "data:" for n in ast.walk(fn))


def _prometheus_parser(node: ast.AST) -> bool:
    """A Prometheus sample-line pattern: a regex literal for metric names (`[a-zA-Z_:]`)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and "_:][" in node.value and node.value.startswith("^(")


def _nearest_rank_formula(node: ast.Call) -> bool:
    """An inline percentile: `ceil(0.95 * len(xs))` and the like (a share times a length)."""
    if _callee(node) != "ceil" or not node.args:
        return False
    return any(isinstance(n, ast.Constant) and isinstance(n.value, float) and 0 < n.value < 1 for n in ast.walk(node.args[0]))


def _fault_table(node: ast.AST) -> bool:
    """A literal table (tuple, list, set, dict) naming at least four fault kinds (by element, key, `name=` or a row's first column)."""
    if isinstance(node, ast.Dict):
        items: list[ast.AST] = [k for k in node.keys if k is not None]
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = list(node.elts)
    else:
        return False
    names = set()
    for item in items:
        if isinstance(item, ast.Call):
            item = next((kw.value for kw in item.keywords if kw.arg == "name"), item)
        elif isinstance(item, (ast.Tuple, ast.List)) and item.elts:  # a row of a table: its first column
            item = item.elts[0]
        if isinstance(item, ast.Constant) and item.value in _FAULT_NAMES:
            names.add(item.value)
    return len(names) >= 4


def _table_counts(path: Path, rel: Path, tree: ast.AST, counts: dict[str, list[str]]) -> None:
    """Issue 41's counts for one module."""
    in_run = rel.parts[:2] == ("evalsuite", "run")
    if len(path.read_text(encoding="utf-8").splitlines()) > 500:
        counts["modules_over_500_lines"].append(str(rel))
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and in_run and _backend_getattr(node):
            counts["getattr_on_a_backend_in_run"].append(where)
        if isinstance(node, ast.Call) and _nearest_rank_formula(node):
            counts["percentile_functions"].append(f"{where} (inline)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _sse_parser(node):
                counts["sse_parsers"].append(f"{where} {node.name}")
            if node.name in _PERCENTILE_NAMES:
                counts["percentile_functions"].append(f"{where} {node.name}")
        if _prometheus_parser(node):
            counts["prometheus_parsers"].append(where)
        if _fault_table(node):
            counts["fault_kind_tables"].append(where)


_TABLE = (
    "getattr_on_a_backend_in_run",
    "sse_parsers",
    "prometheus_parsers",
    "percentile_functions",
    "fault_kind_tables",
    "private_imports_outside_sandbox",
    "any_in_signatures",
    "modules_over_500_lines",
)


def figures(root: Path) -> dict[str, object]:
    classes: list[tuple[int, str]] = []
    any_sigs: list[str] = []
    long_calls: list[str] = []
    private_imports: list[str] = []
    counts: dict[str, list[str]] = {k: [] for k in _TABLE if k not in ("any_in_signatures", "private_imports_outside_sandbox")}
    for path in _files(root):
        rel = path.relative_to(root.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        _table_counts(path, rel, tree, counts)
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
    outside = [p for p in private_imports if "/sandbox/" not in p.split(":")[0] and not p.split(" ")[1].startswith("evalsuite.sandbox")]
    return {
        "classes": classes,
        "any_in_signatures": any_sigs,
        "long_positional_calls": long_calls,
        "private_imports": private_imports,
        "private_imports_outside_sandbox": outside,
        **counts,
    }


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
    for key in ("any_in_signatures", "long_positional_calls", "private_imports", *(k for k in _TABLE if k != "any_in_signatures")):
        items = f[key]
        assert isinstance(items, list)
        print(f"{key.replace('_', ' ')}: {len(items)}")
        if verbose:
            for item in items:
                print(f"  {item}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
