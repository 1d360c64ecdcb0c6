"""What an importer reads from another tool's log, in one shape for every tool, and the check that two
logs ran the same documents (same ids, same prompts, same task configuration) before they are paired."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError

#: metric names whose smaller values are better (perplexities, losses, error rates); others are higher-is-better
LOWER_IS_BETTER = ("perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte", "loss", "ter", "wer", "cer", "error", "latency")

#: how many differing documents a mismatch error names
SHOWN = 3


class ImportMismatchError(EvalsuiteError):
    """Two logs that cannot be paired: other tasks, task configurations, documents or prompts."""


@dataclass(frozen=True, kw_only=True)
class TaskInfo:
    """One task of a log: what must be equal in two logs for their documents to pair."""

    name: str
    version: str  #: the task's own version (lm-eval `versions`, Inspect `task_version`)
    output_type: str  #: generate_until, multiple_choice, loglikelihood ... ("inspect" for Inspect tasks)
    primary: str  #: the metric the default imported rubric gates on
    higher_is_better: Mapping[str, bool] = field(default_factory=dict)  #: per metric, as the tool declared it
    config: Mapping[str, Any] = field(default_factory=dict)  #: the task configuration, less what names the model


@dataclass(frozen=True, kw_only=True)
class ImportedSample:
    """One document (one epoch of it) as a tool logged it."""

    task: str
    doc_id: str
    epoch: int = 1  #: 1-based; 1 when the tool has no epochs
    prompt: str = ""
    target: str = ""
    text: str = ""  #: the response: generated text, or the chosen answer of a multiple-choice task
    digest: str = ""  #: digest of what must match in another log (document, prompt, target)
    metrics: Mapping[str, float] = field(default_factory=dict)  #: per-sample metric values, as recorded
    extra: Mapping[str, Any] = field(default_factory=dict)  #: tool-specific facts (filtered responses, log-likelihoods)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task, self.doc_id, self.epoch)


@dataclass(frozen=True, kw_only=True)
class ImportedLog:
    """Everything read from one model's log(s) of one tool."""

    tool: str  #: "lm-eval" or "inspect"
    tool_version: str
    model: str  #: the model as the tool named it
    model_args: Mapping[str, Any]
    tasks: Mapping[str, TaskInfo]
    files: Mapping[str, str]  #: log file path -> sha256
    samples: tuple[ImportedSample, ...]
    source: str  #: the path given on the command line
    format_version: str = ""  #: the log format's version (Inspect's `version`; lm-eval: its version)

    def by_key(self) -> dict[tuple[str, str, int], ImportedSample]:
        return {s.key: s for s in self.samples}


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_text(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()


def higher_is_better(metric: str, declared: Mapping[str, bool] | None = None) -> bool:
    """A metric's direction: as the tool declared it, else lower for perplexity-like names."""
    base = metric.split(",")[0]
    if declared and base in declared:
        return bool(declared[base])
    return not any(base == n or base.endswith("_" + n) or base.endswith("." + n) for n in LOWER_IS_BETTER)


def check_match(base: ImportedLog, other: ImportedLog, base_name: str, other_name: str) -> None:
    """Refuse to pair two logs whose tasks, task configurations or documents differ, naming the first
    differing documents (ImportMismatchError)."""
    where = f"{other_name} ({other.source}) against {base_name} ({base.source})"
    if base.tool != other.tool:
        raise ImportMismatchError(f"{where}: logs of different tools ({other.tool} vs {base.tool})")
    if set(base.tasks) != set(other.tasks):
        only_b, only_o = sorted(set(base.tasks) - set(other.tasks)), sorted(set(other.tasks) - set(base.tasks))
        raise ImportMismatchError(f"{where}: different tasks (only in {base_name}: {only_b or 'none'}; only in {other_name}: {only_o or 'none'})")
    for name in sorted(base.tasks):
        b, o = base.tasks[name], other.tasks[name]
        if b.version != o.version:
            raise ImportMismatchError(f"{where}: task {name} version {o.version} vs {b.version}")
        keys = sorted(set(b.config) | set(o.config))
        diff = [k for k in keys if b.config.get(k) != o.config.get(k)]
        if diff:
            k = diff[0]
            raise ImportMismatchError(
                f"{where}: task {name} is configured differently ({', '.join(diff[:5])}): {k} = {o.config.get(k)!r} vs {b.config.get(k)!r}"
            )
    _check_documents(base.by_key(), other.by_key(), where, base_name, other_name)


def _check_documents(b: dict, o: dict, where: str, base_name: str, other_name: str) -> None:
    only_b, only_o = sorted(set(b) - set(o), key=_order), sorted(set(o) - set(b), key=_order)
    if only_b or only_o:
        parts = []
        if only_b:
            parts.append(f"{len(only_b)} only in {base_name} (first: {', '.join(_doc(k) for k in only_b[:SHOWN])})")
        if only_o:
            parts.append(f"{len(only_o)} only in {other_name} (first: {', '.join(_doc(k) for k in only_o[:SHOWN])})")
        raise ImportMismatchError(f"{where}: different documents: " + "; ".join(parts))
    differ = [k for k in sorted(b, key=_order) if b[k].digest != o[k].digest]
    if differ:
        first = b[differ[0]], o[differ[0]]
        what = "prompt" if first[0].prompt != first[1].prompt else "document or target"
        raise ImportMismatchError(
            f"{where}: {len(differ)} document(s) differ in prompt, few-shot examples or target (first: {', '.join(_doc(k) for k in differ[:SHOWN])}); "
            f"{_doc(differ[0])}: the {what} differs: {first[1].prompt[:120]!r} vs {first[0].prompt[:120]!r}"
        )


def _order(key: tuple[str, str, int]) -> tuple:
    task, doc, epoch = key
    return (task, (0, int(doc), "") if doc.isdigit() else (1, 0, doc), epoch)


def _doc(key: tuple[str, str, int]) -> str:
    task, doc, epoch = key
    return f"{task} doc {doc}" + (f" epoch {epoch}" if epoch != 1 else "")
