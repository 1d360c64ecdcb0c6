"""The runner asks a backend for its optional capabilities through `Backend`'s declared methods."""

from __future__ import annotations

from evalsuite.backends.http import HTTPBackend
from evalsuite.cases.options import GenerationSettings
from evalsuite.cases.suite import Variant
from evalsuite.run.runner import hard_limit_s


def _http_variant(**options) -> Variant:
    opts = {"base_url": "http://127.0.0.1:9/v1", "verify_settings": False} | options
    return Variant(name="srv", backend="http", model="tiny-chat", options=opts, generation=GenerationSettings(timeout_s=2.0))


def test_the_runner_honours_an_http_variants_long_retry_deadline():
    # retries of one request may take up to 900 s: the runner's backstop must not cut them off first
    backend = HTTPBackend(_http_variant(timeout_s=2.0, retry={"max_retries": 50, "deadline_s": 900.0}))
    try:
        assert hard_limit_s(2.0, 1, backend) >= 900.0
        assert hard_limit_s(2.0, 4, backend) >= 4 * 900.0
    finally:
        backend.close()


def test_the_runner_widens_its_backstop_to_an_http_variants_own_timeout():
    backend = HTTPBackend(_http_variant(timeout_s=30.0, retry={"max_retries": 0, "deadline_s": 30.0}))
    try:
        assert hard_limit_s(2.0, 1, backend) >= 30.0
    finally:
        backend.close()
