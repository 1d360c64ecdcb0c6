"""Issue 38, point 3: one exit-code table for every command (evalsuite.states.ExitCode,
docs/exit-codes.md): 0 pass, 1 regression or refusal, 2 cannot judge, 3 needs review, 4 your input
is wrong (a bad option, a missing run or file, an unknown variant or stage, an invalid suite or
rubric), 5 an internal error. Each command gets a missing run, an unknown variant and a bad stage."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from evalsuite.cli import app
from evalsuite.states import ExitCode

runner = CliRunner()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    root = tmp_path_factory.mktemp("codes")
    suite = root / "fake.yaml"
    suite.write_text((repo / "suites" / "fake.yaml").read_text().replace("../casesets", str(repo / "casesets")).replace("output_dir: ../reports", f"output_dir: {root}\ncache: {root}/cache.sqlite"))
    assert runner.invoke(app, ["run", str(suite), "-q"]).exit_code == 0
    (run,) = (root / "runs").iterdir()
    return {"suite": suite, "runs": root / "runs", "run": run, "ledger": root / "l.sqlite", "queue": root / "q.sqlite", "root": root}


CASES = [
    # (command, arguments; {suite} {runs} {ledger} {queue} {root} filled in)
    ("run: missing suite file", "run {root}/nope.yaml -q"),
    ("run: unknown variant", "run {suite} -q --variants nope"),
    ("run: missing run to resume", "run {suite} -q --resume typo"),
    ("run --adaptive: bad stage", "run {suite} -q --adaptive --stage prod"),
    ("score: missing run", "score typo --runs-dir {runs}"),
    ("compare: missing run", "compare typo --runs-dir {runs}"),
    ("summary: missing run", "summary typo --runs-dir {runs}"),
    ("summary: unknown variant", "summary last --runs-dir {runs} --variant nope"),
    ("gate: missing run", "gate typo --runs-dir {runs} --ledger {ledger}"),
    ("gate: bad stage", "gate last --runs-dir {runs} --stage prod --ledger {ledger}"),
    ("gate: missing rubric", "gate last --runs-dir {runs} --rubric {root}/nope.yaml --ledger {ledger}"),
    ("report: missing run", "report typo --runs-dir {runs} --ledger {ledger} --out {root}/rep"),
    ("report: bad stage", "report last --runs-dir {runs} --stage prod --ledger {ledger} --out {root}/rep"),
    ("promote: missing run", "promote fake-int8 --to dev --run typo --runs-dir {runs} --ledger {ledger}"),
    ("promote: unknown variant", "promote nope --to dev --run last --runs-dir {runs} --ledger {ledger}"),
    ("promote: bad stage", "promote fake-int8 --to prod --run last --runs-dir {runs} --ledger {ledger}"),
    ("rollback: bad stage", "rollback --stage prod --runs-dir {runs} --ledger {ledger}"),
    ("releases: bad stage", "releases --stage prod --runs-dir {runs} --ledger {ledger}"),
    ("recheck: bad stage", "recheck --stage prod --runs-dir {runs} --ledger {ledger}"),
    ("recheck: bad stage, dry run", "recheck --stage prod --dry-run --runs-dir {runs} --ledger {ledger}"),
    ("review flag: missing run", "review flag typo --runs-dir {runs} --queue {queue}"),
    ("review show: missing item", "review show 999 --queue {queue}"),
    ("export: missing run", "export typo --runs-dir {runs} --out {root}/x.csv"),
    ("validate: missing file", "validate {root}/nope.yaml"),
    ("import lm-eval: missing log", "import lm-eval {root}/nope.json --out {root}/imp"),
    ("a bad option (click)", "gate last --nope"),
    ("a missing argument (click)", "summary"),
    ("a bad option value (click)", "run {suite} -q --limit -1"),
]


@pytest.mark.parametrize("what, args", CASES, ids=[c[0] for c in CASES])
def test_your_input_is_wrong_exits_4_in_every_command(work, what, args):
    res = runner.invoke(app, args.format(**work).split())
    assert res.exit_code == ExitCode.USAGE == 4, f"{what}: {res.exit_code}\n{res.output}"
    assert [p.name for p in work["runs"].iterdir()] == [work["run"].name]  # no half-made run left behind


def test_the_verdict_codes_and_a_refusal(work):
    common = ["--runs-dir", str(work["runs"]), "--ledger", str(work["ledger"])]
    res = runner.invoke(app, ["gate", str(work["run"]), *common])
    assert res.exit_code == ExitCode.OK, res.output
    # a refusal is 1: rollback with nothing promoted
    assert runner.invoke(app, ["rollback", "--stage", "production", *common]).exit_code == ExitCode.FAILED
    # recheck with nothing stale (the environment is the one the gate recorded) is 0, and runs nothing
    res = runner.invoke(app, ["recheck", "--stage", "production", *common])
    assert res.exit_code == ExitCode.OK and "nothing stale for production" in res.output, res.output
    assert [p.name for p in work["runs"].iterdir()] == [work["run"].name]
    # review back with nothing to go back to is no silent 0
    assert runner.invoke(app, ["review", "back", "--queue", str(work["queue"])]).exit_code == ExitCode.USAGE


def test_the_table_is_one_enum_with_distinct_codes():
    codes = {c.name: int(c) for c in ExitCode}
    assert codes == {"OK": 0, "FAILED": 1, "CANNOT_JUDGE": 2, "NEEDS_REVIEW": 3, "USAGE": 4, "INTERNAL": 5, "INTERRUPTED": 130}


def test_an_internal_error_exits_5(tmp_path):
    """A bug (an exception that is not an EvalsuiteError) exits 5 from the `evalsuite` command, with its traceback."""
    code = (
        "import sys; from evalsuite import cli; from evalsuite.cli import running\n"
        "def boom(*a, **k): raise RuntimeError('a bug')\n"
        "running.load_suite = boom\n"
        "import evalsuite.cases.suite as s; s.load_suite = boom\n"
        "sys.argv = ['evalsuite', 'run', 'x.yaml']; cli.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == ExitCode.INTERNAL == 5, proc.stderr[-2000:]
    assert "RuntimeError: a bug" in proc.stderr and "internal error" in proc.stderr


def test_the_docs_table_is_the_enum():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "exit-codes.md").read_text("utf-8")
    rows = {int(code): name for code, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", doc, flags=re.M)}
    assert rows == {int(c): c.name for c in ExitCode}
