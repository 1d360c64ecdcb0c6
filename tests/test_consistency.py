"""One verdict everywhere (issue 21): for a fixed-n and an adaptive run, with no reviews, accepted
outputs, a reviewer's regression, or more open items than `max_open`, judged for the suite's stage
or for a stage given, the status, the failing rules, the stage and the exit code agree across
`evalsuite gate`, report.md, report.html, the pytest plugin's items and the demo's verdict line.

Before the one judging path, report.md said PASS (stage pilot, no human-review rule) on an adaptive
run whose gate said REGRESSION (stage production): this matrix holds each output to the gate.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup
from rich.console import Console
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verdict_synth import write_sets, write_suite  # noqa: E402

# pytester's in-process runs drop modules first imported inside them (numpy cannot be reloaded)
import evalsuite.judge  # noqa: E402,F401
import evalsuite.scoring.run as _scoring_run  # noqa: E402
from evalsuite.adaptive.driver import run_adaptive  # noqa: E402
from evalsuite.adaptive.checks import AdaptiveSettings  # noqa: E402
from evalsuite.cases.suite import load_suite  # noqa: E402
from evalsuite.cli import app  # noqa: E402
from evalsuite.demo import judge_and_report  # noqa: E402
from evalsuite.review import api as review  # noqa: E402
from evalsuite.run.runner import RunOptions  # noqa: E402
from evalsuite.run.store import RunStore  # noqa: E402
from evalsuite.scoring.pipeline import run_suite  # noqa: E402

_scoring_run.load_scorers()

RUBRIC = {
    "schema_version": 1,
    "name": "consistency",
    "rules": [
        {"name": "brand-json-valid", "scenario": "brand", "metric": "json.valid", "max_drop": 0.02, "require_significance": True},
        {"name": "brand-forbidden-terms", "scenario": "brand", "metric": "terminology.forbidden", "max_drop": 0.02, "require_significance": True},
    ],
    "review": {"max_open": 2},
}
REVIEWS = ("none", "acceptable", "regression", "over-max-open")
#: what every output must say, per review state: (status, rules failed per variant, exit code)
EXPECTED = {
    "none": ("pass", set(), 0),
    "acceptable": ("pass", set(), 0),
    "regression": ("regression", {("human-review", "opt")}, 1),
    "over-max-open": ("needs review", set(), 3),
}


def _outputs(base: dict) -> dict:
    """The variant: every fourth brand card reworded (valid JSON, same keys): flagged for review, passing every rule."""
    opt = dict(base)
    for cid in [c for c in sorted(base) if c.startswith("brand-")][::4]:
        card = json.loads(base[cid])
        card["tagline"] = "A wholly different line about the product, reworded from scratch"
        card["features"] = list(reversed(card["features"])) + ["one more feature"]
        opt[cid] = json.dumps(card)
    return opt


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A fixed-n and an adaptive run of the same suite (stage: pilot), each in its own folder."""
    root = tmp_path_factory.mktemp("consistency")
    base = write_sets(root, n_brand=80)
    (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC), "utf-8")
    suite = write_suite(root, base, [{"name": "opt", "quantization": {"method": "bnb", "bits": 4}, "options": {"outputs": _outputs(base), "default": "no"}, "changes": ["quantization", "backend"]}],
                        rubric=str(root / "rubric.yaml"))  # fmt: skip
    doc = yaml.safe_load(suite.read_text())
    doc["stage"] = "pilot"
    suite.write_text(yaml.safe_dump(doc))
    s = load_suite(suite)
    fixed = run_suite(s, RunOptions(progress=False)).store
    adaptive = run_adaptive(s, RunOptions(progress=False), AdaptiveSettings(stage="pilot")).store
    return {"suite": suite, "fixed": fixed, "adaptive": adaptive}


def _cell(runs, kind: str, reviews: str, tmp_path: Path) -> RunStore:
    """A copy of the run in its own runs folder, with the review queue in the state the cell names."""
    runs_dir = tmp_path / "reports" / "runs"
    runs_dir.mkdir(parents=True)
    store = RunStore(shutil.copytree(runs[kind].dir, runs_dir / runs[kind].dir.name))
    if reviews == "none":
        return store
    assert CliRunner().invoke(app, ["gate", str(store.dir), "--runs-dir", str(runs_dir), "--flag"]).exit_code in (0, 3)
    queue = tmp_path / "reports" / "review.sqlite"
    items = review.list_items(queue, status="open")
    assert len(items) > RUBRIC["review"]["max_open"], "the reworded cards are flagged"
    if reviews != "over-max-open":
        for i, it in enumerate(items):
            verdict = "regression" if (reviews == "regression" and i == 0) else "acceptable"
            review.annotate(it["id"], verdict, note="matrix", reviewer="r1", queue=queue)
    return store


