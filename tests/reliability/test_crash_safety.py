"""Crash safety: SIGKILL a real `evalsuite run` (and `evalsuite score`) at seeded random moments,
resume each time, and end with exactly what an uninterrupted run gives.

A kill moment is drawn (seeded) in one of the phases of the process: start-up, the generations
(timed from its first backend call), or, for the last kill and once everything is generated, the
run's own scoring and final writes. The phase durations come from an uninterrupted reference run
on the same machine, so the kills spread over every phase whatever the machine's speed.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from evalsuite.scoring.run import score_run
from evalsuite.run.store import RunStore

from .helpers import FIGURES, calls, cli, cli_env, content, one_per_key, score_content, write_suite

N_CASES, SAMPLES, VARIANTS, BATCH = 8, 2, 3, 2
TOTAL = N_CASES * SAMPLES * VARIANTS
DELAY_S = 0.03


def _suite(root: Path) -> Path:
    return write_suite(root, n_cases=N_CASES, samples=SAMPLES, batch_size=BATCH,
                       base_options={"delay_s": DELAY_S, "call_log": str(root / "calls.log")})


def _runs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "out" / "runs").glob("*") if (p / "signature.json").is_file())


def _committed(root: Path) -> int:
    runs = _runs(root)
    return len(RunStore(runs[-1]).generations()) if runs else 0


def _spawn(root: Path, suite: Path, log: Path) -> subprocess.Popen:
    args = ["run", str(suite), "-q"] + (["--resume", "last"] if _runs(root) else [])
    return subprocess.Popen(cli(*args), cwd=root, env=cli_env(), stdout=subprocess.DEVNULL, stderr=log.open("w"))


def _reference(root: Path) -> tuple[RunStore, dict]:
    """An uninterrupted run, timed: start-up (to the first call), generation, and the rest."""
    suite = _suite(root)
    log = root / "calls.log"
    t0 = time.monotonic()
    proc = _spawn(root, suite, root / "stderr.txt")
    first = last = None
    seen = 0
    while proc.poll() is None:
        n = len(calls(log))
        if n and first is None:
            first = time.monotonic()
        if n > seen:
            seen, last = n, time.monotonic()
        time.sleep(0.005)
    end = time.monotonic()
    assert proc.returncode == 0, (root / "stderr.txt").read_text()
    first, last = first or end, last or end
    return RunStore(_runs(root)[-1]), {"startup": first - t0, "generation": last - first, "rest": max(end - last, 0.2)}


def _cases(run_dir: Path) -> list[dict]:
    """The run's copy of its cases, without the source path (the two runs live in different folders)."""
    return [{k: v for k, v in json.loads(line).items() if k != "_source"} for line in (run_dir / "cases.jsonl").read_text("utf-8").splitlines()]


def kill_loop(tmp_path: Path, kills: int, seed: int) -> dict:
    ref, phases = _reference(tmp_path / "reference")
    root = tmp_path / "killed"
    suite = _suite(root)
    log = root / "calls.log"
    rng = random.Random(seed)
    done_kills, finished, spawns, hit = 0, 0, 0, {"start-up": 0, "generation": 0, "after generation": 0}
    while done_kills < kills:
        spawns += 1
        assert spawns <= 3 * kills, f"only {done_kills} kills in {spawns - 1} starts"
        # where this kill lands: during start-up, or during the generations (timed from this
        # process's first backend call, over about two kills' share of what is left), or, once
        # every generation is stored, anywhere in the resumed process (start-up and scoring)
        remaining = TOTAL - _committed(root)
        u_phase, u_at = rng.random(), rng.random()
        calls_before = len(calls(log))
        if remaining == 0:
            anchor, at = 0, u_at * (phases["startup"] + phases["rest"])
        elif done_kills == kills - 1:  # the last kill: after the generations, in the run's own scoring
            anchor, at = remaining, u_at * phases["rest"]
        elif u_phase < 0.3:
            anchor, at = 0, u_at * phases["startup"]
        else:
            anchor, at = 1, u_at * phases["generation"] * min(remaining, 2 * TOTAL / kills) / TOTAL
        proc = _spawn(root, suite, root / f"stderr-{spawns}.txt")
        t0 = time.monotonic()
        while anchor and proc.poll() is None and len(calls(log)) < calls_before + anchor:
            time.sleep(0.002)
        t0 = time.monotonic() if anchor else t0
        while proc.poll() is None and time.monotonic() - t0 < at:
            time.sleep(0.002)
        if proc.poll() is not None:  # it finished before its moment came: not a kill
            assert proc.returncode == 0, (root / f"stderr-{spawns}.txt").read_text()
            finished += 1
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        done_kills += 1
        left = TOTAL - _committed(root)
        hit["after generation" if left == 0 else "generation" if len(calls(log)) > calls_before else "start-up"] += 1
    final = _spawn(root, suite, root / "stderr-final.txt")
    assert final.wait(timeout=300) == 0, (root / "stderr-final.txt").read_text()

    runs = _runs(root)
    assert len(runs) == 1, f"a resumed run must continue the same run directory: {runs}"
    store = RunStore(runs[0])
    keys = one_per_key(store.dir)
    assert len(keys) == TOTAL and set(keys.values()) == {1}, "exactly one generation per (variant, case, sample)"
    assert content(store.generations()) == content(ref.generations())
    assert score_content(store.dir) == score_content(ref.dir) and score_content(ref.dir)
    assert store.read_json("status.json")["complete"] is True
    assert _cases(store.dir) == _cases(ref.dir)
    summary = lambda s: {v: (x["generations"], x["errors"], x["timeouts"]) for v, x in s.read_json("variants.json").items()}  # noqa: E731
    assert summary(store) == summary(ref)
    # committed work is never redone: each kill can lose at most the batch in flight
    made = len(calls(log))
    assert TOTAL <= made <= TOTAL + kills * BATCH
    stats = {"kills": done_kills, "finished_before_kill": finished, "phases": hit, "calls": made, "generations": TOTAL}
    FIGURES.append(f"crash safety, evalsuite run: {stats}; result identical to an uninterrupted run")
    return stats


