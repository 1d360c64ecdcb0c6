"""Cost against context length, end to end on the fake backend: a run whose generations carry cost
records stores each variant's slopes in variants.json, and the report draws the curve and lists them."""

from __future__ import annotations

import base64
import math

import pytest
import yaml
from bs4 import BeautifulSoup

from verdict_synth import write_sets, write_suite

FILLER = "The quarterly review covered staffing, budgets and the roadmap in some detail. "  # 12 words


@pytest.fixture(scope="module")
def cost_run(tmp_path_factory):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    root = tmp_path_factory.mktemp("costrun")
    outputs = write_sets(root, n_kb=6)
    kb = root / "sets" / "kb.yaml"
    doc = yaml.safe_load(kb.read_text("utf-8"))
    for i, d in enumerate(doc["documents"]):  # contexts of about 100 to 3,100 words
        d["text"] += " " + FILLER * (10 + 50 * i)
    kb.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    variants = [
        {
            "name": "kv-hqq4",
            "changes": ["backend", "kv_cache"],
            "kv_cache": {"implementation": "quantized", "backend": "hqq", "nbits": 4},
            "options": {"outputs": outputs, "default": "no output", "cost": {"prefill_s_per_1k": 0.3, "peak_memory_mb": 500, "memory_mb_per_1k": 4, "kv_bytes_per_token": 12000}},
        }
    ]
    path = write_suite(root, outputs, variants, name="cost")
    suite = yaml.safe_load(path.read_text("utf-8"))
    suite["generation"]["batch_size"] = 1
    suite["variants"][0]["options"]["cost"] = {"prefill_s_per_1k": 0.25, "peak_memory_mb": 500, "memory_mb_per_1k": 16, "kv_bytes_per_token": 46080}
    path.write_text(yaml.safe_dump(suite, sort_keys=False), "utf-8")
    return run_suite(load_suite(path), RunOptions(progress=False)).store


def test_variants_json_holds_the_growth_per_1k_tokens(cost_run):
    summaries = cost_run.read_json("variants.json")
    base, kv = summaries["baseline"]["context_cost"], summaries["kv-hqq4"]["context_cost"]
    assert base["points"] == kv["points"] == 6
    assert math.isclose(base["measures"]["peak_memory_mb"]["per_1k"], 16.0) and math.isclose(kv["measures"]["peak_memory_mb"]["per_1k"], 4.0)
    assert math.isclose(base["measures"]["prefill_s"]["per_1k"], 0.25)
    # 46,080 bytes per token: the KV cache grows about 44 MB per 1k tokens (plus the new tokens' share)
    assert math.isclose(base["measures"]["kv_cache_mb"]["per_1k"], 46080 * 1000 / 2**20, rel_tol=0.05)
    assert summaries["kv-hqq4"]["changes"] == ["backend", "kv_cache"]


def test_report_draws_the_cost_curve_and_lists_the_slopes(cost_run, tmp_path):
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report

    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("schema_version: 1\nname: t\nrules:\n  - {name: kb, scenario: kb_qa, metric: citations.recall, max_flips: 0}\n", "utf-8")
    result = write_report(judge_run(cost_run, rubric, "production"), out_dir=tmp_path / "report")
    soup = BeautifulSoup(result.html.read_text("utf-8"), "html.parser")
    img = soup.select_one("img#plot-context-cost")
    assert img is not None
    png = base64.b64decode(img["src"].split(",", 1)[1])
    assert png.startswith(b"\x89PNG") and len(png) > 10_000  # four panels of points and lines, not an empty frame
    rows = {tr.select_one("td b").text: [td.text for td in tr.select("td")] for tr in soup.select("table#context-cost tbody tr")}
    assert set(rows) == {"baseline", "kv-hqq4"}
    assert rows["baseline"][5] == "16" and rows["kv-hqq4"][5] == "4"  # peak memory MB per 1k tokens
    md = result.markdown.read_text("utf-8")
    assert "### Cost against context length" in md
    assert any(line.startswith("| `kv-hqq4` | 6 |") and "| 4 |" in line for line in md.splitlines())


def test_no_curve_without_cost_records(tmp_path):
    from evalsuite.report.plots import context_cost_png

    assert context_cost_png([], ["baseline"]) is None
