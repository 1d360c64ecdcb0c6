"""A worker in another environment ends with the process that started it (a runner killed in the middle
of a batch leaves no worker, nor the processes the worker started, generating on)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from evalsuite.backends.worker_process import WorkerProcess

# the worker: watches its parent, starts a grandchild of its own (vLLM's engine processes), prints both pids
WORKER = textwrap.dedent(
    """
    import subprocess, sys, time
    from evalsuite.backends.vllm_worker import exit_with_parent
    exit_with_parent(0.1)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print(child.pid, flush=True)
    time.sleep(120)
    """
)

# the runner: starts the worker as the backends do, prints the pids, then hangs until it is killed
RUNNER = textwrap.dedent(
    f"""
    import os, sys, time
    from evalsuite.backends.worker_process import WorkerProcess
    w = WorkerProcess([sys.executable, "-c", {WORKER!r}], env=dict(os.environ))
    grandchild = w.proc.stdout.readline().strip()
    print(w.proc.pid, grandchild, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie waiting for its reaper has ended
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_killed_runner_takes_its_worker_and_the_workers_children_with_it():
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    worker, grandchild = map(int, runner.stdout.readline().split())
    assert _alive(worker) and _alive(grandchild)
    runner.send_signal(signal.SIGKILL)  # no cleanup runs in the runner
    runner.wait(timeout=10)
    deadline = time.monotonic() + 10
    while (_alive(worker) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker) and not _alive(grandchild)


def test_a_worker_whose_parent_lives_keeps_answering():
    w = WorkerProcess([sys.executable, "-c", "import sys\nfrom evalsuite.backends.vllm_worker import exit_with_parent\nexit_with_parent(0.05)\nimport time; time.sleep(0.5)\nfor line in sys.stdin: print(line.strip(), flush=True)"], env=dict(os.environ))
    try:
        assert w.ask({"n": 1}) == {"n": 1} and w.running
    finally:
        w.close(wait_s=5)


def test_a_workers_log_has_no_name_on_disk(tmp_path, monkeypatch):
    """The log is read through its descriptor: a suite killed before `close` leaves no file behind."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    w = WorkerProcess([sys.executable, "-c", "import sys\nprint('starting up', file=sys.stderr, flush=True)\nfor line in sys.stdin: print(line.strip(), flush=True)"], env=dict(os.environ))
    try:
        assert w.ask({"n": 2}) == {"n": 2}
        assert "starting up" in w.log_text() and w.log_tail() == "starting up"
        assert list(tmp_path.iterdir()) == []
    finally:
        w.close(wait_s=5)
    assert w.log_text() == ""
