"""The suite file's option blocks, each parsed into a typed dataclass when the suite loads.

`generation:`, `timing:`, `executor:` and a variant's `trim:` live here, beneath every layer that uses them (backends,
executors, the runner), so that `evalsuite validate` and `load_suite` report a bad block with its
file, line and field, as one list of problems, before anything runs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from ..errors import EvalsuiteError, Problem, suggest
from ..registry import EXECUTORS

#: the release stages, in order (a suite's `stage:`, a rubric's `stages:`)
STAGES = ("dev", "pilot", "production")

#: (path inside the suite file) -> line, for problems
LineOf = Callable[[tuple], "int | None"]


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings shared by the variants of a suite (a variant may override some)."""

    max_new_tokens: int = 256
    temperature: float = 0.0  #: 0 means greedy
    top_p: float = 1.0
    samples: int = 1  #: samples per case, for pass@k
    seed: int = 1234
    batch_size: int = 1
    timeout_s: float | None = None  #: per-batch wall limit; a generation past it is recorded as a timeout

    def request_part(self) -> dict:
        """The settings that belong to a request (batching and timeouts do not change what is asked)."""
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}

    def to_dict(self) -> dict:
        return asdict(self)


# -- timing: ---------------------------------------------------------------------------------

MODES = ("interleaved", "sequential")


@dataclass(frozen=True)
class TimingSettings:
    """How to time variants against the baseline (`timing:` in a suite file)."""

    mode: str = "interleaved"  #: interleaved | sequential (sequential: the run's own timings, no intervals)
    rounds: int = 8  #: paired rounds (each times one block of every variant)
    block: int = 6  #: requests per block (sample 0 of the first cases by id)
    warmup: int = 1  #: rounds run first and not counted (lazy initialisation, caches, page faults)
    level: float = 0.95  #: confidence level of the ratio intervals
    max_rounds: int | None = None  #: keep timing past `rounds`, two rounds at a time, up to this many ...
    precision: float = 0.10  #: ... until every interval is within ratio x/÷ (1 + precision)

    @property
    def interleaved(self) -> bool:
        return self.mode == "interleaved"

    def to_dict(self) -> dict:
        return asdict(self)


def parse_timing(raw: object, where: str = "timing") -> TimingSettings | None:
    """The suite's `timing:` value as settings, None when absent or sequential; raises naming the field
    (`where.field: ...`). `load_suite` uses `parse_timing_block`, which collects every problem."""
    problems: list[Problem] = []
    settings = parse_timing_block(raw, "", lambda _p: None, problems)
    if problems:
        first = problems[0]
        raise EvalsuiteError(f"{where}{first.field[len('timing') :]}: {first.message}")
    return settings


