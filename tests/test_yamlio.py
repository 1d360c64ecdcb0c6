"""Atomic writes (evalsuite/yamlio.py): the file mode a user expects, and what a killed writer leaves."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from evalsuite.yamlio import atomic_write_text, sweep_temp_files, temp_writer_pid


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda m: os.umask(m)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o027, 0o640)])
def test_a_new_file_honours_the_umask(tmp_path, umask, mask, mode):
    """mkstemp's 0600 is not what a shared report needs: a new file gets 0666 & ~umask, as open() gives."""
    umask(mask)
    p = tmp_path / "report.html"
    atomic_write_text(p, "x")
    assert stat.S_IMODE(p.stat().st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    p = tmp_path / "report.md"
    p.write_text("old")
    p.chmod(0o640)
    atomic_write_text(p, "new")
    assert (p.read_text(), stat.S_IMODE(p.stat().st_mode)) == ("new", 0o640)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    "name, pid",
    [(".report.html.123-abc.tmp", 123), (".scores.jsonl.9-x1y2.tmp", 9), (".report.html.abc.tmp", None), ("report.html", None), (".x.12-.tmp", None)],
)
def test_temp_writer_pid(name, pid):
    assert temp_writer_pid(name) == pid


def test_a_dead_writers_temp_files_are_swept_and_a_live_ones_kept(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f".report.html.{dead}-abc.tmp").write_text("half")
    (tmp_path / f".report.md.{live}-def.tmp").write_text("in progress")
    (tmp_path / ".report.html.legacy.tmp").write_text("no pid: left alone")
    removed = sweep_temp_files(tmp_path)
    assert [p.name for p in removed] == [f".report.html.{dead}-abc.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f".report.md.{live}-def.tmp", ".report.html.legacy.tmp"])


def test_the_first_write_into_a_directory_sweeps_it(tmp_path):
    dead = _dead_pid()
    leftover = tmp_path / "out" / f".report.html.{dead}-abc.tmp"
    leftover.parent.mkdir()
    leftover.write_text("half")
    atomic_write_text(tmp_path / "out" / "report.html", "whole")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.html"]
