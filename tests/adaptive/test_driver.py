"""`evalsuite run --adaptive` end to end on the fake backend: early stops, the recorded decision,
the gate on an adaptive run, and resume after a kill."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from verdict_synth import write_sets, write_suite  # noqa: E402

from evalsuite.adaptive.driver import STATE_FILE, replay_run, run_adaptive  # noqa: E402
from evalsuite.adaptive.checks import AdaptiveSettings  # noqa: E402
from evalsuite.backends.base import make_backend  # noqa: E402
from evalsuite.judge import judge_run  # noqa: E402
from evalsuite.run.runner import RunOptions  # noqa: E402
from evalsuite.scoring.pipeline import run_suite
from evalsuite.cases.suite import load_suite  # noqa: E402

RUBRIC = {
    "schema_version": 1, "name": "brand", "alpha": 0.05,
    "rules": [
        {"name": "brand-json-valid", "scenario": "brand", "metric": "json.valid", "max_drop": 0.02, "require_significance": True},
        {"name": "brand-forbidden-terms", "scenario": "brand", "metric": "terminology.forbidden", "max_drop": 0.02, "require_significance": True},
        {"name": "brand-any-flip", "scenario": "brand", "metric": "json.valid", "max_flips": 0, "severity": "warn"},
    ],
}


def make_suite(root: Path, variants: list[dict]) -> Path:
    outputs = write_sets(root, n_brand=80)
    (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC), "utf-8")
    return write_suite(root, outputs, variants, rubric=str(root / "rubric.yaml"))


BROKEN = {"name": "broken", "degrade": {"kind": "corrupt_json", "rate": 0.3, "seed": 0}}
CLEAN = {"name": "clean", "quantization": {"method": "bnb", "bits": 8}}


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("adaptive")
    suite = load_suite(make_suite(root, [BROKEN, CLEAN]))
    return run_adaptive(suite, RunOptions(progress=False), AdaptiveSettings(stage="production"))


def test_broken_variant_stops_early_and_the_run_records_which_rule_decided(adaptive_run):
    st = adaptive_run.states["broken"]
    assert st.verdict == "fail" and st.generated <= 40 and st.total == 80  # 30% regression: half the cases or fewer
    state = json.loads((adaptive_run.store.dir / STATE_FILE).read_text())
    entry = state["variants"]["broken"]
    assert entry["stopped"] and entry["generated"] == st.generated and sum(len(b) for b in entry["batches"]) == st.generated
    dec = [c for c in entry["state"]["checks"] if c["status"] == "fail" and c["severity"] == "block"]
    assert [c["rule"] for c in dec] == ["brand-json-valid"] and dec[0]["how"] == "sequential" and dec[0]["decided_at"] <= st.generated
    # only the variant paid: the baseline ran every case once, the variant only the cases it needed
    gens = adaptive_run.store.generations()
    assert sum(g.variant == "baseline" for g in gens) == 80 and sum(g.variant == "broken" for g in gens) == st.generated


def test_clean_variant_passes_within_half_the_cases(adaptive_run):
    st = adaptive_run.states["clean"]
    assert st.verdict == "pass" and st.generated <= 40
    assert all(r.status == "pass" for r in st.results if r.severity == "block")


def test_gate_uses_the_sequential_decision(adaptive_run):
    v = judge_run(adaptive_run.store, stage="production").verdict
    assert v.judgeable and not v.passed and v.exit_code == 1
    assert v.failed_rules("broken") == ["brand-json-valid"] and v.failed_rules("clean") == []
    viol = v.violations[0]
    assert viol.numbers["how"] == "sequential" and "e-value" in viol.reason and viol.cases
    assert any(n.startswith("broken: adaptive verdict fail after") for n in v.notes)
    # the fixed-n gate on the peeked sample is not what decides: a clean variant's rules say adaptive
    assert all("adaptive" in r.note for r in v.results if r.variant == "clean" and r.rule.startswith("brand-json"))


def test_gate_on_an_adaptive_run_applies_reviews(adaptive_run, tmp_path):
    """Reviewers' `regression` verdicts fail the human-review rule of an adaptive run; `acceptable` waives nothing."""
    from evalsuite.review import api as review

    queue = tmp_path / "review.sqlite"
    v = judge_run(adaptive_run.store, stage="production", queue=queue, flag=True).verdict
    assert "human-review" not in v.failed_rules("broken")
    items = review.list_items(queue, status="open", variant="broken")
    assert len(items) >= 2, "the broken variant's corrupted outputs were flagged"
    review.annotate(items[0]["id"], "regression", note="broken JSON", reviewer="r1", queue=queue)
    for it in items[1:]:
        review.annotate(it["id"], "acceptable", reviewer="r1", queue=queue)
    v = judge_run(adaptive_run.store, stage="production", queue=queue).verdict
    assert v.failed_rules("broken") == ["brand-json-valid", "human-review"] and v.exit_code == 1
    assert v.failed_rules("clean") == []
    assert any("not waived" in n for n in v.notes)


