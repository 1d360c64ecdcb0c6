"""Content digests shared by every layer (case sets, fingerprints, rubrics, runs)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any


def sha256_json(obj: object, default: Callable[[Any], Any] = str) -> str:
    """SHA-256 of canonical JSON (sorted keys, no whitespace, UTF-8); `default` writes what JSON has no type for."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
