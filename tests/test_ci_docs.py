"""docs/ci.md's workflows, run: the GitHub Actions job and the GitLab CI job, step by step, on the fake
suite, in a copy of the repository.

What is substituted, and only that: `EVALSUITE_SUITE` is suites/fake.yaml; `make setup` is left out
(the test's own Python environment stands in for `.venv`); GitHub's `uses:` steps are played by the
test (checkout: the copy; setup-python: nothing; cache: reports/cache restored from what an earlier
job saved, and saved after; upload-artifact: every listed path must exist). The GitLab job restores
the cache the GitHub job saved (the same path): the cache carried between jobs makes it generate nothing. Each `run:` (and each `script:` /
`after_script:` line) runs as its runner would run it: bash with -e and pipefail, in the copy, with the
job's environment; a failed step skips the steps after it unless they say `if: ${{ !cancelled() }}`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from evalsuite.releases import ReleaseLedger

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ci.md"
COPIED = ("evalsuite", "suites", "casesets", "rubrics", "pyproject.toml", "Makefile")


def workflows() -> dict[str, dict]:
    """The YAML blocks of docs/ci.md by the file name on their first line (`# .gitlab-ci.yml`)."""
    out = {}
    for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text("utf-8"), re.S):
        first = block.splitlines()[0]
        if first.startswith("# ."):
            out[first[2:].strip()] = yaml.safe_load(block)
    return out


def checkout(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    for name in COPIED:
        src = ROOT / name
        (shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__")) if src.is_dir() else shutil.copy(src, repo / name))
    (repo / ".venv").symlink_to(Path(sys.executable).parents[1])  # `make setup` stands in: this environment
    return repo


def shell(cmd: str, repo: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", cmd], cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def job_env(repo: Path, variables: dict, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_", "CI_", "EVALSUITE_"))}
    return {**env, **{k: str(v) for k, v in variables.items()}, "EVALSUITE_SUITE": "suites/fake.yaml", "PYTHONPATH": str(repo), **extra}


def restore(cache: Path, repo: Path, path: str) -> None:
    if cache.exists():
        shutil.copytree(cache, repo / path, dirs_exist_ok=True)


def run_github_job(wf: dict, repo: Path, cache: Path, summary: Path) -> list[tuple[str, int, str]]:
    job = wf["jobs"]["gate"]
    env = job_env(repo, job["env"], GITHUB_STEP_SUMMARY=str(summary), GITHUB_ACTOR="ci-bot", GITHUB_REPOSITORY="acme/models", GITHUB_RUN_ID="42")
    done, failed = [], False
    for step in job["steps"]:
        if failed and "!cancelled()" not in str(step.get("if", "")):
            done.append((step.get("name", step.get("uses")), -1, "skipped"))
            continue
        uses = step.get("uses", "")
        if uses.startswith("actions/cache@"):
            restore(cache, repo, step["with"]["path"])
        elif uses.startswith("actions/upload-artifact@"):
            missing = [p for p in step["with"]["path"].split() if not (repo / p).exists()]
            done.append(("upload", len(missing), " ".join(missing)))
        elif "run" in step and step["run"].strip() != "make setup":
            res = shell(step["run"], repo, env)
            failed = failed or res.returncode != 0
            done.append((step["name"], res.returncode, res.stdout + res.stderr))
    return done


def save(repo: Path, path: str, cache: Path) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(repo / path, cache)


@pytest.fixture(scope="module")
def github_job(tmp_path_factory):
    """The GitHub Actions job, run once, from an empty cache; its saved cache is what the next job restores."""
    tmp = tmp_path_factory.mktemp("github")
    wf = workflows()[".github/workflows/evalsuite.yml"]
    (cache_step,) = [s for s in wf["jobs"]["gate"]["steps"] if s.get("uses", "").startswith("actions/cache@")]
    repo, cache, summary = checkout(tmp), tmp / "saved-cache", tmp / "summary.md"
    done = run_github_job(wf, repo, cache, summary)
    save(repo, cache_step["with"]["path"], cache)
    return {"wf": wf, "repo": repo, "done": done, "summary": summary, "cache": cache, "cache_path": cache_step["with"]["path"]}


@pytest.mark.slow  # with the GitLab job, about two minutes: .ci/run runs them after `make test`
def test_the_github_actions_workflow_runs_on_the_fake_suite(github_job):
    steps, repo, done = github_job["wf"]["jobs"]["gate"]["steps"], github_job["repo"], github_job["done"]
    assert [s["run"] for s in steps if s.get("name") == "Set up"] == ["make setup"]  # the one step left out
    assert [(name, rc) for name, rc, _ in done] == [("Run (adaptive)", 0), ("Gate", 0), ("JUnit", 0), ("HTML report", 0), ("upload", 0)], done
    assert re.search(r"generated [1-9]\d*, from cache 0", done[0][2])  # an empty cache: everything generated
    text = github_job["summary"].read_text("utf-8")
    assert text.startswith("## evalsuite: ✅ **PASS**") and "stage `pilot`" in text and "### Releases" in text and "| `fake-int8` `" in text
    assert json.loads((repo / "reports" / "verdict.json").read_text())["status"] == "pass"
    cases = ET.parse(repo / "reports" / "junit.xml").getroot().iter("testcase")
    assert any(c.get("name", "").endswith("[fake-int8]") for c in cases)
    assert "Releases" in (repo / "reports" / "report" / "report.html").read_text("utf-8")
    with ReleaseLedger(repo / "reports" / "releases.sqlite", create=False) as led:
        (d,) = led.decisions()
    assert (d.stage, d.variant, d.status, d.actor, d.origin) == ("pilot", "fake-int8", "pass", "ci-bot", "https://github.com/acme/models/actions/runs/42")


@pytest.mark.slow
def test_the_gitlab_ci_job_runs_on_the_fake_suite_with_the_cache_an_earlier_job_left(github_job, tmp_path):
    """The GitLab job restores reports/cache as the earlier (GitHub) job saved it: it generates nothing again."""
    job = workflows()[".gitlab-ci.yml"]["evalsuite"]
    assert job["script"][0] == "make setup"  # the one line left out
    assert job["cache"]["paths"] == [github_job["cache_path"] + "/"] == ["reports/cache/"]
    repo = checkout(tmp_path)
    restore(github_job["cache"], repo, job["cache"]["paths"][0])
    env = job_env(repo, job["variables"], GITLAB_USER_LOGIN="gl-bot", CI_JOB_URL="https://gitlab.example/acme/models/-/jobs/7")
    script = shell("\n".join(job["script"][1:]), repo, env)
    after = shell("\n".join(job["after_script"]), repo, env)
    assert script.returncode == 0 and after.returncode == 0, script.stdout + script.stderr + after.stderr
    assert re.search(r"generated 0, from cache [1-9]", script.stdout), script.stdout
    for p in job["artifacts"]["paths"] + [job["artifacts"]["reports"]["junit"]]:
        assert (repo / p).exists(), p
    assert (repo / "reports" / "summary.md").read_text("utf-8").startswith("## evalsuite: ✅ **PASS**")
    assert ET.parse(repo / "reports" / "junit.xml").getroot().iter("testcase")
    assert (repo / "reports" / "report" / "report.html").is_file()
    with ReleaseLedger(repo / "reports" / "releases.sqlite", create=False) as led:
        (d,) = led.decisions()
    assert (d.actor, d.origin, d.status) == ("gl-bot", "https://gitlab.example/acme/models/-/jobs/7", "pass")


def test_the_scheduled_recheck_job_runs_recheck_for_production_and_fails_on_a_revoked_clearance():
    """Issue 42: docs/ci.md's scheduled job; `evalsuite recheck`'s own behaviour is tests/releases/test_recheck.py's."""
    wf = workflows()[".github/workflows/evalsuite-recheck.yml"]
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert on["schedule"][0]["cron"].split()[2:] == ["*", "*", "1"] and "workflow_dispatch" in on
    steps = wf["jobs"]["recheck"]["steps"]
    (step,) = [s for s in steps if " recheck " in f" {s.get('run', '')} "]
    assert step["run"].split()[:4] == [".venv/bin/evalsuite", "recheck", "--stage", "production"]
    assert "if" not in step and "continue-on-error" not in step  # its exit code (1: a clearance revoked) fails the job
    assert wf["jobs"]["recheck"]["env"]["EVALSUITE_RELEASE_LEDGER"]  # the ledger the gates wrote, not a fresh one
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "${{ !cancelled() }}" and upload["with"]["path"] in step["run"]
