"""The pytest plugin reads the review queue: one `human-review[variant]` item per variant once a queue exists."""

from __future__ import annotations

# pytester's in-process runs drop modules first imported inside them (see tests/test_pytest_plugin.py)
import evalsuite.verdict.compare  # noqa: F401
import evalsuite.verdict.gate  # noqa: F401
import evalsuite.review.api  # noqa: F401
import evalsuite.run.runner  # noqa: F401
import evalsuite.scoring.run as _scoring_run
import scipy.stats  # noqa: F401
import statsmodels.stats.contingency_tables  # noqa: F401
import statsmodels.stats.multitest  # noqa: F401

from evalsuite.review import api

from .conftest import make_suite, run_suite_at

_scoring_run.load_scorers()


def test_human_review_items_fail_on_a_regression_verdict(pytester):
    suite = make_suite(pytester.path)
    store = run_suite_at(suite)
    args = ("-p", "no:cacheprovider", "-rA", f"--evalsuite-suite={suite}", f"--evalsuite-run={store.dir}")
    res = api.flag_run(store)  # without a queue there are no review items (tests/test_pytest_plugin.py counts them)
    assert res.queue == str(pytester.path / "out" / "review.sqlite")
    spec = next(it for it in api.list_items(res.queue) if it["variant"] == "spec")
    api.annotate(spec["id"], "regression", note="not exact", reviewer="bob", queue=res.queue)
    after = pytester.runpytest(*args)
    after.stdout.fnmatch_lines(["PASSED*human-review[[]opt[]]*", "FAILED*human-review[[]spec[]]*"])
    assert "1 output(s) judged a regression by a reviewer" in after.stdout.str() and "kb-006" in after.stdout.str()