def parse_timing_block(raw: object, file: str, line_of: LineOf, problems: list[Problem]) -> TimingSettings | None:
    """The suite's `timing:` block as settings (None when absent or sequential); each fault becomes a
    Problem naming the file, the line and the field."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return parse_timing_block({"mode": raw}, file, line_of, problems)
    if not isinstance(raw, dict):
        problems.append(
            Problem(
                file,
                line_of(("timing",)),
                None,
                "timing",
                f"expected 'interleaved', 'sequential' or a mapping (mode, rounds, block, warmup, level), got {raw!r}",
            )
        )
        return None
    n = len(problems)

    def bad(key: str, message: str) -> None:
        problems.append(Problem(file, line_of(("timing", key)), None, f"timing.{key}", message))

    known = set(TimingSettings.__dataclass_fields__)
    for key in sorted(set(raw) - known, key=str):
        bad(str(key), f"unknown setting (known: {', '.join(sorted(known))})")
    vals: dict[str, Any] = {"mode": raw.get("mode", "interleaved")}
    if vals["mode"] not in MODES:
        bad("mode", f"must be one of {', '.join(MODES)}, got {vals['mode']!r}")
    for key, lo in (("rounds", 2), ("block", 1), ("warmup", 0), ("max_rounds", 2)):
        v = raw.get(key)
        if key in raw and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            bad(key, f"expected an integer of at least {lo}, got {v!r}")
        elif key in raw:
            vals[key] = v
    for key, ok, what in (("level", lambda x: 0.5 <= x < 1, "a number in [0.5, 1)"), ("precision", lambda x: 0 < x <= 1, "a number in (0, 1]")):
        v = raw.get(key)
        if key in raw and (isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v)):
            bad(key, f"expected {what}, got {v!r}")
        elif v is not None:
            vals[key] = float(v)
    rounds = vals.get("rounds", TimingSettings.rounds)
    if vals.get("max_rounds") is not None and vals["max_rounds"] < rounds:
        bad("max_rounds", f"must be at least rounds ({rounds}), got {vals['max_rounds']}")
    if len(problems) > n:
        return None
    settings = TimingSettings(**vals)
    return settings if settings.interleaved else None


# -- a variant's trim: -----------------------------------------------------------------------

TRIM_ORDERS = ("retrieved", "overlap")


@dataclass(frozen=True, kw_only=True)
class ContextTrim:
    """A variant's context trimming (`trim:`): which of a case's retrieved documents the prompt
    builder keeps. The optimization practice warns about (faster prefill, less grounding), so it is
    a variant of its own, fingerprinted, with the documents it drops recorded per generation."""

    budget_tokens: int | None = None  #: keep documents, best first, while their tokens fit this budget
    top_k: int | None = None  #: keep at most this many documents, best first
    order: str = "retrieved"  #: what "best" means: the case's order (as retrieved) or word overlap with the question
    tokenizer: str = "estimate"  #: how budget tokens are counted: "estimate" (from characters), "embedded", or a tokenizer directory

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_trim_block(raw: object, file: str, line_of: LineOf, problems: list[Problem], where: tuple, who: str | None) -> ContextTrim | None:
    """A variant's `trim:` block as settings (None when absent or faulty); each fault becomes a
    Problem naming the file, the line, the variant and the field (`where` is the block's path)."""
    if raw is None:
        return None
    label = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where).lstrip(".")  # variants[1].trim

    def bad(key: str | None, message: str) -> None:
        path = where + ((key,) if key else ())
        problems.append(Problem(file, line_of(path), who, f"{label}.{key}" if key else label, message, subject="variant"))

    if not isinstance(raw, dict):
        bad(None, f"expected a mapping (budget_tokens, top_k, order, tokenizer), got {raw!r}")
        return None
    n = len(problems)
    known = set(ContextTrim.__dataclass_fields__)
    for key in sorted(set(raw) - known, key=str):
        bad(str(key), f"unknown setting (known: {', '.join(sorted(known))})")
    for key in ("budget_tokens", "top_k"):
        v = raw.get(key)
        if key in raw and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            bad(key, f"expected an integer of at least 1, got {v!r}")
    if raw.get("budget_tokens") is None and raw.get("top_k") is None:
        bad(None, "give `budget_tokens`, `top_k` or both")
    if raw.get("order", "retrieved") not in TRIM_ORDERS:
        bad("order", f"must be one of {', '.join(TRIM_ORDERS)}, got {raw.get('order')!r}")
    if not isinstance(raw.get("tokenizer", "estimate"), str) or not raw.get("tokenizer", "estimate"):
        bad("tokenizer", f"expected 'estimate', 'embedded' or a tokenizer directory, got {raw.get('tokenizer')!r}")
    if len(problems) > n:
        return None
    return ContextTrim(**{k: v for k, v in raw.items() if k in known})


# -- executor: -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutorSpec:
    """The suite file's `executor:` entry, validated."""

    kind: str = "local"  #: "local" or "ray"
    options: dict = field(default_factory=dict)  #: kind-specific settings (see RAY_OPTIONS)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **self.options}


