"""`evalsuite cases from-traffic` on the stored samples, `--no-scrub` in the header, and `evalsuite cases review`
(a person's walk through the drafts, fed on stdin)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalsuite.cli import app

DATA = Path(__file__).parent / "data"
SAMPLES = [DATA / "batch_input.jsonl", DATA / "batch_output.jsonl", DATA / "chat_pairs.jsonl", DATA / "messages.parquet", DATA / "messages_dataset"]


@pytest.fixture
def drafts(tmp_path, repo):
    out = tmp_path / "traffic"
    res = CliRunner().invoke(app, ["cases", "from-traffic", *map(str, SAMPLES), "--out", str(out), "--glossary", str(repo / "casesets/brand/glossary.yaml")])
    assert res.exit_code == 0, res.output
    return out, res.output


def test_from_traffic_reports_strata_duplicates_left_out_and_skipped_lines(drafts):
    out, text = drafts
    assert "kb_qa/zh/short" in text and "duplicates: 0 exact, 0 near" in text
    assert "left out: 1 tool-use scenario not available yet (issue 43)" in text
    assert "batch_input.jsonl:5: (line): not JSON" in text and "chat_pairs.jsonl:3: request.messages[0].role" in text
    assert "scrubbed: 1 PHONE_NUMBER" in text
    assert sorted(p.name for p in out.glob("*.yaml")) == ["brand.yaml", "code.yaml", "glossary.yaml", "kb_qa.yaml"]
    brand = yaml.safe_load((out / "brand.yaml").read_text("utf-8"))
    assert brand["glossary"] == "glossary.yaml"
    assert any(c["expect"].get("required_terms") == ["Lumora Cloud"] for c in brand["cases"])


def test_no_scrub_is_said_in_the_header(tmp_path):
    out = tmp_path / "raw"
    res = CliRunner().invoke(app, ["cases", "from-traffic", str(DATA / "chat_pairs.jsonl"), "--out", str(out), "--no-scrub"])
    assert res.exit_code == 0 and "not scrubbed" in res.output
    text = (out / "code.yaml").read_text("utf-8")
    assert "NOT SCRUBBED (--no-scrub)" in text.splitlines()[1] and "+1 415-555-0132" in text


def test_review_confirm_edit_drop_skip_on_stdin(drafts, tmp_path, monkeypatch):
    out, _ = drafts
    path = out / "code.yaml"
    ids = [c["id"] for c in yaml.safe_load(path.read_text("utf-8"))["cases"]]
    assert len(ids) == 3
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\nopen(p, 'a').write('title: edited by a person\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    res = CliRunner().invoke(app, ["cases", "review", str(path)], input="c\nd\ne\n")
    assert res.exit_code == 0, res.output
    assert "1 confirm, 1 drop, 1 edit" in res.output
    data = yaml.safe_load(path.read_text("utf-8"))
    got = {c["id"]: c for c in data["cases"]}
    assert sorted(got) == sorted([ids[0], ids[2]])
    assert "status" not in got[ids[0]] and got[ids[2]]["title"] == "edited by a person" and "status" not in got[ids[2]]
    assert path.read_text("utf-8").startswith("# written by `evalsuite cases from-traffic`")  # the header is kept
    assert CliRunner().invoke(app, ["validate", str(out)]).exit_code == 0


def test_review_confirm_all_and_quit(drafts):
    out, _ = drafts
    res = CliRunner().invoke(app, ["cases", "review", str(out / "kb_qa.yaml")], input="q\n")
    assert res.exit_code == 0 and all(c["status"] == "draft" for c in yaml.safe_load((out / "kb_qa.yaml").read_text("utf-8"))["cases"])
    res = CliRunner().invoke(app, ["cases", "review", str(out), "--confirm-all"])
    assert res.exit_code == 0, res.output
    cases = [c for p in out.glob("*.yaml") if p.name != "glossary.yaml" for c in yaml.safe_load(p.read_text("utf-8"))["cases"]]
    assert cases and not any("status" in c for c in cases)
    res = CliRunner().invoke(app, ["validate", str(out)])
    assert "drafts" not in res.output and f"{len(cases)} from traffic" in res.output


def test_an_edit_that_breaks_the_case_set_leaves_the_file_as_it_was(drafts, tmp_path, monkeypatch):
    out, _ = drafts
    path = out / "code.yaml"
    before = path.read_text("utf-8")
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\nopen(p, 'a').write('kind: nonsense\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    res = CliRunner().invoke(app, ["cases", "review", str(path)], input="e\ns\ns\n")
    assert res.exit_code == 4 and "'nonsense' is not a kind of scenario 'code'" in res.output
    assert path.read_text("utf-8") == before


def test_existing_case_sets_are_not_replaced_without_force(drafts):
    out, _ = drafts
    before = (out / "kb_qa.yaml").read_text("utf-8")
    res = CliRunner().invoke(app, ["cases", "from-traffic", str(DATA / "chat_pairs.jsonl"), "--out", str(out)])
    assert res.exit_code == 4 and "already there" in res.output and "--force" in res.output
    assert (out / "kb_qa.yaml").read_text("utf-8") == before
    res = CliRunner().invoke(app, ["cases", "from-traffic", str(DATA / "chat_pairs.jsonl"), "--out", str(out), "--force"])
    assert res.exit_code == 0 and (out / "kb_qa.yaml").read_text("utf-8") != before
