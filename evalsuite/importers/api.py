"""Another tool's logs as a normal evalsuite run: cases are the task's documents (task/doc_id, and the
epoch when Inspect ran several), variants are the models, scores are the per-document metric values
as the tool recorded them (a metric whose values are all 0 or 1 is pass/fail: flips and McNemar),
plus evalsuite's own scorers on the response text (drift against the baseline's response).

The run is written through RunStore like any other, with its rubric beside it (each task's primary
metric may not regress significantly beyond the noise floor), so `compare`, `gate`, `report`,
`review flag`, `releases`, `promote` and the pytest plugin read it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .. import __version__
from ..backends.base import Generation
from ..cases.caseset import Case
from ..errors import EvalsuiteError
from ..run.store import RunStore, ScoreRecord
from ..yamlio import atomic_write_text, dump_yaml
from .records import ImportedLog, ImportedSample, check_match, higher_is_better, sha256_text

EpochMode = Literal["paired", "aggregate"]


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    """How logs become a run."""

    names: Sequence[str] | None = None  #: the baseline's and each variant's name, in order (default: from the models)
    runs_dir: str | Path = Path("reports") / "runs"
    epochs: EpochMode = "paired"  #: paired: one case per (document, epoch); aggregate: epochs are samples of one case
    own_scorers: bool = True  #: also run evalsuite's scorers on the response text


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """The run an import wrote, and what went into it."""

    store: RunStore
    baseline: str
    variants: tuple[str, ...]
    noise_runs: tuple[str, ...]
    cases: int
    generations: int
    scores: int
    rubric: Path


def import_lm_eval(base: str | Path, variants: Sequence[str | Path], *, noise: Sequence[str | Path] = (), options: ImportOptions | None = None) -> ImportResult:
    """`evalsuite import lm-eval BASE_DIR VARIANT_DIR...`: lm-eval `--log_samples` output directories."""
    from .lmeval import read_lm_eval

    return import_logs(read_lm_eval(base), [read_lm_eval(v) for v in variants], noise=[read_lm_eval(n) for n in noise], options=options)


def import_inspect(base: str | Path, variants: Sequence[str | Path], *, noise: Sequence[str | Path] = (), options: ImportOptions | None = None) -> ImportResult:
    """`evalsuite import inspect BASE_LOG VARIANT_LOG...`: Inspect `.eval` or `.json` logs."""
    from .inspectlogs import read_inspect

    return import_logs(read_inspect(base), [read_inspect(v) for v in variants], noise=[read_inspect(n) for n in noise], options=options)


def import_logs(base: ImportedLog, variants: Sequence[ImportedLog], *, noise: Sequence[ImportedLog] = (), options: ImportOptions | None = None) -> ImportResult:
    """Pair the logs (refused when their documents differ) and write them as one run."""
    opts = options or ImportOptions()
    if not variants:
        raise EvalsuiteError("give at least one variant log to compare with the baseline")
    names = _names(base, variants, noise, opts.names)
    logs = [base, *variants, *noise]
    for log, name in zip(logs[1:], names[1:]):
        check_match(base, log, names[0], name)
    multi_epoch = any(s.epoch != 1 for log in logs for s in log.samples)
    binary = _binary_metrics(logs)
    cases = _cases(base, opts.epochs, multi_epoch)
    gens: list[Generation] = []
    records: list[ScoreRecord] = []
    for log, name in zip(logs, names):
        fp = _fingerprint(log)
        for s in log.samples:
            cid, sample = _case_key(s, opts.epochs, multi_epoch)
            gens.append(_generation(s, name, cid, sample, fp))
            records += _records(log, s, name, cid, sample, binary)
    imported = list(records)
    if opts.own_scorers:
        records += _own_scores(cases, gens, names[0])
    rubric = default_rubric(base)
    noise_names = tuple(names[1 + len(variants) :])
    suite = _suite(base, names, noise_names)
    signature = _signature(base, logs, names, cases)

    def prepare(store: RunStore) -> None:
        rubric_path = store.dir / store.RUBRIC
        atomic_write_text(rubric_path, dump_yaml(rubric))
        atomic_write_text(store.dir / store.SUITE, dump_yaml({**suite, "rubric": str(rubric_path.resolve())}))
        atomic_write_text(store.dir / store.IMPORTED_CASES, "".join(json.dumps(_case_dict(c), ensure_ascii=False) + "\n" for c in cases))
        atomic_write_text(store.dir / store.IMPORTED_SCORES, "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in imported))

    store = RunStore.create(opts.runs_dir, suite["name"], suite, signature, prepare=prepare)
    return _finish(store, gens, records, names, noise_names, len(cases))


def _finish(store: RunStore, gens: list[Generation], records: list[ScoreRecord], names: list[str], noise_names: tuple[str, ...], n_cases: int) -> ImportResult:
    from ..run.summary import summarize_generations

    store.append(gens)
    store.sync()
    store.write_json(store.VARIANTS, {n: summarize_generations([g for g in gens if g.variant == n]) for n in names})
    store.write_scores(records)
    store.mark_complete(True, imported=True)
    return ImportResult(
        store=store,
        baseline=names[0],
        variants=tuple(n for n in names[1:] if n not in noise_names),
        noise_runs=noise_names,
        cases=n_cases,
        generations=len(gens),
        scores=len(records),
        rubric=store.dir / store.RUBRIC,
    )


# ---------------------------------------------------------------------------------------------
# names, cases, generations, scores


def _names(base: ImportedLog, variants: Sequence[ImportedLog], noise: Sequence[ImportedLog], given: Sequence[str] | None) -> list[str]:
    n_models = 1 + len(variants)
    if given:
        given = [g.strip() for g in given if g.strip()]
        if len(given) != n_models:
            raise EvalsuiteError(f"--names gives {len(given)} name(s) for {n_models} model log(s) (the baseline and each variant, in order)")
        names = list(given)
    else:
        names = []
        for log in (base, *variants):
            stem = Path(str(log.model_args.get("pretrained") or log.model_args.get("model_path") or log.model)).name or "model"
            names.append(stem if stem not in names else f"{stem}-{len(names) + 1}")
    if len(set(names)) != len(names):
        raise EvalsuiteError(f"variant names must differ: {', '.join(names)}")
    names += [f"{names[0]}-rerun" + (str(i + 1) if i else "") for i in range(len(noise))]
    return names


def scenario_of(tool: str, task: str) -> str:
    """An imported task's scenario: `<tool>:<task>` (rubric rules name it so; cases.caseset.IMPORTED_PREFIXES)."""
    return f"{tool}:{task}"