class KilledBackend:
    """Delegates to a backend and dies (like a kill) on its `die_at`-th generate call."""

    def __init__(self, inner, die_at: int):
        self.inner, self.die_at, self.calls = inner, die_at, 0

    def generate(self, requests):
        self.calls += 1
        if self.calls == self.die_at:
            raise KeyboardInterrupt("killed")
        return self.inner.generate(requests)

    def __getattr__(self, item):
        return getattr(self.inner, item)


def test_resume_after_a_kill_continues_the_same_sequence_and_reaches_the_same_decision(tmp_path):
    settings = AdaptiveSettings(stage="production", batch_size=16)  # two backend calls (batch_size 8) per adaptive batch
    suite = load_suite(make_suite(tmp_path, [BROKEN]))

    def killing(v):
        be = make_backend(v)
        return KilledBackend(be, die_at=4) if v.name == "broken" else be

    with pytest.raises(KeyboardInterrupt):  # dies in the middle of the second adaptive batch
        run_adaptive(suite, RunOptions(progress=False, backend_factory=killing), settings)
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    state = json.loads((run_dir / STATE_FILE).read_text())
    assert len(state["variants"]["broken"]["batches"]) == 1 and state["variants"]["broken"]["pending"]
    resumed = run_adaptive(suite, RunOptions(progress=False, resume=str(run_dir)), settings)
    fresh = run_adaptive(suite, RunOptions(progress=False, runs_dir=str(tmp_path / "fresh"), cache_path=str(tmp_path / "fresh.sqlite")), settings)
    a = json.loads((resumed.store.dir / STATE_FILE).read_text())["variants"]["broken"]
    b = json.loads((fresh.store.dir / STATE_FILE).read_text())["variants"]["broken"]
    assert a["batches"] == b["batches"] and a["state"]["verdict"] == b["state"]["verdict"] == "fail"
    assert a["state"]["decided_after"] == b["state"]["decided_after"]
    assert [(c["key"], c["status"], c["decided_at"]) for c in a["state"]["checks"]] == [(c["key"], c["status"], c["decided_at"]) for c in b["state"]["checks"]]
    assert len({(g.case_id, g.sample) for g in resumed.store.generations() if g.variant == "broken"}) == a["generated"]
    assert resumed.store.read_json("status.json")["complete"]


def test_replay_of_a_full_run_needs_fewer_generations_for_the_same_verdict(tmp_path):
    """The demo's line: a stored full run replayed through the sequential checks (nothing generated)."""
    suite = load_suite(make_suite(tmp_path, [BROKEN, CLEAN]))
    store = run_suite(suite, RunOptions(progress=False)).store
    states = replay_run(store, stage="production")
    fixed = judge_run(store, stage="production").verdict
    assert states["broken"].verdict == "fail" and "brand-json-valid" in fixed.failed_rules("broken")
    assert states["clean"].verdict == "pass" and fixed.failed_rules("clean") == []
    assert states["broken"].generated <= 40 and states["clean"].generated <= 40 and states["clean"].total == 80
    from evalsuite.adaptive.driver import replay_summary
    from evalsuite.demo import adaptive_line

    line = adaptive_line(replay_summary(store, {v: bool(fixed.failed_rules(v)) for v in fixed.variants}, "production"))
    need = states["broken"].generated + states["clean"].generated
    assert f": {need} of 160 variant generations" in line and "same verdict as the full run for 2 of 2 variant(s)" in line


