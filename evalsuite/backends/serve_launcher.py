"""The server launcher interface: how one kind of local OpenAI-compatible server is started.

`LocalServer` (http_serve.py) owns a server's process (spawn, wait until it answers, stop); a
`Launcher` says what differs between servers: the command line, the packages it needs, the
libraries that enter the fingerprint, and where its weights come from. Each launcher is one class
in its own module, registered by name in `LAUNCHERS` as a lazy "module:attr" string (so listing
the launchers imports none of them, and a new one is one class and one line here).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..errors import EvalsuiteError

if TYPE_CHECKING:
    from ..cases.suite import Variant
    from .base import Generation

#: launcher name -> its class, or a lazy "module:attr" string resolved on first use
LAUNCHERS: dict[str, type[Launcher] | str] = {
    "transformers": "evalsuite.backends.serve_transformers:TransformersLauncher",
    "llama_cpp": "evalsuite.backends.serve_llamacpp:LlamaCppLauncher",
    "vllm": "evalsuite.backends.serve_vllm:VLLMLauncher",
}


class Launcher:
    """One kind of server. Class attributes describe it; `command` builds its command line."""

    name: ClassVar[str]
    #: (module, extra) pairs: the modules it needs, with the evalsuite extra that installs each
    requirements: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: the libraries whose versions enter a served variant's fingerprint
    libraries: ClassVar[tuple[str, ...]] = ()
    #: `serve` settings only this launcher takes, each with how a misplaced one is described
    settings: ClassVar[dict[str, str]] = {}
    #: it serves a model directory whose chat template can render `completions` prompts on the client
    serves_model_dir: ClassVar[bool] = False
    #: it sends no usage on a stream but one chunk per generated token (a token count of last resort)
    counts_tokens_by_chunks: ClassVar[bool] = False
    #: requests name the model by its file or folder name without suffix (llama.cpp, vLLM), not its path
    names_model_by_stem: ClassVar[bool] = False

    @classmethod
    def model_name(cls, model_path: Path) -> str:
        """The name requests must carry for the model served from `model_path` (its path, or with
        `names_model_by_stem` its file or folder name without suffix)."""
        return model_path.stem if cls.names_model_by_stem else str(model_path)

    @classmethod
    def command(cls, model_path: Path, model_name: str, *, host: str, port: int, continuous_batching: bool, args: list[str]) -> list[str]:
        """The command line that starts the server (without the suite's `args`, which the server appends)."""
        raise NotImplementedError

    @classmethod
    def missing_requirement(cls) -> str | None:
        """Why this server cannot start here (a missing package, with the extra to install), or None."""
        for module, extra in cls.requirements:
            if importlib.util.find_spec(module) is None:
                return f"needs {module} to start the server: pip install 'evalsuite[{extra}]'"
        return None

    @classmethod
    def environment(cls, env: dict[str, str]) -> dict[str, str]:
        """The server process's environment, from the one evalsuite prepared (a server in its own
        environment may drop or add variables)."""
        return env

    @classmethod
    def library_identity(cls) -> dict:
        """The versions of what serves (part of the fingerprint)."""
        from .. import models

        return models.library_identity(*cls.libraries)

    @classmethod
    def server_environment(cls) -> dict:
        """Where the server computes its outputs (`Backend.environment` of a served variant): by
        default evalsuite's own environment, whose interpreter runs the server, with `libraries`."""
        from .base import local_environment

        return local_environment(cls.libraries)

    @classmethod
    def around_batch(cls, base_url: str, generate: Callable[[], list[Generation]]) -> list[Generation]:
        """Run one batch's requests (`generate`); a launcher may read server-side figures around it."""
        return generate()

    @classmethod
    def read_metrics(cls, base_url: str) -> dict[str, float] | None:
        """The server's own counters now (None: it exposes none); read before and after a variant."""
        return None

    @classmethod
    def metrics_summary(cls, before: dict | None, after: dict | None) -> dict | None:
        """What the server's counters say happened between two readings (the report's engine metrics)."""
        return None

    @classmethod
    def weights(cls, spec: dict, variant: Variant) -> Path:
        """The weights a variant's `serve` spec serves (a model directory or a file)."""
        from .. import models

        return models.resolve_model_dir(variant.model, revision=getattr(variant, "revision", None))


def launcher_class(name: str) -> type[Launcher]:
    """The launcher registered as `name` (importing its module on first use)."""
    entry = LAUNCHERS.get(name)
    if entry is None:
        raise EvalsuiteError(f"unknown serve launcher {name!r}; available: {', '.join(LAUNCHERS)}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
        assert isinstance(entry, type) and issubclass(entry, Launcher)
        LAUNCHERS[name] = entry
    return entry


def owned_settings() -> dict[str, tuple[str, str]]:
    """Every launcher-specific `serve` setting: name -> (its launcher, how a misplaced one is described)."""
    return {key: (name, what) for name in LAUNCHERS for key, what in launcher_class(name).settings.items()}
