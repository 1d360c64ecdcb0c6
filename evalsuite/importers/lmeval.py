"""lm-evaluation-harness's `--log_samples` output: `results_<time>.json` (task configs, versions, the
model's arguments, each metric's direction) and one `samples_<task>_<time>.jsonl` per task (per
document: `doc_id`, the arguments, the responses, the filtered responses and each metric's value).

Read as plain JSON: lm-eval itself is not needed to import its logs. Format versions read (tests
keep a trimmed log of each): lm-eval 0.4.x.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError
from .records import ImportedLog, ImportedSample, TaskInfo, file_sha256, sha256_text

#: task-config keys that name the model or the machine, not the task (left out of the pairing check)
_NOT_TASK = ("metadata",)


def find_results(path: str | Path) -> Path:
    """The results file of an lm-eval output directory (the `--output_path`, or the model folder in it),
    or the results file itself; the newest when the directory holds several runs."""
    p = Path(path)
    if p.is_file():
        return p
    if not p.is_dir():
        raise EvalsuiteError(f"{p}: no such lm-eval output directory")
    found = sorted(p.rglob("results_*.json"), key=lambda f: f.name)
    if not found:
        raise EvalsuiteError(f"{p}: no results_*.json under it (run lm_eval with --output_path {p} --log_samples)")
    models = {f.parent for f in found}
    if len(models) > 1:
        raise EvalsuiteError(f"{p}: results of {len(models)} models under it ({', '.join(sorted(m.name for m in models))}): give one model's folder")
    return found[-1]


def read_lm_eval(path: str | Path) -> ImportedLog:
    """One model's lm-eval run: its results file and the per-task sample files of the same run."""
    results_path = find_results(path)
    try:
        results = json.loads(results_path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"{results_path}: not an lm-eval results file ({exc})") from exc
    stamp = results_path.stem[len("results_") :]
    configs = results.get("configs") or {}
    if not configs:
        raise EvalsuiteError(f"{results_path}: no `configs` (not an lm-eval results file?)")
    files = {str(results_path): file_sha256(results_path)}
    tasks, samples = {}, []
    for task in sorted(configs):
        sample_path = results_path.parent / f"samples_{task}_{stamp}.jsonl"
        if not sample_path.is_file():
            raise EvalsuiteError(f"{sample_path}: missing: lm_eval must run with --log_samples for a per-document import")
        files[str(sample_path)] = file_sha256(sample_path)
        info = _task_info(task, configs[task], results)
        read = _read_samples(sample_path, task, info.output_type)
        tasks[task] = replace(info, primary=_stored_primary(info.primary, {m for s in read for m in s.metrics}))
        samples += read
    cfg = results.get("config") or {}
    args = cfg.get("model_args") or {}
    model = results.get("model_name") or (args.get("pretrained") if isinstance(args, dict) else str(args)) or str(cfg.get("model", ""))
    return ImportedLog(
        tool="lm-eval",
        tool_version=str(results.get("lm_eval_version") or ""),
        model=str(model),
        model_args=args if isinstance(args, dict) else {"model_args": args},
        tasks=tasks,
        files=files,
        samples=tuple(samples),
        source=str(path),
        format_version=str(results.get("lm_eval_version") or ""),
    )


def _task_info(task: str, config: dict, results: dict) -> TaskInfo:
    metrics = [m.get("metric") for m in config.get("metric_list") or [] if isinstance(m, dict)]
    hib = (results.get("higher_is_better") or {}).get(task) or {}
    return TaskInfo(
        name=task,
        version=str((results.get("versions") or {}).get(task, "")),
        output_type=str(config.get("output_type", "")),
        primary=str(metrics[0]) if metrics else "",
        higher_is_better={k: bool(v) for k, v in hib.items() if v is not None},
        config={k: v for k, v in config.items() if k not in _NOT_TASK},
    )


def _stored_primary(primary: str, stored: set[str]) -> str:
    """The primary metric under the name the import stores it: a filtered generation metric is
    `exact_match,strip` (GSM8K's `exact_match,strict-match`), as lm-eval's results name it, not the
    `exact_match` of `metric_list` (a rubric naming that would match no score)."""
    if not primary or primary in stored:
        return primary
    return next((m for m in sorted(stored) if m.startswith(primary + ",")), primary)


def _read_samples(path: Path, task: str, output_type: str) -> list[ImportedSample]:
    """One ImportedSample per document: lines of several filters of one document are merged (their
    metrics are named `metric,filter` as in the results file)."""
    by_doc: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                doc = str(rec["doc_id"])
            except (ValueError, KeyError, TypeError) as exc:
                raise EvalsuiteError(f"{path}:{n}: not an lm-eval sample record ({exc})") from exc
            entry = by_doc.setdefault(doc, {"rec": rec, "metrics": {}, "filtered": {}})
            flt = rec.get("filter", "none")
            for m in rec.get("metrics") or []:
                value = _number(rec.get(m))
                if value is not None:
                    entry["metrics"][m if flt == "none" else f"{m},{flt}"] = value
            entry["filtered"][flt] = rec.get("filtered_resps")
    return [_sample(task, doc, e["rec"], e["metrics"], e["filtered"], output_type) for doc, e in by_doc.items()]


def _sample(task: str, doc: str, rec: dict, metrics: dict, filtered: dict, output_type: str) -> ImportedSample:
    args = rec.get("arguments") or {}
    first = args.get("gen_args_0") or {}
    prompt = str(first.get("arg_0", "")) if isinstance(first, dict) else str(first)
    extra: dict[str, Any] = {"filtered_resps": filtered}
    text = _response(rec, args, output_type, extra)
    return ImportedSample(
        task=task,
        doc_id=doc,
        prompt=prompt,
        target=str(rec.get("target", "")),
        text=text,
        digest=sha256_text(rec.get("doc_hash"), rec.get("prompt_hash"), rec.get("target_hash")),
        metrics=metrics,
        extra=extra,
    )


def _response(rec: dict, args: dict, output_type: str, extra: dict) -> str:
    """The response as text: the generation, or the choice a multiple-choice task picked."""
    resps = rec.get("resps") or []
    try:
        if output_type == "generate_until":
            first = resps[0][0] if resps and resps[0] else ""
            return first if isinstance(first, str) else json.dumps(first)
        if output_type == "multiple_choice":
            lls = [float(r[0][0]) for r in resps]
            extra["loglikelihoods"] = lls
            best = max(range(len(lls)), key=lls.__getitem__)
            return str((args.get(f"gen_args_{best}") or {}).get("arg_1", best)).strip()
    except (IndexError, TypeError, ValueError):
        return ""
    return ""


def _number(v: object) -> float | None:
    """A per-document metric value (lists and pairs, kept for corpus-level metrics such as BLEU, are not)."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None