def test_three_kills_then_resume_equal_an_uninterrupted_run(tmp_path):
    stats = kill_loop(tmp_path, kills=3, seed=3)
    assert stats["kills"] == 3


@pytest.mark.slow
def test_ten_kills_in_a_row_then_resume_equal_an_uninterrupted_run(tmp_path):
    stats = kill_loop(tmp_path, kills=10, seed=10)
    assert stats["kills"] == 10


# ---------------------------------------------------------------------------------------------
# evalsuite score


def _old_and_new_scores(tmp_path: Path) -> tuple[Path, bytes]:
    """A run scored when only its baseline was generated (the old scores.parquet), then resumed with
    every variant without scoring: `evalsuite score` now writes a different, complete file."""
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    root = tmp_path / "scored"
    suite = write_suite(root, n_cases=20, samples=2, batch_size=4)
    first = run_suite(load_suite(suite), RunOptions(progress=False, variants=[]))
    old = (first.run_dir / "scores.parquet").read_bytes()
    run_suite(load_suite(suite), RunOptions(progress=False, score=False, resume=str(first.run_dir)))
    assert (first.run_dir / "scores.parquet").read_bytes() == old
    return first.run_dir, old


def _tmp_files(run_dir: Path) -> list[Path]:
    return list(run_dir.glob(".scores.parquet.*.tmp"))


