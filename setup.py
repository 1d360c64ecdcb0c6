"""The wheel carries what the tool needs beside its code: build_py copies the repository's starter case
sets, default rubric, demo suite and notebooks into the package as evalsuite/_shipped/ (found at run
time by evalsuite.shipped through importlib.resources). The repository keeps them at its top."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TOP = Path(__file__).resolve().parent
#: (source under the repository's top, destination under evalsuite/_shipped/)
SHIPPED = [("casesets", "casesets"), ("rubrics/default.yaml", "rubrics/default.yaml"), ("suites/demo.yaml", "suites/demo.yaml")]
SHIPPED += [(f"notebooks/{n}.ipynb", f"notebooks/{n}.ipynb") for n in ("review", "explore")]


class BuildWithShipped(build_py):
    """build_py, then the shipped files into the build's evalsuite/_shipped/."""

    def run(self):
        super().run()
        dest_root = Path(self.build_lib) / "evalsuite" / "_shipped"
        shutil.rmtree(dest_root, ignore_errors=True)  # an in-tree build/ keeps files the repository has since removed
        for src, dest in SHIPPED:
            s = TOP / src
            files = [f for f in sorted(s.rglob("*")) if f.is_file()] if s.is_dir() else [s]
            for f in files:
                target = dest_root / dest / f.relative_to(s) if s.is_dir() else dest_root / dest
                self.mkpath(str(target.parent))
                self.copy_file(str(f), str(target))


setup(cmdclass={"build_py": BuildWithShipped})
