"""jsonschema, imported without building the IRI grammar nobody here checks.

`import jsonschema` registers its format checkers at import time. When `rfc3987_syntax` is installed
(JupyterLab's dependencies install it), registering the `iri` checkers compiles a Lark grammar: about
1 s, paid by every command that loads a case set, `evalsuite --help` included. evalsuite validates
case files and model outputs without a format checker, so the grammar is never used. This module
imports jsonschema with a stand-in for `rfc3987_syntax` whose one function loads the real module on
first call: the checkers stay registered and behave the same if someone does check an `iri` format.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

_GRAMMAR = "rfc3987_syntax"


def _lazy_grammar() -> types.ModuleType:
    stub = types.ModuleType(_GRAMMAR)

    def is_valid_syntax(*args: object, **kwargs: object) -> bool:
        sys.modules.pop(_GRAMMAR, None)
        return importlib.import_module(_GRAMMAR).is_valid_syntax(*args, **kwargs)

    stub.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    return stub


def jsonschema() -> types.ModuleType:
    """The jsonschema module (imported on first call, without compiling the IRI grammar)."""
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    stub = _lazy_grammar() if _GRAMMAR not in sys.modules and importlib.util.find_spec(_GRAMMAR) is not None else None
    if stub is not None:
        sys.modules[_GRAMMAR] = stub
    try:
        return importlib.import_module("jsonschema")
    finally:
        if stub is not None and sys.modules.get(_GRAMMAR) is stub:
            del sys.modules[_GRAMMAR]


def check_schema_version(doc: object, supported: int, what: str) -> None:
    """Refuse a document written by a newer evalsuite (its `schema_version` above `supported`) with
    a clear error; a document without one is from before versions were written, and is read."""
    from .errors import EvalsuiteError

    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > supported:
        raise EvalsuiteError(f"{what} has schema_version {version}, newer than this evalsuite reads ({supported}): upgrade evalsuite to read it")
