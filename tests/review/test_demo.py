"""`make demo` ends by flagging the run's differences and saying how many await review and how to open them."""

from __future__ import annotations

import io
import re

from rich.console import Console

from evalsuite.demo import DemoOptions, run_demo
from evalsuite.review import api

from .conftest import variant_outputs, write_sets, write_suite


def test_the_demo_flags_its_differences_into_the_queue(tmp_path):
    base = write_sets(tmp_path, n_kb=7, n_brand=2)
    opt, _ = variant_outputs(base)
    suite = write_suite(tmp_path, base, [{"name": "opt", "backend": "fake", "options": {"outputs": opt, "default": "no output"}}])
    out = io.StringIO()
    run_demo(suite, DemoOptions(profile="full", runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite")), console=Console(file=out, width=400))
    text = out.getvalue()
    m = re.search(r"review queue: (\d+) output\(s\) await review \((\d+) new\) in (\S+); open them with `make notebook` \(notebooks/review.ipynb\) or `evalsuite review list`", text)
    assert m, text[-2000:]
    assert m.group(3) == str(tmp_path / "review.sqlite")
    assert int(m.group(1)) == api.stats(m.group(3))["open"] == int(m.group(2)) == 4
    lines = [ln for ln in text.splitlines() if ln.strip()]
    verdict = next(i for i, ln in enumerate(lines) if re.match(r"(PASS|REGRESSION|CANNOT JUDGE|NEEDS REVIEW)\b", ln))
    footer = next(i for i, ln in enumerate(lines) if ln.startswith("review queue:"))
    assert verdict < footer and len(lines) - footer <= 5  # at the end, after the verdict
