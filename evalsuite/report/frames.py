"""A stored run as pandas DataFrames, and `evalsuite export` of runs to CSV or Parquet.

The frames are the notebook's and the export's view of a run: one row per generation, per score
record, per compared (variant, scenario, metric) and per variant's performance summary. Nested
fields (score details, case-id lists) stay Python objects in the frames and become JSON strings in
CSV files; Parquet (pyarrow) keeps lists and writes details as JSON strings too, so every file has
one type per column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EvalsuiteError, MissingExtraError, suggest

if TYPE_CHECKING:
    from ..run.store import RunStore

FORMATS = ("csv", "parquet")
TABLES = ("generations", "scores", "comparisons", "perf")
#: a run's exports: its tables as CSV or Parquet, or its score records as JSON lines (the `scores.jsonl` of older runs)
RUN_FORMATS = (*FORMATS, "jsonl")


@dataclass(frozen=True)
class RunFrames:
    """One run as DataFrames (pandas)."""

    run_id: str
    baseline: str
    generations: Any  #: one row per stored generation (variant, case_id, sample, scenario, text, timings...)
    scores: Any  #: one row per score record (metric, value, passed, details)
    comparisons: Any  #: one row per MetricDelta: each variant vs the baseline per scenario and metric
    perf: Any  #: one row per variant: latency p50/p95, TTFT, tokens/s, peak memory, errors, timeouts, ratios
    signature: dict = field(default_factory=dict)  #: the run signature (case digest, versions, hardware)

    def table(self, name: str):
        """A frame by name (generations, scores, comparisons, perf)."""
        if name not in TABLES:
            raise EvalsuiteError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        return getattr(self, name)


def resolve_store(run: Any, runs_dir: str | Path = "reports/runs"):
    """A RunStore from a RunStore, a run directory, a run id under `runs_dir`, or `last`."""
    from ..run.store import RunStore

    if isinstance(run, RunStore):
        return run
    return RunStore.find(runs_dir, str(run))


def _nan(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def generations_frame(gens: Sequence[Any], scenarios: Mapping[str, tuple[str, str]] | None = None):
    """One row per generation; `scenarios` maps case id -> (scenario, kind) when known."""
    import pandas as pd

    scenarios = scenarios or {}
    cols = [
        "variant",
        "case_id",
        "sample",
        "scenario",
        "kind",
        "text",
        "ok",
        "error",
        "timeout",
        "finish_reason",
        "prompt_tokens",
        "new_tokens",
        "latency_s",
        "ttft_s",
        "tokens_per_s",
        "cached",
        "batch_size",
    ]
    rows = []
    for g in gens:
        scen, kind = scenarios.get(g.case_id, (None, None))
        rows.append(
            [
                g.variant,
                g.case_id,
                g.sample,
                scen,
                kind,
                g.text,
                g.ok,
                g.error,
                bool(g.timeout),
                g.finish_reason,
                g.prompt_tokens,
                g.new_tokens,
                g.latency_s,
                g.ttft_s,
                g.tokens_per_s,
                bool(g.cached),
                g.batch_size,
            ]
        )
    return pd.DataFrame(rows, columns=cols)


def scores_frame(records: Sequence[Any]):
    """One row per score record (details kept as dicts)."""
    import pandas as pd

    cols = ["variant", "case_id", "sample", "scenario", "kind", "metric", "value", "passed", "higher_is_better", "details"]
    df = pd.DataFrame(
        [[r.variant, r.case_id, r.sample, r.scenario, r.kind, r.metric, r.value, r.passed, r.higher_is_better, r.details or {}] for r in records], columns=cols
    )
    df["sample"] = df["sample"].astype("Int64")
    df["value"] = df["value"].astype("float64")
    df["passed"] = df["passed"].astype("boolean")
    return df


def comparisons_frame(cmp: Any):
    """One row per MetricDelta of a compare.Comparison, with the noise floor beside it."""
    import pandas as pd

    df = pd.DataFrame([_comparison_row(cmp, d) for d in cmp.deltas], columns=COMPARISON_COLUMNS)
    df["noise_flips"] = df["noise_flips"].astype("Int64")
    for c in ("baseline_value", "variant_value", "delta", "ci_low", "ci_high", "p_value", "p_worse", "harm", "noise_delta"):
        df[c] = df[c].astype("float64")
    return df


COMPARISON_COLUMNS = (
    "variant", "scenario", "metric", "noise_run", "stat", "higher_is_better", "n", "baseline_value", "variant_value", "delta", "ci_low", "ci_high",
    "p_value", "p_worse", "harm", "pass_to_fail", "fail_to_pass", "noise_flips", "noise_delta", "missing_in_variant", "pass_to_fail_cases",
    "fail_to_pass_cases", "worse_cases",
)  # fmt: skip


def _comparison_row(cmp: Any, d: Any) -> dict:
    nf = None if d.noise else cmp.noise_floor(d.scenario, d.metric)
    floor = nf is not None and bool(nf.runs)
    flips, harm = (nf.flips, nf.harm) if nf is not None and floor else (None, None)
    return {
        "variant": d.variant, "scenario": d.scenario, "metric": d.metric, "noise_run": d.noise, "stat": "pass rate" if d.pass_fail else "mean",
        "higher_is_better": d.higher_is_better, "n": d.n, "baseline_value": _nan(d.baseline_mean), "variant_value": _nan(d.variant_mean),
        "delta": _nan(d.delta), "ci_low": _nan(d.ci_low), "ci_high": _nan(d.ci_high), "p_value": _nan(d.p_value), "p_worse": _nan(d.p_worse),
        "harm": _nan(d.harm) if d.n else None, "pass_to_fail": len(d.pass_to_fail), "fail_to_pass": len(d.fail_to_pass),
        "noise_flips": flips, "noise_delta": harm, "missing_in_variant": len(d.missing_in_variant),
        "pass_to_fail_cases": list(d.pass_to_fail), "fail_to_pass_cases": list(d.fail_to_pass), "worse_cases": list(d.worse_cases),
    }  # fmt: skip


def _metric_cell(m: Mapping | None, key: str, not_exposed: str) -> str:
    if m is None:
        return "not recorded"
    if key not in m:
        return not_exposed
    value = m[key]
    if value is None:
        return "-"
    if key.endswith("_rate"):
        return f"{100 * float(value):.1f}%"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def engine_metrics_rows(summaries: Mapping[str, Mapping], suite: Mapping | None = None) -> list[dict]:
    """Per vLLM variant (the vllm backend, or an http variant serving with `launcher: vllm`), and per
    variant whose summary holds engine metrics: what vLLM's own counters showed over the variant
    (evalsuite.backends.vllm_metrics), each figure formatted, "not exposed" for a series the engine
    lacks, "not recorded" when the run holds no reading (outputs from the cache, an engine that
    did not start)."""
    from ..backends.vllm_metrics import FIGURES, NOT_EXPOSED

    rows = []
    for v in (suite or {}).get("variants") or []:
        name = v.get("name")
        s = summaries.get(name) or {}
        serve = (v.get("options") or {}).get("serve")
        vllm = v.get("backend") == "vllm" or (isinstance(serve, dict) and serve.get("launcher") == "vllm")
        if not (vllm or s.get("engine_metrics")):
            continue
        m = s.get("engine_metrics")
        cells = {key: _metric_cell(m, key, NOT_EXPOSED) for key in FIGURES}
        rows.append({"variant": name, "metrics": m, "cells": cells})
    return rows


def perf_rows(summaries: Mapping[str, Mapping], cmp: Any | None, baseline: str, suite: Mapping | None = None) -> list[dict]:
    """Per variant: the runner's summary (variants.json) with the ratios against the baseline."""
    suite_variants = {v.get("name"): v for v in ((suite or {}).get("variants") or [])}
    base = summaries.get(baseline) or {}

    def ratio(a: Any, b: Any) -> float | None:
        try:
            return float(a) / float(b) if a is not None and b not in (None, 0) else None
        except (TypeError, ValueError, ZeroDivisionError):
            return None

    rows = []
    names = list(dict.fromkeys([baseline] + [n for n in suite_variants if n in summaries] + list(summaries)))
    for name in names:
        s = summaries.get(name)
        if s is None:
            continue
        sv = suite_variants.get(name, {})
        pd_ = cmp.perf_for(name) if cmp is not None and name != baseline else None
        rows.append(
            {
                "variant": name,
                "baseline": name == baseline,
                "noise_run": bool(sv.get("noise")),
                "changes": ", ".join(s.get("changes") or []) or ("(baseline)" if name == baseline else "-"),
                "backend": s.get("backend"),
                "generations": s.get("generations"),
                "errors": s.get("errors"),
                "timeouts": s.get("timeouts"),
                "latency_p50_s": s.get("latency_median_s"),
                "latency_p95_s": s.get("latency_p95_s"),
                "ttft_p50_s": s.get("ttft_median_s"),
                "tokens_per_s": s.get("tokens_per_s_median"),
                "peak_memory_mb": s.get("peak_memory_mb"),
                "model_memory_mb": s.get("model_memory_mb"),
                "load_s": s.get("load_s"),
                "compile_s": s.get("compile_s"),  #: compiling and warming up, apart from the timed generation
                "speedup": ratio(s.get("tokens_per_s_median"), base.get("tokens_per_s_median")),
                "latency_p95_ratio": ratio(s.get("latency_p95_s"), base.get("latency_p95_s")),
                "memory_ratio": ratio(s.get("peak_memory_mb"), base.get("peak_memory_mb")),
                "exactness": getattr(pd_, "exactness", None),
            }
        )
    return rows


