"""load.json and faults.json are checked on read: a file from a newer evalsuite is refused clearly."""

from __future__ import annotations

import json

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.run.faults import read_faults
from evalsuite.run.load_records import stored_windows
from evalsuite.run.store import RunStore


def test_a_newer_load_json_is_refused_with_a_clear_error():
    with pytest.raises(EvalsuiteError, match="load.json has schema_version 99, newer than this evalsuite reads"):
        stored_windows({"schema_version": 99, "windows": []})
    assert stored_windows({"schema_version": 1, "windows": []}) == [] and stored_windows(None) == []


def test_a_newer_faults_json_is_refused_with_a_clear_error(tmp_path):
    store = RunStore(tmp_path)
    (tmp_path / store.FAULTS).write_text(json.dumps({"schema_version": 99, "variants": {}}))
    with pytest.raises(EvalsuiteError, match="faults.json has schema_version 99"):
        read_faults(store)
    (tmp_path / store.FAULTS).write_text(json.dumps({"variants": {}}))  # before versions were written: read
    assert read_faults(store) == {}
