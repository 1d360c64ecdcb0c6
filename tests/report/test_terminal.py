"""The terminal verdict a person can read: `evalsuite demo` fits on one screen, `evalsuite gate`
prints one line per failing or warning rule with its top three cases unless --verbose."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.report.model import rule_lines
from evalsuite.report.terminal import rule_line, verdict_view
from verdict_synth import write_sets, write_suite

runner = CliRunner()


def _text(fn, width=160) -> str:
    buf = io.StringIO()
    fn(Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def test_short_verdict_one_line_per_rule(report):
    v = report.data.verdict
    text = _text(lambda c: c.print(verdict_view(v, scenarios=report.data.scenarios, report_path="R/report.html")))
    lines = text.rstrip("\n").splitlines()
    assert lines[0].startswith("REGRESSION run ") and lines[-1] == "report: R/report.html"
    rules = [ln for ln in lines if ln.startswith(("FAIL ", "warn "))]
    assert [ln.split()[1] for ln in rules] == ["brand-json", "kb-citations", "code-tests"]
    kb = next(ln for ln in rules if "kb-citations" in ln)
    viol = next(x for x in v.violations if x.rule == "kb-citations")
    assert f"top cases: {', '.join(viol.cases[:3])} (+{len(viol.cases) - 3})" in kb and "nocite" in kb
    assert "diff " not in text and "offending cases" not in text  # the evidence stays in --verbose / --json / the report
    grid = [ln for ln in lines if ln.split() and ln.split()[0] in ("clean", "nocite", "badjson", "badcode")]
    assert len(grid) == 4 and "REGRESSION" in next(g for g in grid if g.startswith("nocite"))
    full = _text(lambda c: c.print(verdict_view(v, verbose=True)))
    assert "offending cases" in full and len(full.splitlines()) > len(lines)


@pytest.mark.parametrize(
    "entry, expected",
    [
        ({"rule": "r", "status": "fail", "variants": ["a", "b"], "reason": "x: 3 flips", "top_cases": ["c1", "c2", "c3"], "n_cases": 5, "violations": 2},
         "FAIL r · a, b · x: 3 flips (+1 more) · top cases: c1, c2, c3 (+2)"),
        ({"rule": "perf", "status": "warn", "variants": ["a"], "reason": "slow", "top_cases": [], "n_cases": 0, "violations": 1}, "warn perf · a · slow"),
    ],
)
def test_rule_line(entry, expected):
    assert rule_line(entry) == expected


def test_gate_command_short_unless_verbose(report_run, tmp_path):
    store, rubric = report_run
    args = ["gate", str(store.dir), "--rubric", str(rubric), "--stage", "production", "--json", str(tmp_path / "v.json")]
    short = runner.invoke(app, args)
    assert short.exit_code == 1, short.output
    assert "FAIL kb-citations · nocite" in short.output and "top cases:" in short.output and "offending cases" not in short.output
    verbose = runner.invoke(app, args + ["--verbose"])
    assert verbose.exit_code == 1 and "offending cases" in verbose.output and "diff " in verbose.output
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["violations"][0]["diffs"], "the --json file keeps the full evidence"


def test_rule_lines_rank_shared_cases_first(report):
    lines = rule_lines(report.data.verdict, top=2)
    assert all(len(x["top_cases"]) <= 2 for x in lines)
    assert [x["status"] for x in lines] == sorted((x["status"] for x in lines), key=lambda s: s != "fail")


@pytest.fixture(scope="module")
def demo_like_suite(tmp_path_factory):
    """The demo's shape on the fake backend: a noise rerun and six variants, four of them damaged."""
    root = tmp_path_factory.mktemp("demo")
    outputs = write_sets(root, n_kb=6, n_code=3, n_brand=6)
    variants = [{"name": "baseline-rerun", "noise": True, "generation": {"batch_size": 4}}]
    for i, kind in enumerate(["drop_citations", "corrupt_json", "break_code", "leak_canary", None, None]):
        v = {"name": f"variant-{i}", "quantization": {"method": "bnb", "bits": 4 + i}}
        if kind:
            v["degrade"] = {"kind": kind, "rate": 1.0, "seed": i}
        variants.append(v)
    return root, write_suite(root, outputs, variants, name="demo")


def test_demo_output_fits_one_screen_and_ends_with_the_report(demo_like_suite, monkeypatch):
    from evalsuite.demo import DemoOptions, run_demo

    root, suite = demo_like_suite
    monkeypatch.setenv("EVALSUITE_REVIEW_QUEUE", str(root / "review.sqlite"))
    buf = io.StringIO()
    code = run_demo(suite, DemoOptions(profile="quick", runs_dir=str(root / "reports" / "runs"), cache_path=str(root / "c.sqlite")), console=Console(file=buf, width=120, color_system=None)).exit_code
    lines = buf.getvalue().rstrip("\n").splitlines()
    assert code == 1
    assert len(lines) <= 60, "\n".join(lines)
    assert lines[-1].startswith("report: ") and "report.html" in lines[-1]
    path = lines[-1].split()[1]
    assert (root / "reports").exists() and path.endswith("report.html")
    from pathlib import Path

    assert Path(path).is_file() and (Path(path).parent / "report.md").is_file()
    assert Path(path).parent.parent == root / "reports"  # reports/<run-id>/report.html
    assert any(ln.startswith("REGRESSION run ") for ln in lines)
    assert sum(1 for ln in lines if ln.startswith(("FAIL ", "warn "))) >= 3
    assert not any("offending cases" in ln or ln.lstrip().startswith("diff ") for ln in lines)