def score_kill_loop(tmp_path: Path, kills: int, seed: int) -> dict:
    run_dir, old = _old_and_new_scores(tmp_path)
    ref_dir = tmp_path / "reference-run"
    shutil.copytree(run_dir, ref_dir)
    t0 = time.monotonic()
    ref = subprocess.run(cli("score", str(ref_dir)), env=cli_env(), capture_output=True, text=True, timeout=300)
    duration = time.monotonic() - t0
    assert ref.returncode == 0, ref.stderr
    new = (ref_dir / "scores.parquet").read_bytes()
    assert new != old and len(new) > len(old)

    rng = random.Random(seed)
    outcome = {"kills": 0, "mid_write": 0, "left_old": 0, "left_new": 0, "finished_before_kill": 0}
    spawns = 0
    while outcome["kills"] < kills:
        spawns += 1
        assert spawns <= 4 * kills, f"only {outcome['kills']} kills in {spawns - 1} starts"
        if (run_dir / "scores.parquet").read_bytes() != old:  # each try starts from the old scores
            (run_dir / "scores.parquet").write_bytes(old)
        before = set(_tmp_files(run_dir))
        at_write = spawns % 2 == 0  # every other try: kill while the new file is being written
        at = rng.uniform(0, duration)
        pause = rng.uniform(0, 0.003)
        proc = subprocess.Popen(cli("score", str(run_dir)), env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        while proc.poll() is None:
            if at_write:
                if set(_tmp_files(run_dir)) - before:
                    time.sleep(pause)
                    break
            elif time.monotonic() - t0 >= at:
                break
            time.sleep(0.0005)
        if proc.poll() is not None:
            assert proc.returncode == 0, proc.stderr.read()
            outcome["finished_before_kill"] += 1
            assert (run_dir / "scores.parquet").read_bytes() == new
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        outcome["kills"] += 1
        outcome["mid_write"] += at_write
        now = (run_dir / "scores.parquet").read_bytes()
        assert now in (old, new), "scores.parquet must be the old or the new complete file"
        outcome["left_old" if now == old else "left_new"] += 1
    final = subprocess.run(cli("score", str(run_dir)), env=cli_env(), capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert (run_dir / "scores.parquet").read_bytes() == new
    assert (run_dir / "scorers.json").read_bytes() == (ref_dir / "scorers.json").read_bytes()
    score_run(RunStore(run_dir))
    assert (run_dir / "scores.parquet").read_bytes() == new, "rescoring is deterministic"
    outcome["stale_temp_files"] = len(_tmp_files(run_dir))
    FIGURES.append(f"crash safety, evalsuite score: {outcome}; scores identical to an uninterrupted rescoring")
    return outcome


def test_score_killed_three_times_leaves_old_or_new_scores_and_rescoring_is_identical(tmp_path):
    outcome = score_kill_loop(tmp_path, kills=3, seed=3)
    assert outcome["kills"] == 3


@pytest.mark.slow
def test_score_killed_ten_times_leaves_old_or_new_scores_and_rescoring_is_identical(tmp_path):
    outcome = score_kill_loop(tmp_path, kills=10, seed=10)
    assert outcome["kills"] == 10


# ---------------------------------------------------------------------------------------------
# a kill while a run is being created

#: runs `evalsuite ARGS...` in a process that SIGKILLs itself the moment an atomic write is about to
#: put file NAME in place (its temporary file written, the rename not done): a deterministic kill point
KILL_AT_RENAME = """
import os, signal, sys
from pathlib import Path
name, args = sys.argv[1], sys.argv[2:]
real = os.replace
def replace(src, dst, *a, **k):
    if Path(dst).name == name:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
sys.argv = ["evalsuite", *args]
from evalsuite.cli import main
main()
"""


@pytest.mark.slow  # four kills in subprocesses, about a minute: `make test-slow` (and .ci/run) runs it
@pytest.mark.parametrize("kill_at", ["suite.yaml", "status.json", "cases.jsonl", "signature.json"])
def test_gate_last_works_after_a_kill_while_a_run_is_created(tmp_path, kill_at):
    """A run killed while its directory is being created leaves a half-made directory and a temporary
    file; `evalsuite gate last` then judges the last complete run, removes the leftovers (their
    process is gone) and says so in one line."""
    import sys

    suite = write_suite(tmp_path, n_cases=4)
    runs = tmp_path / "out" / "runs"
    first = subprocess.run(cli("run", str(suite), "-q"), cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    (complete,) = _runs(tmp_path)
    expected = subprocess.run(cli("gate", complete.name, "--runs-dir", str(runs)), cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    killed = subprocess.run([sys.executable, "-c", KILL_AT_RENAME, kill_at, "run", str(suite), "-q"], cwd=tmp_path, env=cli_env(), capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    (half,) = [p for p in runs.iterdir() if p != complete]
    assert (half / ".creating").is_file() and not (half / "signature.json").exists()
    assert list(half.glob(f".{kill_at}.*.tmp")), "the killed write left its temporary file"

    gate = subprocess.run(cli("gate", "last", "--runs-dir", str(runs)), cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert gate.returncode == expected.returncode in (0, 1), gate.stdout + gate.stderr
    assert f"run {complete.name}" in gate.stdout
    notices = [line for line in gate.stderr.splitlines() if "creation was cut short" in line]
    assert len(notices) == 1 and half.name in notices[0], gate.stderr
    assert sorted(p.name for p in runs.iterdir()) == [complete.name], "the half-made run is removed"


def test_gate_last_skips_a_run_an_older_version_left_half_created(tmp_path):
    """A directory with signature.json but no status.json (an older evalsuite killed between the
    two) is skipped with a one-line notice, not judged as an incomplete run."""
    suite = write_suite(tmp_path, n_cases=4)
    runs = tmp_path / "out" / "runs"
    assert subprocess.run(cli("run", str(suite), "-q"), cwd=tmp_path, env=cli_env(), capture_output=True, timeout=300).returncode == 0
    (complete,) = _runs(tmp_path)
    half = runs / "29991231-235959-rel"  # the newest by name
    half.mkdir()
    shutil.copy(complete / "suite.yaml", half / "suite.yaml")
    shutil.copy(complete / "signature.json", half / "signature.json")
    gate = subprocess.run(cli("gate", "last", "--runs-dir", str(runs)), cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert gate.returncode in (0, 1) and f"run {complete.name}" in gate.stdout, gate.stdout + gate.stderr
    notices = [line for line in gate.stderr.splitlines() if "skipping" in line]
    assert len(notices) == 1 and "no status.json" in notices[0] and half.name in notices[0], gate.stderr
    assert half.is_dir(), "a directory that may not be ours is skipped, never removed"