def _nonneg_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _int_at_least(n: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= n


#: option -> (check, what it must be)
RAY_OPTIONS: dict[str, tuple[Callable[[object], bool], str]] = {
    "address": (lambda v: isinstance(v, str) and bool(v), "a Ray address (ray://host:10001, host:6379 or auto)"),
    "num_actors": (_int_at_least(1), "an integer of at least 1 (model replicas per variant)"),
    "num_cpus": (_nonneg_number, "a number of CPUs per actor (>= 0)"),
    "num_gpus": (_nonneg_number, "a number of GPUs per actor (>= 0)"),
    "max_restarts": (_int_at_least(-1), "an integer (-1: restart a dead actor without limit)"),
    "max_task_retries": (_int_at_least(-1), "an integer (-1: retry without limit)"),
    "sandbox": (lambda v: isinstance(v, bool), "true or false (run code-scoring sandbox jobs as Ray tasks)"),
    "sandbox_num_cpus": (_nonneg_number, "a number of CPUs per sandbox task (>= 0)"),
    "llm_processor": (lambda v: v in ("auto", True, False), "auto, true or false (vllm variants through ray.data.llm)"),
    "runtime_env": (lambda v: isinstance(v, dict), "a mapping (Ray runtime_env: pip, working_dir, env_vars...)"),
    "object_store_mb": (_int_at_least(50), "an integer of at least 50 (object store of a Ray started here)"),
}


def parse_executor(raw: object, file: str, line_of: Callable[[tuple], int | None], problems: list[Problem]) -> ExecutorSpec:
    """Validate the suite's `executor:` entry; append a Problem naming file, line and field for each fault.

    Accepted: `executor: local`, `executor: ray`, or a mapping `{kind: ray, address: ..., num_actors: 2}`.
    """
    if raw is None:
        return ExecutorSpec()
    if isinstance(raw, str):
        return parse_executor({"kind": raw}, file, line_of, problems)
    if not isinstance(raw, dict):
        problems.append(Problem(file, line_of(("executor",)), None, "executor", "expected `local`, `ray` or a mapping with `kind`"))
        return ExecutorSpec()
    kind = raw.get("kind", "local")
    if kind not in EXECUTORS:
        hint = suggest(kind, EXECUTORS.names(), quote=False)
        where = ("executor", "kind") if "kind" in raw else ("executor",)
        problems.append(Problem(file, line_of(where), None, "executor.kind", f"unknown executor {kind!r}{hint}; available: {', '.join(EXECUTORS.names())}"))
        return ExecutorSpec()
    options = {k: v for k, v in raw.items() if k != "kind"}
    known = RAY_OPTIONS if kind == "ray" else {}
    listing = ", ".join(sorted(known)) or "none"
    ok = _checked("executor", options, known, lambda k: f"unknown {kind} executor option (known: {listing})", file=file, line_of=line_of, problems=problems)
    return ExecutorSpec(kind, ok)


def _checked(
    block: str,
    values: Mapping,
    checks: Mapping[str, tuple[Callable[[object], bool], str]],
    unknown: Callable[[str], str],
    *,
    file: str,
    line_of: LineOf,
    problems: list[Problem],
) -> dict:
    """The entries of an option block whose values pass their check; an unknown key (`unknown(key)`
    says why) or a value that fails its check is a Problem at `block.key`, and left out."""
    ok: dict = {}
    for k, v in values.items():
        if k not in checks:
            problems.append(Problem(file, line_of((block, k)), None, f"{block}.{k}", unknown(k)))
            continue
        check, what = checks[k]
        if not check(v):
            problems.append(Problem(file, line_of((block, k)), None, f"{block}.{k}", f"expected {what}, got {v!r}"))
            continue
        ok[k] = v
    return ok


# -- load: -----------------------------------------------------------------------------------

#: background traffic kinds: the shortest prompts of the run's cases, and the longest contexts
TRAFFIC_KINDS = ("short", "long")


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    """How served variants are put under load (`load:` in a suite file; evalsuite.run.load runs it)."""

    levels: tuple[int, ...] = (1, 4, 16)  #: requests in flight at once, one window per level and round
    requests: int = 16  #: background requests per window (bounded), besides the replayed cases
    duration_s: float = 120.0  #: a window sends no new request after this many seconds
    replay: int = 8  #: fixed cases (sample 0 of the first ids) replayed in every window, compared with their answers at rest
    mix: dict = field(default_factory=lambda: {"short": 1.0, "long": 1.0})  #: background kind -> weight
    stream: float = 0.5  #: share of background requests streamed (the rest ask for one JSON reply)
    rounds: int = 2  #: windows per level and variant, interleaved across variants (ABBA): the TTFT ratio's interval
    timeout_s: float = 60.0  #: per request; past it the request is a timeout
    max_new_tokens: int | None = None  #: background requests' limit (default: the suite's)
    variants: tuple[str, ...] | None = None  #: the served variants to load (default: every `backend: http` one)
    seed: int = 1234  #: draws the background traffic

    def to_dict(self) -> dict:
        d = asdict(self)
        d["levels"] = list(self.levels)
        d["variants"] = list(self.variants) if self.variants is not None else None
        return d


def _positive_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _positive_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


#: `load:` key -> (check, what it must be)
_LOAD_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "levels": (
        lambda v: isinstance(v, list) and bool(v) and all(_positive_int(x) and x <= 256 for x in v),
        "a list of concurrency levels (1..256), e.g. [1, 4, 16]",
    ),
    "requests": (lambda v: _positive_int(v) and v <= 10_000, "an integer in 1..10000 (background requests per window)"),
    "duration_s": (_positive_number, "a positive number of seconds"),
    "replay": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000, "an integer in 0..10000 (cases replayed under load)"),
    "mix": (
        lambda v: (
            isinstance(v, dict) and bool(v) and set(v) <= set(TRAFFIC_KINDS) and all(_positive_number(x) or x == 0 for x in v.values()) and any(v.values())
        ),
        f"a mapping of {' / '.join(TRAFFIC_KINDS)} to weights (at least one positive)",
    ),
    "stream": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1, "a share in [0, 1] of streamed background requests"),
    "rounds": (_positive_int, "an integer of at least 1 (windows per level and variant)"),
    "timeout_s": (_positive_number, "a positive number of seconds"),
    "max_new_tokens": (_positive_int, "an integer of at least 1"),
    "variants": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of variant names"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
}


