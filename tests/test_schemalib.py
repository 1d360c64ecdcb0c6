"""jsonschema without the IRI grammar (evalsuite/schemalib.py): loading a case set never compiles
`rfc3987_syntax`'s Lark grammar, and an `iri` format check, should anyone ask for one, still works."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import sys
from evalsuite.cases.caseset import load_caseset
load_caseset('casesets/kb_qa/grounded.yaml')
print('jsonschema' in sys.modules, 'rfc3987_syntax' in sys.modules, 'lark' in sys.modules)
import jsonschema
checker = jsonschema.FormatChecker()
print(checker.conforms('http://example.com/ä', 'iri'), checker.conforms('no iri', 'iri'), 'rfc3987_syntax' in sys.modules)
"""


@pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax is not installed: nothing to keep out")
def test_case_sets_load_without_the_iri_grammar_and_iri_checks_still_work(tmp_path):
    # a cache of its own: the case set is checked here, not found in the memo of valid content (evalsuite.cachedir)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALSUITE_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180, check=True).stdout.split("\n")
    assert out[0] == "True False False", out  # jsonschema validated the case set; no grammar was built
    assert out[1] == "True False True", out  # asked for, the iri checker loads the grammar and answers
