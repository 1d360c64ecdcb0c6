"""Small suites on the fake backend, shared by the reliability tests."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import yaml

DOC = "The VPN session lasts 12 hours. Reset it at https://vpn.example/reset."


def write_suite(root: Path, *, n_cases: int = 6, samples: int = 1, batch_size: int = 2, base_options: dict | None = None,
                variants: list[dict] | None = None, generation: dict | None = None) -> Path:
    """A kb_qa suite under `root`: `n_cases` grounded cases, a fake baseline and `variants` (default: two)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "sets").mkdir(exist_ok=True)
    cases = [{"id": f"q{i:03d}", "prompt": f"How long does the VPN session last? ({i})", "context": ["d1"],
              "expect": {"required_terms": ["12 hours"], "citations": ["d1"]}} for i in range(n_cases)]
    caseset = {"schema_version": 1, "defaults": {"scenario": "kb_qa", "kind": "grounded", "lang": "en"},
               "documents": [{"id": "d1", "text": DOC}], "cases": cases}
    (root / "sets" / "cases.yaml").write_text(yaml.safe_dump(caseset, sort_keys=False), "utf-8")
    base = {"name": "base", "baseline": True, "backend": "fake",
            "options": {"default": "It lasts 12 hours [d1] ({case_id}, sample {sample}).", **(base_options or {})}}
    if variants is None:
        variants = [{"name": "nf4", "quantization": {"method": "bnb", "bits": 4, "quant_type": "nf4"}},
                    {"name": "spec", "speculative": {"method": "prompt_lookup", "num_tokens": 10}}]
    suite = {"schema_version": 1, "name": "rel", "casesets": ["sets"],
             "generation": {"max_new_tokens": 16, "samples": samples, "batch_size": batch_size, **(generation or {})},
             "output_dir": "out", "cache": "out/cache.sqlite", "variants": [base, *variants]}
    path = root / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False), "utf-8")
    return path


def calls(log: Path) -> list[tuple[str, str, int]]:
    """(variant, case, sample) of every request the fake backend generated, from its call log."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text("utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 4:  # a line cut by a kill is not a call
            out.append((parts[0], parts[1], int(parts[2])))
    return out


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalsuite.cli", *args]


def cli_env() -> dict:
    return dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def stored_lines(run_dir: Path) -> list[dict]:
    """Every record of a run's generations.jsonl (the raw file, not the de-duplicated view)."""
    text = (run_dir / "generations.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_per_key(run_dir: Path) -> Counter:
    return Counter((d["variant"], d["case_id"], d["sample"]) for d in stored_lines(run_dir))


def content(gens) -> list[tuple]:
    """What a generation says, without timings and provenance (latency, cached): equal across runs."""
    return sorted((g.key(), g.text, g.error, g.timeout, g.finish_reason, g.new_tokens, g.prompt_tokens) for g in gens)


def score_content(run_dir: Path) -> list[str]:
    """The run's score records as JSON lines, sorted: the scores of a run as data."""
    from evalsuite.run.store import RunStore

    return sorted(json.dumps(r.to_dict(), ensure_ascii=False, default=str) for r in RunStore(run_dir).scores())


#: lines the reliability conftest prints at the end of the session (kills survived, faults injected)
FIGURES: list[str] = []
