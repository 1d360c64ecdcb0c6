"""The `transformers serve` launcher (`pip install 'evalsuite[serving]'`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from .serve_launcher import Launcher

#: continuous batching's KV cache, unless `args` size it: 256 blocks of 32 tokens (8192 tokens in flight)
CB_CACHE_ARGS = ["--cb-block-size", "32", "--cb-num-blocks", "256"]


class TransformersLauncher(Launcher):
    """`transformers serve MODEL_DIR`; it lists (and wants) the model under the path it was given."""

    name = "transformers"
    requirements = (("torch", "models"), ("transformers", "models"), ("fastapi", "serving"), ("uvicorn", "serving"), ("openai", "serving"))
    libraries = ("transformers", "torch")
    settings: ClassVar[dict[str, str]] = {"continuous_batching": "a `transformers serve` setting (launcher: transformers)"}
    serves_model_dir = True

    @classmethod
    def command(cls, model_path: Path, model_name: str, *, host: str, port: int, continuous_batching: bool, args: list[str]) -> list[str]:
        cmd = [
            sys.executable,
            "-c",
            "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; sys.exit(main())",
            "serve",
            str(model_path),
            "--host",
            host,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        if continuous_batching:
            cmd.append("--continuous-batching")
            if not any(a.startswith(("--cb-num-blocks", "--cb-block-size", "--cb-max-memory-percent")) for a in args):
                cmd += CB_CACHE_ARGS
        return cmd