def _gate(store: RunStore, stage_args: list[str], tmp_path: Path) -> dict:
    out = tmp_path / "verdict.json"
    res = CliRunner().invoke(app, ["gate", str(store.dir), "--runs-dir", str(store.dir.parent), "--json", str(out), *stage_args])
    doc = json.loads(out.read_text())
    failed = {(r["rule"], r["variant"]) for r in doc["results"] if r["status"] == "fail"}
    return {"status": doc["status"], "stage": doc["stage"], "failed": failed, "exit": res.exit_code}


def _report(store: RunStore, stage_args: list[str], tmp_path: Path) -> tuple[dict, dict]:
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", str(store.dir), "--runs-dir", str(store.dir.parent), "--out", str(out), *stage_args])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text("utf-8")
    head = re.search(r"^## evalsuite: \S+ \*\*([A-Z ]+)\*\*", md, re.M).group(1).lower()
    md_failed = set()
    for m in re.finditer(r"^- ❌ \*\*([\w-]+)\*\* \(([^)]*)\)", md, re.M):
        md_failed |= {(m.group(1), v.strip()) for v in m.group(2).split(",")}
    md_view = {"status": head, "stage": re.search(r"stage `(\w+)`", md).group(1), "failed": md_failed}
    soup = BeautifulSoup((out / "report.html").read_text("utf-8"), "html.parser")
    html_failed = set()
    for li in soup.select("#rules li[data-rule]"):
        if li.select_one(".badge").get_text(strip=True) == "FAIL":
            html_failed |= {(li["data-rule"], v) for v in li["data-variants"].split(",")}
    html_view = {"status": soup.select_one("#overall").get_text(strip=True).lower(), "stage": soup.select_one("#stage").get_text(strip=True), "failed": html_failed}
    return md_view, html_view


def _plugin(pytester, runs, store: RunStore, stage: str | None) -> dict:
    xml = pytester.path / "junit.xml"
    args = ["--evalsuite-suite", str(runs["suite"]), "--evalsuite-run", str(store.dir), "--evalsuite-runs-dir", str(store.dir.parent), "--junitxml", str(xml)]
    result = pytester.runpytest("-p", "no:cacheprovider", *args, *(["--evalsuite-stage", stage] if stage else []))
    failed, verdicts, stages = set(), set(), set()
    for tc in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        verdicts.add(props.get("evalsuite_verdict"))
        stages.add(props.get("evalsuite_stage"))
        if tc.find("failure") is not None:
            failed.add((props["evalsuite_rule"], props["evalsuite_variant"]))
    assert len(verdicts) == 1 and len(stages) == 1, (verdicts, stages)
    return {"status": verdicts.pop(), "stage": stages.pop(), "failed": failed, "exit": int(result.ret)}


def _demo(store: RunStore, flag: bool) -> dict:
    buf = io.StringIO()
    judgment, _ = judge_and_report(Console(file=buf, width=400, color_system=None), store, flag=flag)
    head = buf.getvalue().splitlines()[0]
    status = re.match(r"(PASS|REGRESSION|NEEDS REVIEW|CANNOT JUDGE)\b", head).group(1).lower()
    return {"status": status, "stage": re.search(r"stage (\w+)", head).group(1), "exit": judgment.exit_code}


@pytest.mark.parametrize("stage", [None, "production"], ids=["suite-stage", "stage-given"])
@pytest.mark.parametrize("reviews", REVIEWS)
@pytest.mark.parametrize("kind", ["fixed", "adaptive"])
def test_every_output_gives_the_same_verdict(runs, kind, reviews, stage, tmp_path, pytester):
    status, failed, code = EXPECTED[reviews]
    stage_name = stage or "pilot"  # the suite's stage: when none is given
    store = _cell(runs, kind, reviews, tmp_path)
    stage_args = ["--stage", stage] if stage else []
    gate = _gate(store, stage_args, tmp_path)
    md, html = _report(store, stage_args, tmp_path)
    plugin = _plugin(pytester, runs, store, stage)
    # the demo judges for the suite's stage; it flags first (an idempotent step once the run is flagged)
    demo = _demo(store, flag=reviews != "none") if stage is None else None
    assert gate == {"status": status, "stage": stage_name, "failed": failed, "exit": code}
    assert md == {"status": status, "stage": stage_name, "failed": failed}
    assert html == {"status": status, "stage": stage_name, "failed": failed}
    assert plugin == {"status": status, "stage": stage_name, "failed": failed, "exit": 1 if failed else 0}
    if demo is not None:
        assert demo == {"status": status, "stage": stage_name, "exit": code}
