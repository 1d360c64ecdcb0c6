"""Content digests shared by every layer (case sets, fingerprints, rubrics, runs)."""

from __future__ import annotations

import hashlib
import json


def sha256_json(obj: object) -> str:
    """SHA-256 of canonical JSON (sorted keys, no whitespace, UTF-8)."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