def test_cli_run_adaptive_then_gate(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from evalsuite.cli import app

    suite = make_suite(tmp_path, [BROKEN])
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", str(suite), "--adaptive", "--stage", "production", "--seed", "3", "-q"])
    assert r.exit_code == 0, r.output
    assert "broken: adaptive verdict fail (stage production) after" in " ".join(r.output.split())
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    assert json.loads((run_dir / STATE_FILE).read_text())["settings"]["seed"] == 3
    g = CliRunner().invoke(app, ["gate", str(run_dir), "--stage", "production"])
    assert g.exit_code == 1, g.output


def test_cli_until_rules_decides_every_block_rule(tmp_path, monkeypatch):
    """`--until rules`: the variant runs on past its failing rule until every block rule is decided
    (the default, `verdict`, stops at the first failing rule); the setting is recorded."""
    from typer.testing import CliRunner

    from evalsuite.cli import app

    suite = make_suite(tmp_path, [BROKEN])
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", str(suite), "--adaptive", "--stage", "production", "--until", "rules", "-q"])
    assert r.exit_code == 0, r.output
    state = json.loads((next((tmp_path / "out" / "runs").iterdir()) / STATE_FILE).read_text())
    assert state["settings"]["until"] == "rules"
    checks = [c for c in state["variants"]["broken"]["state"]["checks"] if c["severity"] == "block"]
    assert checks and all(c["status"] in ("pass", "fail") for c in checks), checks
    assert sum(c["status"] == "fail" for c in checks) >= 1


def test_warm_adaptive_rerun_calls_no_scorer_and_stops_at_the_same_place(tmp_path, scorer_calls):
    """Scoring in the adaptive loop reuses stored scores: the baseline is scored once, and a re-run
    with the same cache generates nothing, calls no scorer and reaches the same decisions."""
    calls = scorer_calls
    suite = load_suite(make_suite(tmp_path, [BROKEN]))
    settings = AdaptiveSettings(stage="production")
    cold = run_adaptive(suite, RunOptions(progress=False), settings)
    # each (variant, case) is scored at most once per scorer, however many batches ran
    brand_scorers = max(calls.values())
    assert cold.states["broken"].generated < 80 and brand_scorers <= 80 + cold.states["broken"].generated
    calls.clear()
    warm = run_adaptive(suite, RunOptions(progress=False), settings)
    assert sum(calls.values()) == 0, calls
    a, b = (json.loads((r.store.dir / STATE_FILE).read_text())["variants"]["broken"] for r in (cold, warm))
    assert a["batches"] == b["batches"] and a["state"]["verdict"] == b["state"]["verdict"] == "fail"
    assert warm.run.generated == 0 and warm.store.dir != cold.store.dir


def test_cli_tolerance_is_recorded_and_trades_cases_for_strictness(tmp_path, monkeypatch):
    """`--tolerance`: a clean variant passes later with a stricter (smaller) tolerance, earlier with
    a looser one; the setting is recorded; a tolerance outside (0, 1) is refused with its name."""
    from typer.testing import CliRunner

    from evalsuite.cli import app

    suite = make_suite(tmp_path, [CLEAN])
    monkeypatch.chdir(tmp_path)
    used = {}
    runs = tmp_path / "out" / "runs"
    for tol in ("0.05", "0.3"):
        before = set(runs.iterdir()) if runs.is_dir() else set()
        r = CliRunner().invoke(app, ["run", str(suite), "--adaptive", "--stage", "production", "--tolerance", tol, "-q"])
        assert r.exit_code == 0, r.output
        (run_dir,) = set(runs.iterdir()) - before
        state = json.loads((run_dir / STATE_FILE).read_text())
        assert state["settings"]["tolerance"] == float(tol)
        assert state["variants"]["clean"]["state"]["verdict"] == "pass"
        used[tol] = state["variants"]["clean"]["generated"]
    assert used["0.3"] < used["0.05"], used
    bad = CliRunner().invoke(app, ["run", str(suite), "--adaptive", "--tolerance", "1.5", "-q"])
    assert bad.exit_code != 0 and "tolerance" in bad.output
