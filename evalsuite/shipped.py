"""What evalsuite ships beside its code: the starter case sets, the default rubric, the demo suite and
the notebooks, found through `importlib.resources`.

Why one module: the repository keeps them at its top (casesets/, rubrics/, suites/, notebooks/), and
the wheel's build copies them into the package as `evalsuite/_shipped/` (setup.py). From an installed
wheel they are package data; from a clone (an editable install, or PYTHONPATH on the source tree)
the repository's own files answer. `shipped_path` is the one place that knows which.

A suite refers to a shipped file as `shipped:NAME` (`casesets: [shipped:kb_qa]`,
`rubric: shipped:default`); `evalsuite init` copies them into the user's project instead, so the
project owns its fixed samples.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Literal

from . import __version__
from .errors import EvalsuiteError, UnknownNameError

__all__ = ["PREFIX", "Kind", "copy_notebooks", "copy_starter", "names", "origin", "resolve_ref", "shipped_path", "shipped_root"]

#: how a suite names a shipped file
PREFIX = "shipped:"
#: what is shipped, and where it lies under the shipped root (`{}`: the name)
Kind = Literal["caseset", "rubric", "suite", "notebook"]
_LAYOUT: dict[str, tuple[str, str]] = {
    "caseset": ("casesets", "{}"),
    "rubric": ("rubrics", "{}.yaml"),
    "suite": ("suites", "{}.yaml"),
    "notebook": ("notebooks", "{}.ipynb"),
}
#: the suites and notebooks the wheel carries (the other suites/ files are the repository's own)
SHIPPED_SUITES = ("demo",)
NOTEBOOKS = ("review", "explore")


def _package() -> Path:
    """The installed package's folder (a wheel installs it as plain files)."""
    return Path(str(resources.files("evalsuite")))


def shipped_root() -> Path:
    """The folder holding casesets/, rubrics/, suites/ and notebooks/: the installed package's
    `_shipped/`, else (a clone) the repository's top."""
    pkg = _package()
    inside = pkg / "_shipped"
    if (inside / "rubrics").is_dir():
        return inside
    top = pkg.parent
    if (top / "rubrics" / "default.yaml").is_file() and (top / "casesets").is_dir():
        return top
    raise EvalsuiteError(f"evalsuite's shipped files are missing (looked in {inside} and {top}): reinstall evalsuite (pip install --force-reinstall evalsuite)")


def names(kind: Kind) -> list[str]:
    """The shipped names of a kind (case sets: the folders under casesets/)."""
    folder, pattern = _LAYOUT[kind]
    root = shipped_root() / folder
    if kind == "caseset":
        return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if kind == "suite":
        return list(SHIPPED_SUITES)
    if kind == "notebook":
        return list(NOTEBOOKS)
    suffix = pattern.format("")
    return sorted(p.name[: -len(suffix)] for p in root.glob("*" + suffix))


def shipped_path(kind: Kind, name: str) -> Path:
    """Where a shipped file is: the default rubric (`shipped_path("rubric", "default")`), a case set
    (`"caseset", "kb_qa"`), the demo suite, a notebook. Unknown names list the shipped ones."""
    name = name.removeprefix(PREFIX)
    folder, pattern = _LAYOUT[kind]
    path = shipped_root() / folder / pattern.format(name)
    if not name or "/" in name or "\\" in name or name.startswith(".") or not path.exists():
        raise UnknownNameError(f"shipped {kind}", name, names(kind))
    return path


def resolve_ref(ref: str, base_dir: str | os.PathLike, kind: Kind = "caseset") -> str:
    """A path as a suite file gives it: `shipped:NAME` -> the shipped file; a relative path -> relative
    to the suite's folder (`base_dir`); an absolute path as is."""
    if ref.startswith(PREFIX):
        return str(shipped_path(kind, ref))
    return ref if Path(ref).is_absolute() else os.path.normpath(Path(base_dir) / ref)


def origin(path: str | os.PathLike) -> str:
    """Where a case set or rubric comes from, in words: shipped with evalsuite, or the project's own."""
    p = Path(path).resolve()
    try:
        root = shipped_root().resolve()
    except EvalsuiteError:
        return "this project"
    if p == root or root in p.parents:
        inside = root.name == "_shipped"
        return f"shipped with evalsuite {__version__}" + ("" if inside else " (the repository's copy)")
    return "this project"


def _copy_tree(src: Path, dest: Path) -> list[Path]:
    """Copy the files under `src` to `dest`, keeping those already there (the user's edits win)."""
    written = []
    for f in sorted(src.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts:
            continue
        target = dest / f.relative_to(src)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        written.append(target)
    return written


def copy_starter(casesets_dir: str | os.PathLike | None, rubric_file: str | os.PathLike | None) -> list[Path]:
    """Copy the starter case sets into `casesets_dir` and the default rubric to `rubric_file` (either
    None: skipped); a file already there is kept. Returns the files written."""
    written: list[Path] = []
    if casesets_dir is not None:
        written += _copy_tree(shipped_root() / "casesets", Path(casesets_dir))
    if rubric_file is not None and not Path(rubric_file).exists():
        Path(rubric_file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shipped_path("rubric", "default"), rubric_file)
        written.append(Path(rubric_file))
    return written


def copy_notebooks(dest_dir: str | os.PathLike) -> list[Path]:
    """Copy review.ipynb and explore.ipynb into `dest_dir` (those already there are kept); returns
    every notebook's path there."""
    out = []
    for name in NOTEBOOKS:
        src = shipped_path("notebook", name)
        target = Path(dest_dir) / src.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        out.append(target)
    return out