def _case_key(s: ImportedSample, mode: EpochMode, multi_epoch: bool) -> tuple[str, int]:
    """(case id, sample index) of one logged document and epoch."""
    cid = f"{s.task}/{s.doc_id}"
    if not multi_epoch:
        return cid, 0
    return (f"{cid}/epoch{s.epoch}", 0) if mode == "paired" else (cid, s.epoch - 1)


def _cases(base: ImportedLog, mode: EpochMode, multi_epoch: bool) -> list[Case]:
    out: dict[str, Case] = {}
    for s in base.samples:
        cid, _ = _case_key(s, mode, multi_epoch)
        if cid not in out:
            kind = base.tasks[s.task].output_type
            out[cid] = Case(id=cid, scenario=scenario_of(base.tool, s.task), kind=kind, prompt=s.prompt, title=s.target[:200], raw={"target": s.target})
    return list(out.values())


def _case_dict(c: Case) -> dict:
    return {"id": c.id, "scenario": c.scenario, "kind": c.kind, "prompt": c.prompt, "target": c.raw.get("target", "")}


def _fingerprint(log: ImportedLog) -> str:
    return sha256_text(log.tool, log.tool_version, log.model, json.dumps(log.model_args, sort_keys=True, default=str), *sorted(log.files.values()))[:16]


def _generation(s: ImportedSample, variant: str, cid: str, sample: int, fp: str) -> Generation:
    error = s.extra.get("error")
    return Generation(
        case_id=cid,
        variant=variant,
        sample=sample,
        text="" if error else s.text,
        error=error or None,
        finish_reason="error" if error else "stop",
        request_hash=s.digest[:32],
        fingerprint=fp,
        extra={k: v for k, v in s.extra.items() if k != "error" and v is not None},
    )


def _binary_metrics(logs: Sequence[ImportedLog]) -> set[tuple[str, str]]:
    """(task, metric) pairs whose values are all 0 or 1 in every log: pass/fail metrics."""
    seen: dict[tuple[str, str], bool] = {}
    for log in logs:
        for s in log.samples:
            for m, v in s.metrics.items():
                seen[(s.task, m)] = seen.get((s.task, m), True) and v in (0.0, 1.0)
    return {k for k, ok in seen.items() if ok}


