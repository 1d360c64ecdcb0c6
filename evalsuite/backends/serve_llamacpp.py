"""The llama.cpp launcher: `python -m llama_cpp.server` (`pip install 'evalsuite[llamacpp]'`) serving a GGUF file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..errors import EvalsuiteError
from .serve_launcher import Launcher

if TYPE_CHECKING:
    from ..cases.suite import Variant


class LlamaCppLauncher(Launcher):
    """llama-cpp-python's server; the GGUF file is served under an alias (its file name's stem)."""

    name = "llama_cpp"
    requirements = (("llama_cpp", "llamacpp"), ("uvicorn", "llamacpp"), ("sse_starlette", "llamacpp"))
    libraries = ("llama_cpp_python",)
    settings: ClassVar[dict[str, str]] = {"gguf": "a llama_cpp setting (launcher: llama_cpp)"}
    counts_tokens_by_chunks = True
    names_model_by_stem = True

    @classmethod
    def command(cls, model_path: Path, model_name: str, *, host: str, port: int, continuous_batching: bool, args: list[str]) -> list[str]:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", model_name, "--host", host, "--port", str(port)]
        if not any(a.startswith("--interrupt_requests") for a in args):
            # by default a new request interrupts the one being streamed (its text comes back empty):
            # evalsuite sends a batch at once, so requests queue on the server instead
            cmd += ["--interrupt_requests", "False"]
        return cmd

    @classmethod
    def weights(cls, spec: dict, variant: Variant) -> Path:
        from .. import models

        gguf = spec.get("gguf")
        if gguf:
            p = Path(gguf).expanduser()
            if not p.is_file():
                raise EvalsuiteError(f"variant {variant.name!r}: GGUF file {gguf} not found")
            return p
        if variant.model not in (None, "", models.EMBEDDED):
            raise EvalsuiteError(
                f"variant {variant.name!r}: the llama_cpp launcher serves a GGUF file: set serve.gguf (or model: embedded for the shipped Q4_1 GGUF)"
            )
        return models.embedded_gguf_path()
