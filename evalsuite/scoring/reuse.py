"""Score reuse: the cache keys that let a re-run skip scoring outputs that did not change.

Scorers are pure functions of a case and an output, so a stored score stays right for as long as
nothing it was computed from changes. Each stored score set is keyed by

- the scorer: its name, level, what it applies to, its arguments (sandbox limits, thresholds), its
  `version`, the source code of the scoring package and the sandbox (any edit invalidates), the
  evalsuite version, and the Python and library versions that can change a result;
- the input: the case's content digest (question, documents, expectations, glossary) and every
  field of the output the scorer can read (text, error, token ids, and the baseline's text and
  token ids for drift scorers); for case-level scorers, the inputs of all samples in order.

Variant name and sample index are left out of the input key on purpose: no scorer reads them, so a
variant that says exactly what the baseline said reuses the baseline's scores.

Scores from a failed sandbox (an infrastructure error, not the model's) are never stored: they are
retried on the next run, as the sandbox's own memo does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from .base import Score, ScoreInput, ScorerSpec

#: bumped when the stored form of a score set changes
SCORE_CACHE_VERSION = 1
#: ScoreInput fields that go into the input key (every field a scorer may read)
KEYED_FIELDS = ("text", "error", "tokens", "baseline_text", "baseline_tokens", "calls", "baseline_calls")
#: ScoreInput fields left out of the key: scorers never read them (the case is keyed by its digest)
UNKEYED_FIELDS = ("case", "sample", "variant")
#: libraries whose version can change a score
_LIBRARIES = ("jsonschema", "sacrebleu", "rapidfuzz", "numpy")
_PACKAGE = Path(__file__).resolve().parents[1]


def _sha(obj) -> str:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


@functools.cache
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


@functools.cache
def code_digest() -> str:
    """Hash of the code every scorer shares: the scoring package, the sandbox and its job runner."""
    files = set((_PACKAGE / "scoring").glob("*.py")) | set((_PACKAGE / "sandbox").rglob("*.py"))
    files |= {_PACKAGE / "executors" / "sandbox_jobs.py", _PACKAGE / "cases" / "caseset.py"}
    return _sha({str(p.relative_to(_PACKAGE)): _file_digest(str(p)) for p in sorted(files)})


@functools.cache
def _environment() -> dict:
    from .. import __version__
    from ..models import library_identity

    return {"evalsuite": __version__, "python": list(sys.version_info[:2]), "libraries": library_identity(*_LIBRARIES), "code": code_digest()}


def scorer_key(spec: ScorerSpec) -> str:
    """Everything about a scorer that can change its scores, hashed."""
    module = sys.modules.get(getattr(spec.fn, "__module__", ""), None)
    source = getattr(module, "__file__", None)
    return _sha(
        {
            "cache_version": SCORE_CACHE_VERSION,
            "spec": spec.describe(),
            "version": spec.version,
            "function": f"{getattr(spec.fn, '__module__', '?')}:{getattr(spec.fn, '__qualname__', repr(spec.fn))}",
            "source": _file_digest(source) if source else None,  # a scorer defined outside the package
            "environment": _environment(),
        }
    )


def input_key(case_digest: str, inp: ScoreInput) -> str:
    """The output a per-output scorer sees, hashed with its case's content digest."""
    return _sha([case_digest] + [getattr(inp, f) for f in KEYED_FIELDS])


def case_key(case_digest: str, input_keys: Sequence[str]) -> str:
    """What a case-level scorer sees: every sample's input key, in sample order."""
    return _sha([case_digest, "case", list(input_keys)])


def dump_scores(scores: Sequence[Score]) -> str:
    return json.dumps([[s.metric, s.value, s.passed, s.higher_is_better, s.details] for s in scores], ensure_ascii=False, default=str)


def load_scores(payload: str) -> list[Score]:
    return [Score(m, v, p, h, d) for m, v, p, h, d in json.loads(payload)]


def normalized(scores: Sequence[Score]) -> list[Score]:
    """Scores as they come back from the cache (JSON types), so a fresh and a reused run agree exactly."""
    return load_scores(dump_scores(scores))


def storable(scores: Sequence[Score]) -> bool:
    """False when a score records a sandbox failure (not the model's): those are retried, not stored."""
    for s in scores:
        d = s.details if isinstance(s.details, dict) else {}
        if d.get("status") == "error" or d.get("sandbox_errors") or d.get("reason") == "sandbox error":
            return False
    return True


def check_fields() -> list[str]:
    """ScoreInput fields that are neither keyed nor declared unread (a test keeps this empty)."""
    return [f.name for f in fields(ScoreInput) if f.name not in KEYED_FIELDS + UNKEYED_FIELDS]
