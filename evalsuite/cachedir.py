"""What evalsuite keeps between processes under its cache directory (`$EVALSUITE_CACHE_DIR`, else
`~/.cache/evalsuite`): converted and quantized models (evalsuite.models.files), the environments of
variants (evalsuite.backends.envs), and the memo of files found valid.

The memo: a case-set file whose content was checked against the case schema once, and had no
problem, is not checked again (the check is most of a warm re-run's time). An entry is an empty
file named by the digest of the content, the schema and the validator's version, so a changed file,
schema or jsonschema is checked anew; only a clean result is remembered. A cache directory that
cannot be written just means every file is checked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """The cache directory (converted and quantized models, environments, the memo of valid content):
    the option given, then $EVALSUITE_CACHE_DIR, then ~/.cache/evalsuite."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("EVALSUITE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "evalsuite"


def _entry(kind: str, key: str) -> Path:
    return cache_root() / "valid" / kind / key


def found_valid(kind: str, key: str) -> bool:
    """Whether content of this digest (`kind`: what it was checked as) was checked and found valid."""
    return _entry(kind, key).is_file()


def remember_valid(kind: str, key: str) -> None:
    """Remember that content of this digest was checked and found valid (silently not, where the cache
    directory cannot be written)."""
    path = _entry(kind, key)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
