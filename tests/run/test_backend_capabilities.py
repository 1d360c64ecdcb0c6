"""The runner asks a backend for its optional capabilities through `Backend`'s declared methods."""

from __future__ import annotations

import pytest

from evalsuite.backends.http import HTTPBackend
from evalsuite.cases.options import GenerationSettings
from evalsuite.cases.suite import Variant
from evalsuite.errors import EvalsuiteError
from evalsuite.run.runner import hard_limit_s

from tests.backends.test_http import make_backend, req, server  # noqa: F401 - the fixture is used by name


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


def test_a_degraded_backend_declares_its_inner_backends_capabilities():
    from evalsuite.backends.fake import FakeBackend
    from evalsuite.cases.caseset import Case
    from evalsuite.run.degrade import wrap_backend

    inner = HTTPBackend(_http_variant(timeout_s=2.0, retry={"max_retries": 50, "deadline_s": 900.0}))
    cases = [Case(id="q1", scenario="kb_qa", kind="grounded", prompt="question")]
    try:
        wrapped = wrap_backend(inner, Variant(name="d", degrade={"kind": "drop_citations", "rate": 1.0}), cases)
        assert wrapped.deadline_s() == 900.0 and hard_limit_s(2.0, 1, wrapped) >= 900.0
    finally:
        inner.close()
    fake = FakeBackend(Variant(name="f", backend="fake", options={"engine_metrics": {"requests": 3}}))
    wrapped = wrap_backend(fake, Variant(name="d", degrade={"kind": "drop_citations", "rate": 1.0}), cases)
    assert wrapped.engine_metrics() == {"requests": 3} and wrapped.engine_identity() == {"engine": "fake"}


def test_a_backend_without_a_capability_says_so_by_its_documented_default():
    from evalsuite.backends.fake import FakeBackend

    be = FakeBackend(Variant(name="f", backend="fake"))
    assert (be.deadline_s(), be.weights_identity(), be.peak_memory_mb(), be.model_memory_mb(), be.load_error) == (None, None, None, None, None)
    with pytest.raises(EvalsuiteError, match="no server of its own to restart"):
        be.restart()


def test_reading_a_served_variants_model_starts_no_server(tmp_path):
    weights = tmp_path / "model"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    variant = Variant(name="s", backend="http", model=str(weights), options={"serve": {"launcher": "transformers"}, "verify_settings": False})
    be = HTTPBackend(variant)
    try:
        with pytest.raises(EvalsuiteError, match="not started yet"):
            _ = be.model
        assert be.server is None and be.runs_server() and be.served_weights() is not None
    finally:
        be.close()


def test_the_disconnect_probe_reads_the_stream_with_the_one_sse_reader(server):  # noqa: F811 - the fixture
    import asyncio

    from evalsuite.run import fault_probes

    be = make_backend(server)
    try:
        url = f"{be.start()}/chat/completions"
        assert be.endpoint() == url and be.endpoint_kind == "chat"
        dropped = asyncio.run(fault_probes._drop_after_first_token(url, be.request_body(req("hello"), stream=True), "chat", 10.0))
        refused = asyncio.run(fault_probes._drop_after_first_token(f"{be.base_url}/nowhere", {}, "chat", 10.0))
    finally:
        be.close()
    assert dropped is True and refused is False


def test_load_reads_the_servers_metrics_through_the_served_backend():
    import asyncio

    from evalsuite.cases.options import LoadSettings
    from evalsuite.run import load

    pages = iter(["vllm:request_queue_time_seconds_sum 1.0\nvllm:request_queue_time_seconds_count 2\n", "vllm:request_queue_time_seconds_sum 4.0\nvllm:request_queue_time_seconds_count 4\n"])
    target = load.LoadTarget(name="srv", base_url="http://127.0.0.1:9/v1", body=lambda r, s: {}, metrics=lambda: next(pages))
    window = asyncio.run(load.run_window(target, [], 1, 0, LoadSettings()))
    assert window.queue_wait_s == 1.5 and window.queue_wait_source.startswith("server /metrics")
