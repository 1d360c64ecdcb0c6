"""notebooks/explore.ipynb in a real JupyterLab, in headless Chromium at 1366x768 (see
tests/jupyterlab_harness.py): pointed at a suite, it opens that suite's latest run (not the newest
run of another suite), runs every cell, shows the verdict judge_run gives, deltas in points and
missing values as missing, with no console error, page error or failed output; saves screenshots.
"""

from __future__ import annotations

import shutil
import time

import pytest
import yaml

from evalsuite.run.store import RunStore
from jupyterlab_harness import chromium_page, keep, lab_server, open_and_run, skip_reason, widget_errors

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))


def test_explore_notebook_in_jupyterlab(report_run, repo, tmp_path, capsys):
    store = report_run[0]
    root = tmp_path / "lab"
    runs = root / "runs"
    runs.mkdir(parents=True)
    shutil.copy(repo / "notebooks" / "explore.ipynb", root / "explore.ipynb")
    mine = runs / store.dir.name
    shutil.copytree(store.dir, mine)
    other = runs / "29991231-235959-other"  # newer, of another suite: `last` would pick it
    shutil.copytree(store.dir, other)
    suite = RunStore(other).suite
    suite["name"], suite["path"] = "other", str(tmp_path / "other.yaml")
    (other / RunStore.SUITE).write_text(yaml.safe_dump(suite), "utf-8")
    env = {"EVALSUITE_RUNS_DIR": str(runs), "EVALSUITE_SUITE": store.suite_name, "PYTHONPATH": str(repo)}
    shots = [tmp_path / "explore-1366x768.png", tmp_path / "explore-quality.png"]
    with lab_server(root, env) as lab, chromium_page(tmp_path / "profile") as (page, seen):
        t0 = open_and_run(page, lab, "explore.ipynb")
        page.wait_for_selector(".jp-OutputArea-output img", timeout=60_000)
        took = time.monotonic() - t0
        text = page.evaluate("() => document.querySelector('.jp-Notebook').textContent")  # offscreen cells too (content-visibility)
        assert f"run {store.run_id} of suite {store.suite_name}" in text and "of suite other" not in text
        assert "REGRESSION" in text  # the verdict, as judge_run gives it
        assert "delta (points) by variant" in text and "missing" in text
        imgs = page.evaluate("() => Array.from(document.querySelectorAll('.jp-OutputArea-output img')).map(i => i.complete && i.naturalWidth > 0)")
        assert len(imgs) >= 2 and all(imgs)
        page.screenshot(path=str(shots[0]))
        page.locator(".jp-OutputArea-output img").first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots[1]))
        assert widget_errors(page) == []
        assert seen.problems() == [], seen.problems()
    keep(shots)
    with capsys.disabled():
        print(f"\nexplore.ipynb in JupyterLab: every cell run and its charts shown {took:.1f}s after opening")