def perf_frame(rows: Sequence[Mapping]):
    import pandas as pd

    cols = [
        "variant",
        "baseline",
        "noise_run",
        "changes",
        "backend",
        "generations",
        "errors",
        "timeouts",
        "latency_p50_s",
        "latency_p95_s",
        "ttft_p50_s",
        "tokens_per_s",
        "peak_memory_mb",
        "model_memory_mb",
        "speedup",
        "latency_p95_ratio",
        "memory_ratio",
        "exactness",
        "load_s",
        "compile_s",
    ]
    df = pd.DataFrame([[r.get(c) for c in cols] for r in rows], columns=cols)
    for c in cols[8:]:
        df[c] = df[c].astype("float64")
    return df


@dataclass(kw_only=True)
class LoadedRun:
    """What the report and the frames read from a run directory, loaded once."""

    store: RunStore
    records: list
    generations: list
    comparison: Any
    cases: dict  #: case id -> Case (empty when the run's cases cannot be loaded)
    summaries: dict  #: variants.json
    suite: dict
    signature: dict
    case_problem: str | None = None  #: why the cases could not be loaded


def load_run(run: Any, runs_dir: str | Path = "reports/runs", *, comparison: Any = None) -> LoadedRun:
    """Read a run once: scores, generations, cases, and the paired comparison with its baseline
    (the one given, e.g. a Judgment's, else the store's own: evalsuite.verdict.compare.compare_run)."""
    import yaml

    from ..verdict.compare import compare_run

    store = resolve_store(run, runs_dir)
    cmp = comparison if comparison is not None else compare_run(store)
    records = store.scores()  # parsed once per state of the file: the comparison's read is reused
    gens = store.generations()
    summaries = store.read_json(store.VARIANTS, {}) or {}
    # suite.yaml holds every scripted output of a fake suite: parse it once, with libyaml when present
    suite = yaml.load((store.dir / store.SUITE).read_text("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    cases: dict = {}
    problem = None
    try:
        from ..scoring.run import run_cases

        cases = {c.id: c for c in run_cases(store)}
    except Exception as exc:  # noqa: BLE001 - the report still renders from outputs and scores
        problem = f"the run's cases could not be loaded ({exc}); citations and tests are not shown"
    return LoadedRun(
        store=store,
        records=records,
        generations=gens,
        comparison=cmp,
        cases=cases,
        summaries=summaries,
        suite=suite,
        signature=store.signature or {},
        case_problem=problem,
    )


def frames_from_loaded(lr: LoadedRun) -> RunFrames:
    scen = {r.case_id: (r.scenario, r.kind) for r in lr.records}
    for cid, c in lr.cases.items():
        scen.setdefault(cid, (c.scenario, c.kind))
    baseline = lr.comparison.baseline
    return RunFrames(
        run_id=lr.store.run_id,
        baseline=baseline,
        generations=generations_frame(lr.generations, scen),
        scores=scores_frame(lr.records),
        comparisons=comparisons_frame(lr.comparison),
        perf=perf_frame(perf_rows(lr.summaries, lr.comparison, baseline, lr.suite)),
        signature=lr.signature,
    )


def load_run_frames(run: Any, runs_dir: str | Path = "reports/runs") -> RunFrames:
    """A run (RunStore, run directory, run id or `last`) as DataFrames: generations, scores,
    comparisons (one row per MetricDelta) and perf (one row per variant)."""
    return frames_from_loaded(load_run(run, runs_dir))


# ---------------------------------------------------------------------------------------------
# export


def _flat(df):
    """A copy with list/dict cells as JSON strings (CSV and Parquet want one scalar type per column)."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object and out[c].map(lambda x: isinstance(x, (list, dict, tuple))).any():
            out[c] = out[c].map(lambda x: None if x is None else json.dumps(x, ensure_ascii=False, sort_keys=True, default=str))
    return out


def write_frame(df, path: Path, fmt: str) -> None:
    """Write one frame atomically (a temporary file renamed into place)."""
    from ..yamlio import atomic_path

    flat = _flat(df)
    if fmt != "csv":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise MissingExtraError("exporting Parquet files", "parquet", "pyarrow") from exc
    with atomic_path(path) as tmp:
        if fmt == "csv":
            flat.to_csv(tmp, index=False)
        else:
            flat.to_parquet(tmp, index=False, engine="pyarrow")


def check_format(fmt: str, known: Sequence[str] = FORMATS) -> str:
    fmt = (fmt or "").lower().lstrip(".")
    if fmt not in known:
        raise EvalsuiteError(f"unknown export format {fmt!r}{suggest(fmt, known)}; known: {', '.join(known)}")
    return fmt


def export_run(run: Any, out: str | Path, fmt: str = "csv", *, runs_dir: str | Path = "reports/runs", tables: Iterable[str] | None = None) -> list[Path]:
    """Write a run's frames to `out/` as `<table>.csv` or `<table>.parquet`, or (`jsonl`) its score
    records as `out/scores.jsonl`, one stored record a line; return the paths."""
    fmt = check_format(fmt, RUN_FORMATS)
    names = list(tables) if tables is not None else (["scores"] if fmt == "jsonl" else list(TABLES))
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise EvalsuiteError(f"unknown table {unknown[0]!r}{suggest(unknown[0], TABLES)}; known: {', '.join(TABLES)}")
    out = Path(out)
    if fmt == "jsonl":
        if names != ["scores"]:
            raise EvalsuiteError(f"--format jsonl exports the score records only (tables: scores), not {', '.join(n for n in names if n != 'scores')}")
        from ..run.scorefile import write_jsonl_scores

        return [write_jsonl_scores(out / "scores.jsonl", resolve_store(run, runs_dir).scores())]
    frames = load_run_frames(run, runs_dir)
    paths = []
    for name in names:
        p = out / f"{name}.{fmt}"
        write_frame(frames.table(name), p, fmt)
        paths.append(p)
    return paths


def cases_frame(cases: Iterable[Any]):
    """Case sets as one row per case, in the columns of `interop.to_dataset` (nested fields as JSON)."""
    import pandas as pd

    from ..cases.interop import DATASET_COLUMNS, EXTRA_KEYS, JSON_COLUMNS, STRING_COLUMNS, to_records

    known = set(STRING_COLUMNS) | set(JSON_COLUMNS) | set(EXTRA_KEYS)

    def dumps(v: Any) -> str | None:
        return None if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True)

    rows = []
    for rec in to_records(cases):
        extra = {k: v for k, v in rec.items() if k not in known}
        rows.append(
            [rec.get(c) for c in STRING_COLUMNS]
            + [dumps(rec.get(c)) for c in JSON_COLUMNS]
            + [dumps(rec["_glossary"]), dumps(extra) if extra else None, rec["_source"], rec["_line"], rec["_version"]]
        )
    df = pd.DataFrame(rows, columns=list(DATASET_COLUMNS))
    df["line"] = df["line"].astype("Int64")
    return df


def export_cases(cases: Sequence[Any], out: str | Path, fmt: str) -> Path:
    """Write case sets as one CSV or Parquet file (`out` is the file)."""
    fmt = check_format(fmt)
    out = Path(out)
    write_frame(cases_frame(cases), out, fmt)
    return out
