"""`evalsuite review ...` and `evalsuite gate --flag`: thin commands over the API."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalsuite.cli import app

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_review_commands_end_to_end(review_run, tmp_path):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    r = cli("review", "flag", store.dir, "--queue", q, "--runs-dir", store.dir.parent)
    assert r.exit_code == 0, r.output
    assert "5 output(s) flagged" in r.output and "5 new item(s)" in r.output and "5 await review" in r.output
    r = cli("review", "flag", store.dir, "--queue", q, "--runs-dir", store.dir.parent)
    assert "0 new item(s), 5 already queued" in r.output
    r = cli("review", "list", "--queue", q, "--json")
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert r.exit_code == 0 and len(rows) == 5 and all(x["verdict"] is None for x in rows)
    kb3 = next(x for x in rows if x["case_id"] == "kb-003")
    r = cli("review", "show", kb3["id"], "--queue", q)
    assert r.exit_code == 0 and "kb-003" in r.output and "citations changed" in r.output and "[-" in r.output
    r = cli("review", "annotate", kb3["id"], "--verdict", "acceptable", "--note", "fine", "--reviewer", "alice", "--queue", q)
    assert r.exit_code == 0 and "acceptable by alice" in r.output
    r = cli("review", "annotate", kb3["id"], "--verdict", "great", "--queue", q)
    assert r.exit_code == 4 and "verdict: must be one of acceptable, regression, unsure" in r.output  # issue 38: your input is wrong exits 4
    r = cli("review", "list", "--queue", q, "--status", "acceptable")
    assert r.exit_code == 0 and "kb-003" in r.output and "1 item(s)" in r.output
    r = cli("review", "next", "--reviewer", "bob", "--queue", q)
    assert r.exit_code == 0 and "claimed by bob" in r.output
    r = cli("review", "stats", "--queue", q, "--json")
    s = json.loads(r.output)
    assert (s["items"], s["verdict_rows"], s["open"], s["claimed"]) == (5, 1, 4, 1)
    out = tmp_path / "q.csv"
    r = cli("review", "export", "--out", out, "--format", "csv", "--queue", q)
    assert r.exit_code == 0 and out.read_text().count("\n") >= 6
    r = cli("review", "show", 999, "--queue", q)
    assert r.exit_code == 4 and "item 999: no such item" in r.output  # issue 38: your input is wrong exits 4


def test_gate_flag_fills_the_queue_and_reads_it(review_run, tmp_path):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    out = tmp_path / "v.json"
    r = cli("gate", store.dir, "--runs-dir", store.dir.parent, "--rubric", review_run["rubric"], "--flag", "--queue", q, "--json", out)
    assert r.exit_code == 1 and q.exists()
    data = json.loads(out.read_text())
    assert data["review"]["open"] == 5 and any(x["rule"] == "human-review" for x in data["results"])


def test_skip_undo_back_and_expiring_waivers_on_the_command_line(review_run, tmp_path):
    store, q = review_run["store"], tmp_path / "q.sqlite"
    cli("review", "flag", store.dir, "--queue", q, "--runs-dir", store.dir.parent)
    first = cli("review", "next", "--reviewer", "dana", "--queue", q)
    first_id = int(first.output.split("item #")[1].split()[0])
    r = cli("review", "skip", first_id, "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 0 and f"item #{first_id} skipped: behind the others for you" in r.output
    second = cli("review", "next", "--reviewer", "dana", "--queue", q)
    second_id = int(second.output.split("item #")[1].split()[0])
    assert second_id != first_id
    r = cli("review", "annotate", second_id, "--verdict", "acceptable", "--expires", "30d", "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 0 and "the item is now acceptable" in r.output
    r = cli("review", "show", second_id, "--queue", q)
    assert "acceptable" in r.output and "claimed by" not in r.output
    r = cli("review", "back", "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 0 and f"item #{second_id}" in r.output
    r = cli("review", "undo", second_id, "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 0 and "your acceptable" in r.output and "retracted by verdict" in r.output and "the item is now open" in r.output
    r = cli("review", "show", second_id, "--queue", q)
    assert "retracts #" in r.output and "(retracted)" in r.output
    r = cli("review", "undo", second_id, "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 4 and "dana has no verdict on it to undo" in r.output  # issue 38: your input is wrong exits 4
    r = cli("review", "annotate", second_id, "--verdict", "regression", "--expires", "2030-01-01", "--reviewer", "dana", "--queue", q)
    assert r.exit_code == 4 and "only an acceptable verdict (a waiver) can expire" in r.output  # issue 38: your input is wrong exits 4
    r = cli("review", "stats", "--queue", q)
    assert "1 undone" in r.output and "no item answered by two reviewers yet" in r.output and "no audit sample" in r.output


def test_answer_needs_a_pairwise_item_and_expires_a_future_date(review_run, tmp_path):
    """Issue 38, point 6: `--answer left-worse` was accepted on an item that was never shown blind, and
    `--expires 2026-03-31` (a past date) was accepted as a waiver that had already lapsed."""
    store, q = review_run["store"], tmp_path / "q.sqlite"
    assert cli("review", "flag", store.dir, "--queue", q, "--runs-dir", store.dir.parent).exit_code == 0
    item = json.loads(cli("review", "list", "--queue", q, "--json").output.splitlines()[0])
    r = cli("review", "annotate", item["id"], "--answer", "left-worse", "--reviewer", "alice", "--queue", q)
    assert r.exit_code == 4 and "is not in pairwise mode" in r.output, r.output
    r = cli("review", "annotate", item["id"], "--verdict", "acceptable", "--expires", "2001-03-31", "--reviewer", "alice", "--queue", q)
    assert r.exit_code == 4 and "--expires 2001-03-31: that is in the past" in " ".join(r.output.split()), r.output
    assert json.loads(cli("review", "list", "--queue", q, "--json").output.splitlines()[0])["verdict"] is None  # nothing recorded
    assert cli("review", "annotate", item["id"], "--verdict", "acceptable", "--expires", "30d", "--reviewer", "alice", "--queue", q).exit_code == 0