def parse_load_block(raw: object, file: str, line_of: LineOf, problems: list[Problem]) -> LoadSettings | None:
    """The suite's `load:` block as settings (None when absent); each fault becomes a Problem naming
    the file, the line and the field (`load.levels`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(Problem(file, line_of(("load",)), None, "load", f"expected a mapping (levels, requests, duration_s, replay, mix, ...), got {raw!r}"))
        return None
    n = len(problems)

    def unknown(key: str) -> str:
        return f"unknown setting{suggest(str(key), list(_LOAD_CHECKS), quote=False)} (known: {', '.join(_LOAD_CHECKS)})"

    vals: dict[str, Any] = _checked("load", raw, _LOAD_CHECKS, unknown, file=file, line_of=line_of, problems=problems)
    if len(problems) > n:
        return None
    if "levels" in vals:
        vals["levels"] = tuple(sorted(set(vals["levels"])))
    if "variants" in vals:
        vals["variants"] = tuple(vals["variants"])
    for key in ("duration_s", "stream", "timeout_s"):
        if key in vals:
            vals[key] = float(vals[key])
    if "mix" in vals:
        vals["mix"] = {k: float(v) for k, v in vals["mix"].items()}
    return LoadSettings(**vals)


_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(url: str) -> bool:
    """True for http(s) URLs on 127.0.0.0/8, ::1 or localhost."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return False
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_problem(base_url: object) -> str | None:
    """Why load may not go to `base_url` (None: a loopback URL, or none: a server evalsuite starts)."""
    if base_url is None:
        return None
    if not isinstance(base_url, str) or not is_loopback(base_url):
        return f"traffic goes only to a server on this machine (127.0.0.1, ::1, localhost); {base_url!r} is not on loopback (serve it locally or use `serve:`)"
    return None


def require_loopback(url: str, who: str) -> None:
    """Raise naming the variant when `url` is not on loopback."""
    if not is_loopback(url):
        raise EvalsuiteError(f"variant {who!r}: load traffic goes only to a server on this machine; {url!r} is not on loopback")
