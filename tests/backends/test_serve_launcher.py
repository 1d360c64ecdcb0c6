"""Server launchers are classes registered by name: a new server is one class in its own module."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path

import pytest

from evalsuite.backends.http_options import HTTPOptions
from evalsuite.backends.http_serve import LocalServer, check_serve_option, missing_requirement
from evalsuite.backends.serve_launcher import LAUNCHERS, Launcher, launcher_class
from evalsuite.cases.suite import Variant
from evalsuite.errors import EvalsuiteError


class EchoLauncher(Launcher):
    """A launcher defined outside evalsuite, as a later one (vLLM) would be."""

    name = "echo"
    requirements = (("no_such_module_for_echo", "echo"),)
    settings = {"flavour": "an echo setting (launcher: echo)"}

    @classmethod
    def model_name(cls, model_path: Path) -> str:
        return "echo-" + model_path.name

    @classmethod
    def command(cls, model_path, model_name, *, host, port, continuous_batching, args):
        return ["echo", str(model_path), model_name, host, str(port)]


@pytest.fixture
def echo_registered(monkeypatch):
    module = types.ModuleType("evalsuite_test_echo_launcher")
    module.EchoLauncher = EchoLauncher
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(LAUNCHERS, "echo", f"{module.__name__}:EchoLauncher")
    return module


@pytest.mark.parametrize("name, cls_name", [("transformers", "TransformersLauncher"), ("llama_cpp", "LlamaCppLauncher")])
def test_the_shipped_launchers_resolve_from_their_lazy_entries(monkeypatch, name, cls_name):
    module = f"evalsuite.backends.serve_{name.replace('_', '')}"
    monkeypatch.setitem(LAUNCHERS, name, f"{module}:{cls_name}")  # as registered: a "module:attr" string
    cls = launcher_class(name)
    assert cls.__name__ == cls_name and issubclass(cls, Launcher) and cls.name == name
    assert LAUNCHERS[name] is cls  # resolved once, then kept


def test_an_unknown_launcher_names_the_registered_ones():
    with pytest.raises(EvalsuiteError, match=r"unknown serve launcher 'vllm2'; available: transformers, llama_cpp\b"):
        launcher_class("vllm2")


def test_a_registered_launcher_is_one_class(echo_registered):
    server = LocalServer("echo", "/w/tiny", args=["--x"])
    assert server.model_name == "echo-tiny"
    assert server.command(9001) == ["echo", "/w/tiny", "echo-tiny", "127.0.0.1", "9001", "--x"]
    spec = check_serve_option({"launcher": "echo", "flavour": "mild"}, "v")
    assert spec["launcher"] == "echo"
    assert missing_requirement({"serve": {"launcher": "echo"}}) == "needs no_such_module_for_echo to start the server: pip install 'evalsuite[echo]'"


def test_a_launcher_setting_is_refused_for_another_launcher(echo_registered):
    with pytest.raises(EvalsuiteError, match=r"variant 'v': flavour is an echo setting \(launcher: echo\)"):
        check_serve_option({"launcher": "transformers", "flavour": "mild"}, "v")
    with pytest.raises(EvalsuiteError, match=r"gguf is a llama_cpp setting"):
        check_serve_option({"launcher": "echo", "gguf": "/w/m.gguf"}, "v")


def test_http_options_are_frozen_and_keyword_only():
    opts = HTTPOptions.from_variant(Variant(name="v", backend="http", model="m", options={"base_url": "http://127.0.0.1:1/v1/", "unsupported": ["seed"]}))
    assert opts.base_url == "http://127.0.0.1:1/v1" and opts.unsupported == ("seed",) and opts.model == "m" and opts.serve is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.timeout_s = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        HTTPOptions("v", {}, 1.0)  # type: ignore[misc]


def test_the_key_stays_out_of_the_options_repr(monkeypatch):
    monkeypatch.setenv("H28A_TEST_KEY", "sk-secret-value")
    opts = HTTPOptions.from_variant(Variant(name="v", backend="http", model="m", options={"base_url": "http://127.0.0.1:1/v1", "api_key_env": "H28A_TEST_KEY"}))
    assert opts.api_key == "sk-secret-value" and "sk-secret" not in repr(opts)
    assert "api_key_env" not in opts.fingerprint_options() and "base_url" in opts.fingerprint_options()


class FlagLauncher(EchoLauncher):
    """Sets a variable in the server's environment and prints it before exiting (a start that fails)."""

    @classmethod
    def environment(cls, env):
        return env | {"H28A_LAUNCHER_FLAG": "set-by-launcher"}

    @classmethod
    def command(cls, model_path, model_name, *, host, port, continuous_batching, args):
        return [sys.executable, "-c", "import os, sys; print(os.environ.get('H28A_LAUNCHER_FLAG')); sys.exit(3)"]


def test_a_launcher_shapes_its_server_environment(echo_registered, monkeypatch):
    echo_registered.FlagLauncher = FlagLauncher
    monkeypatch.setitem(LAUNCHERS, "flag", f"{echo_registered.__name__}:FlagLauncher")
    with pytest.raises(EvalsuiteError, match=r"(?s)did not come up.*exited with status 3.*set-by-launcher"):
        LocalServer("flag", "/w/tiny", startup_timeout_s=30).start()
