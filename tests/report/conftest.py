"""A small stored run with planted regressions (fake backend), shared by the report tests.

Variants: `rerun` (a noise run), `clean` (identical outputs), `nocite` (half the grounded kb
answers lose their citations), `badjson` (half the brand JSON truncated) and `badcode` (half the
code answers raise). The rubric has zero-tolerance flip rules, so the small run gives failures
(citations, JSON) and a warning (code) without needing significance.
"""

from __future__ import annotations

import textwrap

import pytest

from verdict_synth import write_sets, write_suite

RUBRIC = textwrap.dedent(
    """
    schema_version: 1
    name: report-test
    rules:
      - {name: kb-citations, scenario: kb_qa, metric: citations.recall, max_flips: 0}
      - {name: brand-json, scenario: brand, metric: json.valid, max_flips: 0}
      - {name: code-tests, scenario: code, metric: code.pass, max_flips: 0, severity: warn}
      - {name: reliability, max_error_rate: 0.5}
    """
)

VARIANTS = [
    {"name": "rerun", "noise": True},
    {"name": "clean", "quantization": {"method": "bnb", "bits": 8}},
    {"name": "nocite", "quantization": {"method": "bnb", "bits": 4}, "degrade": {"kind": "drop_citations", "rate": 0.5, "seed": 1}},
    {"name": "badjson", "quantization": {"method": "gptq", "bits": 4}, "degrade": {"kind": "corrupt_json", "rate": 0.5, "seed": 2}},
    {"name": "badcode", "speculative": {"method": "prompt_lookup", "num_tokens": 4}, "degrade": {"kind": "break_code", "rate": 0.5, "seed": 3}},
]


@pytest.fixture(scope="session")
def report_run(tmp_path_factory):
    """(store, rubric path): the run, scored."""
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    root = tmp_path_factory.mktemp("reportrun")
    outputs = write_sets(root, n_kb=14, n_code=4, n_brand=8)
    outputs["kb-013"] = "Service 13 restarts every 15 hours [doc-013]. <script>alert('x')</script>"  # untrusted text must be escaped
    rubric = root / "rubric.yaml"
    rubric.write_text(RUBRIC, "utf-8")
    suite = write_suite(root, outputs, VARIANTS, rubric=str(rubric))
    res = run_suite(load_suite(suite), RunOptions(progress=False))
    # the fake backend reports no memory; give the variants figures as the transformers backend would
    perf = res.store.read_json("variants.json")
    for i, name in enumerate(["baseline", "rerun", "clean", "nocite", "badjson", "badcode"]):
        perf[name].update(peak_memory_mb=600.0 if i < 2 else 600.0 - 80 * i, model_memory_mb=540.0 if i < 2 else 540.0 - 80 * i, peak_memory_source="backend")
    res.store.write_json("variants.json", perf)
    return res.store, rubric


@pytest.fixture(scope="session")
def report(report_run, tmp_path_factory):
    """The written report (evalsuite.report.api.ReportResult)."""
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report

    store, rubric = report_run
    return write_report(judge_run(store, rubric, "production"), out_dir=tmp_path_factory.mktemp("report"))
