"""Inspect's eval logs (`.eval` archives and `.json` files), read with Inspect's own
`inspect_ai.log.read_eval_log`: per sample its id, epoch, input, target, output and each scorer's
value. Values Inspect writes as letters (C, I, P, N) become numbers through Inspect's
`value_to_float`; a scorer whose values are dicts gives one metric per key (`scorer.key`).

Format versions read (tests keep a small log of each): Inspect log version 2, `.eval` and `.json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError, MissingExtraError
from .records import ImportedLog, ImportedSample, TaskInfo, file_sha256, higher_is_better, sha256_text


def read_inspect(path: str | Path) -> ImportedLog:
    """One Inspect log file (one task, one model)."""
    try:
        from inspect_ai.log import read_eval_log
        from inspect_ai.scorer import value_to_float
    except ImportError as exc:
        raise MissingExtraError("importing Inspect logs", "import", "inspect-ai") from exc
    p = Path(path)
    if not p.is_file():
        raise EvalsuiteError(f"{p}: no such Inspect log (an .eval or .json file)")
    try:
        log = read_eval_log(str(p))
    except Exception as exc:  # noqa: BLE001 - Inspect raises many kinds for a file that is not its log
        raise EvalsuiteError(f"{p}: not an Inspect log ({type(exc).__name__}: {exc})") from exc
    if not log.samples:
        raise EvalsuiteError(f"{p}: the log holds no samples (status {log.status}); run inspect eval without --no-log-samples")
    ev = log.eval
    to_float = value_to_float()
    samples = [_sample(ev.task, s, to_float) for s in log.samples]
    scorers = [s.name for s in (log.results.scores if log.results else [])]
    metric_names = sorted({m for s in samples for m in s.metrics})
    primary = next((m for sc in scorers for m in metric_names if m == sc or m.startswith(sc + ".")), metric_names[0] if metric_names else "")
    task = TaskInfo(
        name=ev.task,
        version=str(ev.task_version),
        output_type="inspect",
        primary=primary,
        higher_is_better={m: higher_is_better(m) for m in metric_names},
        config=_config(log),
    )
    return ImportedLog(
        tool="inspect",
        tool_version=str((ev.packages or {}).get("inspect_ai", "")),
        model=str(ev.model),
        model_args=dict(ev.model_args or {}),
        tasks={ev.task: task},
        files={str(p): file_sha256(p)},
        samples=tuple(samples),
        source=str(path),
        format_version=f"{log.version}{p.suffix}",
    )


def _config(log: Any) -> dict:
    """What must be equal in two logs of the same task: its arguments, dataset, epochs, solvers and scorers."""
    ev = log.eval
    plan = log.plan
    return {
        "task_args": dict(ev.task_args or {}),
        "dataset": {"name": ev.dataset.name, "samples": ev.dataset.samples, "sample_ids": list(ev.dataset.sample_ids or [])},
        "epochs": ev.config.epochs,
        "solvers": [(step.solver, step.params) for step in (plan.steps if plan else [])],
        "scorers": [s.name for s in (log.results.scores if log.results else [])],
    }


def _sample(task: str, s: Any, to_float: Any) -> ImportedSample:
    prompt = s.input if isinstance(s.input, str) else "\n".join(f"{m.role}: {m.text}" for m in s.input)
    target = s.target if isinstance(s.target, str) else "\n".join(s.target)
    metrics: dict[str, float] = {}
    answers: dict[str, Any] = {}
    for name, score in (s.scores or {}).items():
        v = score.value
        if isinstance(v, dict):
            metrics.update({f"{name}.{k}": float(to_float(x)) for k, x in v.items() if x is not None})
        elif isinstance(v, list):
            metrics.update({f"{name}.{i}": float(to_float(x)) for i, x in enumerate(v) if x is not None})
        elif v is not None:
            metrics[name] = float(to_float(v))
        answers[name] = {"value": v, "answer": score.answer, "explanation": (score.explanation or "")[:500]}
    text = s.output.completion if s.output is not None else ""
    return ImportedSample(
        task=task,
        doc_id=str(s.id),
        epoch=int(s.epoch or 1),
        prompt=prompt,
        target=target,
        text=text,
        digest=sha256_text(prompt, target),
        metrics=metrics,
        extra={"scores": answers, "error": str(s.error.message) if s.error else None},
    )