def _records(log: ImportedLog, s: ImportedSample, variant: str, cid: str, sample: int, binary: set) -> list[ScoreRecord]:
    task = log.tasks[s.task]
    return [
        ScoreRecord(
            variant=variant,
            case_id=cid,
            sample=sample,
            scenario=scenario_of(log.tool, s.task),
            kind=task.output_type,
            metric=m,
            value=v,
            passed=(v == 1.0) if (s.task, m) in binary else None,
            higher_is_better=higher_is_better(m, task.higher_is_better),
            details={"target": s.target[:200]} if m == task.primary else {},
        )
        for m, v in s.metrics.items()
    ]


def _own_scores(cases: list[Case], gens: list[Generation], baseline: str) -> list[ScoreRecord]:
    """evalsuite's scorers on the responses (the generated text, or the chosen answer): as
    `evalsuite score` recomputes them; each task is its own scenario, so the drift scorers apply."""
    from ..scoring.run import score_generations

    return score_generations(cases, gens, baseline)


# ---------------------------------------------------------------------------------------------
# suite, signature, rubric


def _suite(base: ImportedLog, names: list[str], noise: tuple[str, ...]) -> dict:
    """The run's resolved suite: its variants (the models) and where the logs came from."""
    tasks = "+".join(sorted(base.tasks))
    variants = []
    for i, name in enumerate(names):
        variants.append({"name": name, "baseline": i == 0, "noise": name in noise, "backend": base.tool, "model": None})
    return {"name": f"import-{base.tool}-{tasks}"[:80], "imported": {"tool": base.tool, "tool_version": base.tool_version}, "variants": variants}


def _signature(base: ImportedLog, logs: Sequence[ImportedLog], names: list[str], cases: list[Case]) -> dict:
    from ..run.signature import hardware, library_versions

    digests = sorted((s.task, s.doc_id, s.epoch, s.digest) for s in base.samples)
    return {
        "schema_version": 1,
        "evalsuite": __version__,
        "suite": f"import-{base.tool}",
        "case_digest": sha256_text(json.dumps(digests)),
        "cases": len(cases),
        "casesets": {},
        "variants": {n: _fingerprint(log) for n, log in zip(names, logs)},
        "weights": {},
        "baseline": names[0],
        "source": {
            "tool": base.tool,
            "tool_version": base.tool_version,
            "format_version": base.format_version,
            "tasks": {t.name: {"version": t.version, "output_type": t.output_type, "primary": t.primary, "config": t.config} for t in base.tasks.values()},
            "models": {n: {"model": log.model, "model_args": log.model_args, "tool_version": log.tool_version} for n, log in zip(names, logs)},
            "logs": {n: {"source": log.source, "files": dict(log.files)} for n, log in zip(names, logs)},
        },
        "libraries": library_versions(),
        "hardware": hardware(),
    }


def default_rubric(base: ImportedLog) -> dict:
    """The rubric an imported run is judged by unless another is given: each task's primary metric may
    not regress significantly (one-sided, Tarone-corrected) beyond what the noise reruns show (block);
    its pass->fail flips beyond the noise floor are shown with their McNemar p (warn)."""
    rules = []
    for t in sorted(base.tasks.values(), key=lambda t: t.name):
        if not t.primary:
            continue
        rules.append(
            {
                "name": f"{t.name}-{t.primary}"[:80],
                "description": f"{t.name}: its primary metric ({t.primary}) does not regress significantly beyond the noise floor",
                "scenario": scenario_of(base.tool, t.name),
                "metric": _glob_escape(t.primary),
                "max_drop": 0.0,
                "max_flips": 0,
                "require_significance": True,
                "above_noise": True,
            }
        )
        rules.append(
            {
                "name": f"{t.name}-flips"[:80],
                "description": f"{t.name}: documents that passed on the baseline and fail on the variant, beyond the noise floor (shown, not blocking)",
                "scenario": scenario_of(base.tool, t.name),
                "metric": _glob_escape(t.primary),
                "max_flips": 0,
                "above_noise": True,
                "severity": "warn",
            }
        )
    if not rules:
        raise EvalsuiteError("no task of the log names a metric: nothing to gate on (pass --rubric to gate)")
    return {"schema_version": 1, "name": "imported", "alpha": 0.05, "multiple_testing": "tarone", "rules": rules}


def _glob_escape(name: str) -> str:
    """A metric name as a rubric glob that matches only itself."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in name) if any(ch in name for ch in "*?[") else name
