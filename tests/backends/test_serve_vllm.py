"""The vllm serve launcher: its command line and what it reads from vLLM's /metrics (real server:
tests/backends/test_vllm_real.py)."""

from __future__ import annotations

import pytest

from evalsuite.backends import serve_vllm
from evalsuite.backends.http_serve import LocalServer, check_serve_option
from evalsuite.errors import EvalsuiteError

_BEFORE = """# HELP vllm:prefix_cache_queries_total Prefix cache queries
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 0.3
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="0",model_name="m"} 0.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0
"""
_AFTER = (
    _BEFORE.replace("} 100.0", "} 164.0")
    .replace('hits_total{engine="0",model_name="m"} 10.0', 'hits_total{engine="0",model_name="m"} 42.0')
    .replace("seconds_sum{engine=\"0\",model_name=\"m\"} 1.5", "seconds_sum{engine=\"0\",model_name=\"m\"} 2.5")
    .replace("time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 3.0", "time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 7.0")
    .replace("num_preemptions_total{engine=\"0\",model_name=\"m\"} 0.0", "num_preemptions_total{engine=\"0\",model_name=\"m\"} 2.0")
    .replace('finished_reason="stop",model_name="m"} 2.0', 'finished_reason="stop",model_name="m"} 6.0')
)


def test_metrics_are_summed_over_labels_and_buckets_are_left_out():
    m = serve_vllm.parse_metrics(_BEFORE)
    assert m == {
        "prefix_cache_queries": 100.0,
        "prefix_cache_hits": 10.0,
        "ttft_sum": 1.5,
        "ttft_count": 3.0,
        "queue_sum": 0.3,
        "queue_count": 3.0,
        "preemptions": 0.0,
        "requests": 3.0,
    }


def test_the_batchs_metrics_are_the_difference_of_two_scrapes():
    d = serve_vllm.metrics_delta(serve_vllm.parse_metrics(_BEFORE), serve_vllm.parse_metrics(_AFTER))
    assert d == {
        "requests": 4,
        "ttft_mean_s": 0.25,  # (2.5 - 1.5) / (7 - 3)
        "queue_time_mean_s": None,  # no request was queued in between
        "prefix_cache_queries": 64,
        "prefix_cache_hits": 32,
        "prefix_cache_hit_rate": 0.5,
        "preemptions": 2,
    }
    assert serve_vllm.metrics_delta(None, serve_vllm.parse_metrics(_AFTER)) is None


def test_command_runs_vllms_module_from_its_environment_with_overridable_defaults(monkeypatch):
    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", "/bin/sh")  # any executable: only the command line is built
    cmd = LocalServer("vllm", "/models/m", args=["--max-model-len=512"]).command(8123)
    assert cmd[:3] == ["/bin/sh", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--port") + 1] == "8123" and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--served-model-name") + 1] == "m" and "--enforce-eager" in cmd
    assert "--max-model-len" not in cmd and cmd[-1] == "--max-model-len=512"
    assert check_serve_option({"launcher": "vllm"}, "v")["launcher"] == "vllm"


def test_missing_environment_is_what_the_launcher_reports(monkeypatch, tmp_path):
    monkeypatch.setenv("EVALSUITE_VLLM_PYTHON", str(tmp_path / "none"))
    assert "make vllm" in serve_vllm.missing_requirement()
    with pytest.raises(EvalsuiteError, match="make vllm"):
        LocalServer("vllm", "/models/m").command(1)
