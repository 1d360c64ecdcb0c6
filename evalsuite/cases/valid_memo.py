"""Checks of content against a schema, done once per content (evalsuite.cachedir keeps the memo).

A case set's files are checked against the case and resource schemas, and the JSON Schemas they
carry (`expect.schema` files, a tools library's parameters) against their meta-schema. Most of a
warm re-run's time went there. `once_valid` runs a check only for content that has not passed the
same check before; what is remembered is only that the content passed, keyed by the digest of the
content, evalsuite's schemas and jsonschema's version, so a changed file, schema or validator is
checked anew.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TypeVar

from ..cachedir import found_valid, remember_valid
from ..hashing import sha256_json

T = TypeVar("T")


def once_valid(kind: str, data: object, check: Callable[[], list[T]]) -> list[T]:
    """`check()`'s problems with `data` (checked as `kind`), or none without checking when the same
    content passed the same check before; a clean result is remembered."""
    key = content_key(data)
    if key is not None and found_valid(kind, key):
        return []
    found = check()
    if key is not None and not found:
        remember_valid(kind, key)
    return found


def content_key(data: object) -> str | None:
    """The digest of some content, the case schemas and jsonschema's version; None for content that
    has no canonical JSON (mapping keys of mixed types)."""
    try:
        return sha256_json([_schemas_digest(), data], default=_typed)
    except (TypeError, ValueError):
        return None


def _typed(obj: object) -> str:
    """A YAML value JSON has no type for (a date, a set), with its type: a schema may tell them apart."""
    return f"{type(obj).__name__}:{obj!r}"


@cache
def _schemas_digest() -> str:
    from importlib.metadata import version

    texts = [resources.files("evalsuite.schemas").joinpath(n).read_text("utf-8") for n in ("caseset.schema.json", "resources.schema.json")]
    return sha256_json([version("jsonschema"), *texts])
