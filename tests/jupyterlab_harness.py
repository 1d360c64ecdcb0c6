"""JupyterLab on loopback, driven by Playwright on the system's Chromium: the notebooks' browser tests.

`lab_server(root, env)` starts `jupyter lab` on 127.0.0.1 with a free port, a random token, no
browser, `root` as its root directory, and its own config, data, runtime, settings and workspace
directories under `root/.jupyter-test` (so nothing of the user's JupyterLab set-up is read or
written); it stops the server (and its kernels) at the end. `open_lab(...)` opens a notebook in
Chromium (`executable_path` = the system's, never a Playwright download) and records console
errors, page errors and "Error displaying widget" texts.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from report.test_browser import CHROMIUM_FLAGS, find_chromium

VIEWPORT = {"width": 1366, "height": 768}
#: JupyterLab settings for a quiet test session: no news or update checks (no network), no autosave surprises
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"autoStartDefaultKernel": True},
}


def skip_reason() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    for mod, extra in (("jupyterlab", "jupyterlab"), ("anywidget", "anywidget"), ("playwright", "playwright"), ("ipykernel", "ipykernel")):
        try:
            __import__(mod)
        except ImportError:
            return f"{mod} is not installed (pip install 'evalsuite[dev]' installs {extra})"
    if find_chromium() is None:
        return "no Chromium found (apt-get install chromium, or set EVALSUITE_CHROMIUM)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}"


@contextlib.contextmanager
def lab_server(root: Path, env: dict[str, str], timeout_s: float = 120.0) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1 (see the module docstring); yields once /api/status answers."""
    home = root / ".jupyter-test"
    dirs = {k: home / k.lower() for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for name, value in SETTINGS.items():
        p = dirs["JUPYTERLAB_SETTINGS_DIR"] / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(value), "utf-8")
    port, token = free_port(), secrets.token_hex(16)
    log = home / "lab.log"
    full_env = {**os.environ, **{k: str(v) for k, v in dirs.items()}, **env, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False", "--LabApp.news_url=",
           "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, root, log)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{lab.url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer within {timeout_s:.0f}s:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield lab
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@dataclass
class Seen:
    """What the page said while the test drove it."""

    console: list = field(default_factory=list)  #: (type, text)
    errors: list = field(default_factory=list)  #: uncaught page errors

    def problems(self) -> list[str]:
        bad = [f"console {t}: {x}" for t, x in self.console if t == "error"]
        return bad + [f"page error: {e}" for e in self.errors]


@contextlib.contextmanager
def chromium_page(profile: Path) -> Iterator[tuple]:
    """(page, Seen) in a fresh headless Chromium profile at 1366x768."""
    from playwright.sync_api import sync_playwright

    seen = Seen()
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=find_chromium(), headless=True, args=CHROMIUM_FLAGS, viewport=VIEWPORT)
        try:
            page = ctx.new_page()
            page.on("console", lambda m: seen.console.append((m.type, m.text)))
            page.on("pageerror", lambda e: seen.errors.append(str(e)))
            yield page, seen
        finally:
            ctx.close()


def open_and_run(page, lab: Lab, name: str, timeout_ms: int = 180_000) -> float:
    """Open a notebook, run every cell; returns the time it was opened at (time.monotonic)."""
    t0 = time.monotonic()
    page.goto(lab.notebook_url(name))
    page.wait_for_selector(".jp-Notebook", timeout=timeout_ms)
    run_all(page, timeout_ms)
    return t0


def run_all(page, timeout_ms: int = 180_000) -> None:
    """Run every cell through JupyterLab's own menu, then wait for the kernel to be idle."""
    wait_kernel_idle(page, timeout_ms)
    page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-content").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_timeout(500)
    wait_kernel_idle(page, timeout_ms)


def wait_kernel_idle(page, timeout_ms: int = 180_000) -> None:
    """Until the notebook's kernel is connected and idle (the status bar says so) and no cell is
    queued or running (`[*]`)."""
    page.wait_for_function(
        """() => {
            const busy = Array.from(document.querySelectorAll('.jp-InputArea-prompt')).some(p => p.textContent.includes('*'));
            const bar = document.querySelector('#jp-main-statusbar');
            const idle = bar !== null && /\\| Idle/.test(bar.innerText);
            return !busy && idle && document.querySelector('.jp-Notebook') !== null;
        }""",
        timeout=timeout_ms,
    )


def widget_errors(page) -> list[str]:
    """Texts of failed widget renderings ("Error displaying widget") anywhere on the page."""
    return page.evaluate("() => Array.from(document.querySelectorAll('.jp-OutputArea-output')).map(e => e.innerText).filter(t => t.includes('Error displaying widget') || t.includes('Traceback'))")


def keep(paths: list[Path], name_dir: str = "EVALSUITE_SCREENSHOT_DIR") -> None:
    """Copy screenshots to $EVALSUITE_SCREENSHOT_DIR when set, for a person to look at."""
    target = os.environ.get(name_dir)
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in paths:
            shutil.copy(p, Path(target) / p.name)
