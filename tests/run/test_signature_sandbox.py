"""Issue 40: the signature of a run with code cases records the sandbox's isolation: its mode and
the seccomp filter (the calls it denies, their digest, the libseccomp version)."""

from __future__ import annotations

import ctypes.util
import re
from pathlib import Path

import pytest

from evalsuite import sandbox
from evalsuite.cases.suite import load_suite
from evalsuite.hashing import sha256_json
from evalsuite.run.signature import make_signature, runs_in_sandbox
from evalsuite.sandbox.isolation import SECCOMP_DENIED

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fake_suite():
    """The fake suite and its cases: code cases with unit tests among others."""
    suite = load_suite(REPO / "suites" / "fake.yaml")
    return suite, suite.load_cases()


@pytest.mark.skipif(ctypes.util.find_library("seccomp") is None, reason="libseccomp is not installed here: runs get no filter")
def test_a_run_with_code_cases_records_the_seccomp_filter(fake_suite):
    suite, cases = fake_suite
    assert any(runs_in_sandbox(c) for c in cases)
    sig = make_signature(suite, cases, {})
    box = sig["sandbox"]
    assert box["seccomp"] == list(SECCOMP_DENIED)
    f = box["seccomp_filter"]
    assert f["installed"] is True and f["digest"] == sha256_json(sorted(SECCOMP_DENIED))[:16], f
    assert re.fullmatch(r"\d+\.\d+\.\d+", f["libseccomp"]), f
    assert box["mode"] in ("root with namespaces", "user namespaces", "rlimits only")
    assert box["isolation"] == sandbox.mode.machine_mode(False).label and box["root"] == sandbox.mode.machine_mode(False).root


def test_the_filter_identity_changes_with_the_denied_calls(fake_suite, monkeypatch):
    """Another list of denied calls is another digest: the signature tells two filters apart."""
    suite, cases = fake_suite
    before = make_signature(suite, cases, {})["sandbox"]["seccomp_filter"]["digest"]
    monkeypatch.setattr(sandbox.mode, "SECCOMP_DENIED", (*SECCOMP_DENIED, "reboot"))
    after = make_signature(suite, cases, {})["sandbox"]["seccomp_filter"]["digest"]
    assert before is None or before != after


def test_without_libseccomp_the_signature_says_there_is_no_filter(fake_suite, monkeypatch):
    suite, cases = fake_suite
    monkeypatch.setattr(sandbox.mode, "libseccomp", lambda ctypes: None)
    box = make_signature(suite, cases, {})["sandbox"]
    assert box["seccomp"] == [] and box["seccomp_filter"] == {"installed": False, "digest": None, "libseccomp": None}


@pytest.mark.parametrize(
    ("namespaces", "root", "words"),
    [(True, True, "root with namespaces"), (True, False, "user namespaces"), (False, True, "rlimits only"), (False, False, "rlimits only")],
)
def test_the_mode_in_words(namespaces, root, words):
    mode = sandbox.mode.Mode(prefix=(), namespaces=namespaces, pidns=namespaces, root=root, warnings=(), label="x")
    assert sandbox.mode.mode_words(mode) == words


def test_a_run_without_code_cases_has_no_sandbox_entry(fake_suite):
    suite, cases = fake_suite
    others = [c for c in cases if not runs_in_sandbox(c)]
    assert others and "sandbox" not in make_signature(suite, others, {})


def test_the_signature_records_the_sandboxs_own_summary_imported_only_for_code_cases(fake_suite, monkeypatch):
    """Issue 41: no wrapper between the signature and `sandbox.isolation_summary`; the sandbox is
    imported only when a run has code cases (a fresh process that signs others never imports it)."""
    import subprocess
    import sys

    import evalsuite.run.signature as signature

    suite, cases = fake_suite
    assert not hasattr(signature, "sandbox_isolation")
    monkeypatch.setattr(sandbox, "isolation_summary", lambda: {"mode": "stub"})
    assert make_signature(suite, cases, {})["sandbox"] == {"mode": "stub"}
    code = (
        "import sys\n"
        "from evalsuite.cases.suite import load_suite\n"
        "from evalsuite.run.signature import make_signature, runs_in_sandbox\n"
        f"suite = load_suite({str(REPO / 'suites' / 'fake.yaml')!r})\n"
        "others = [c for c in suite.load_cases() if not runs_in_sandbox(c)]\n"
        "make_signature(suite, others, {})\n"
        "print('evalsuite.sandbox' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr
