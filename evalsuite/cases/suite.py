"""The suite file: which case sets, which variants (one baseline), how to generate, which rubric.

Variants inherit the baseline's backend, model, options and environment, and state what they change. A variant
that changes more than one of {quantization, speculative, backend, framework, compile, generation, batch, context, kv_cache} is allowed, with a
warning: change one variable at a time, or a regression cannot be attributed (unless the variant
declares exactly those `changes:`, on purpose).
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import EvalsuiteError, Problem, ValidationError, suggest
from ..hashing import sha256_json
from ..registry import BACKENDS
from ..shipped import Kind, resolve_ref
from ..yamlio import LineMap, load_yaml
from .caseset import Case, all_cases, load_cases
from .compile_options import CATEGORY as COMPILE
from .compile_options import compile_problems, split_compile
from .fault_options import FaultSettings, parse_faults_block
from .options import (
    STAGES,
    ContextTrim,
    ExecutorSpec,
    GenerationSettings,
    LoadSettings,
    TimingSettings,
    loopback_problem,
    parse_executor,
    parse_load_block,
    parse_timing_block,
    parse_trim_block,
)

log = logging.getLogger("evalsuite")

#: `framework`: the variant's `environment:` (library versions); `compile`: only the compile layer of the backend options
#: (evalsuite.cases.compile_options); `batch`: only `generation.batch_size`
CHANGE_CATEGORIES = ("quantization", "speculative", "backend", "framework", "compile", "generation", "batch", "context", "kv_cache")
#: backends that take a variant's `kv_cache:` (vLLM takes `quantization: {kv_cache_dtype: fp8}` instead)
KV_CACHE_BACKENDS = ("transformers", "fake")
#: backends that run in a variant's own environment (`environment:`; evalsuite.backends.envs)
ENVIRONMENT_BACKENDS = ("transformers",)
_VARIANT_KEYS = {
    "name",
    "baseline",
    "noise",
    "backend",
    "model",
    "revision",
    "options",
    "quantization",
    "speculative",
    "kv_cache",
    "generation",
    "changes",
    "description",
    "degrade",
    "trim",
    "environment",
}
_SUITE_KEYS = {
    "schema_version",
    "name",
    "description",
    "casesets",
    "variants",
    "generation",
    "rubric",
    "stage",
    "output_dir",
    "cache",
    "limit",
    "timing",
    "executor",
    "faults",
    "load",
}
_GEN_KEYS = set(GenerationSettings.__dataclass_fields__)


@dataclass(frozen=True)
class Variant:
    """A model configuration to compare with the baseline."""

    name: str
    backend: str = "fake"
    model: str | None = None  #: model directory, hub id, or "embedded" for the default model
    revision: str | None = None  #: the hub revision (branch, tag or commit) of a hub-id `model`
    options: dict = field(default_factory=dict)  #: backend options (device, dtype, scripted outputs...)
    quantization: dict | None = None  #: e.g. {method: bnb, bits: 4, quant_type: nf4}
    speculative: dict | None = None  #: e.g. {method: prompt_lookup, num_tokens: 10}
    kv_cache: dict | None = None  #: e.g. {implementation: quantized, backend: hqq, nbits: 4} (docs/long-context.md)
    generation: GenerationSettings = field(default_factory=GenerationSettings)  #: effective settings
    baseline: bool = False
    noise: bool = False  #: a rerun of the baseline, used as the noise floor
    degrade: dict | None = None  #: planted regression applied to the outputs (see evalsuite.run.degrade)
    description: str = ""
    changes: tuple[str, ...] = ()  #: categories changed against the baseline (computed)
    trim: ContextTrim | None = None  #: context trimming applied by the prompt builder (`trim:`; None: every document)
    #: the environment it runs in: {requirements: [...]} (built once, evalsuite.backends.envs) or
    #: {python: PATH}; None: evalsuite's own
    environment: dict | None = None

    def spec(self) -> dict:
        """Everything about the variant that can change an output (its name cannot). A hub
        `revision` is not here: the backend's weights identity holds the commit it resolved to, so
        `main` and that commit's hash are the same variant, and a moved `main` is a new one."""
        gen = self.generation
        spec = {
            "backend": self.backend,
            "model": self.model,
            "options": self.options,
            "quantization": self.quantization,
            "speculative": self.speculative,
            "degrade": self.degrade,
            # batch composition changes padded outputs on real models, so it is part of identity
            "batch_size": gen.batch_size,
            # only when set: a variant without trimming keeps the fingerprint it always had
            **({"trim": self.trim.to_dict()} if self.trim else {}),
        }
        if self.kv_cache:  # only when set: every fingerprint made before the field existed stays valid
            spec["kv_cache"] = self.kv_cache
        if self.environment:  # the same: a variant in evalsuite's own environment keeps its fingerprint
            spec["environment"] = self.environment
        return spec

    def fingerprint(self, weights_identity: object = None) -> str:
        """Hash of the spec plus the backend's weights identity (file hashes, revision...)."""
        return sha256_json({"spec": self.spec(), "weights": weights_identity})

    def to_dict(self) -> dict:
        d = {
            "name": self.name,
            "baseline": self.baseline,
            "noise": self.noise,
            "backend": self.backend,
            "model": self.model,
            "revision": self.revision,
            "options": self.options,
            "quantization": self.quantization,
            "speculative": self.speculative,
            "generation": self.generation.to_dict(),
            "changes": list(self.changes),
        }
        if self.kv_cache:
            d["kv_cache"] = self.kv_cache
        if self.degrade:
            d["degrade"] = self.degrade
        if self.trim:
            d["trim"] = self.trim.to_dict()
        if self.environment:
            d["environment"] = self.environment
        if self.description:
            d["description"] = self.description
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Variant:
        """The variant a resolved suite's block describes (`to_dict`'s output, as a run saved it):
        the variant as it ran, without the suite file (a recheck runs it again from its run)."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if isinstance(known.get("generation"), dict):
            known["generation"] = GenerationSettings(**known["generation"])
        if isinstance(known.get("trim"), dict):
            known["trim"] = ContextTrim(**known["trim"])
        known["changes"] = tuple(known.get("changes") or ())
        known["options"] = dict(known.get("options") or {})
        return cls(**known)


@dataclass(frozen=True)
class CaseSelector:
    """A case-set path or glob with optional filters."""

    path: str
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()

    def accepts(self, case: Case) -> bool:
        if self.tags and not set(self.tags) & set(case.tags):
            return False
        if self.exclude_tags and set(self.exclude_tags) & set(case.tags):
            return False
        if self.kinds and case.kind not in self.kinds:
            return False
        if self.scenarios and case.scenario not in self.scenarios:
            return False
        if self.ids and case.id not in self.ids:
            return False
        return True


@dataclass(frozen=True, eq=False)
class Suite:
    """A resolved suite file."""

    name: str
    path: str
    casesets: tuple[CaseSelector, ...]
    variants: tuple[Variant, ...]
    generation: GenerationSettings
    rubric: str | None
    stage: str | None  #: the suite's `stage:` (None: commands use the documented default)
    output_dir: str
    cache: str | None
    raw: dict
    warnings: tuple[str, ...] = ()
    executor: ExecutorSpec | None = None  #: where generation runs (None: local)
    timing: TimingSettings | None = None  #: interleaved timing of the variants (`timing:`; None: sequential)
    faults: FaultSettings | None = None  #: fault probes of the served variants (`faults:`; None: none)
    load: LoadSettings | None = None  #: served variants under load (`load:`; evalsuite.run.load)

    def loaded_variants(self) -> list[Variant]:
        """The served variants the `load:` block puts under load (none without one)."""
        if self.load is None:
            return []
        names = self.load.variants
        return [v for v in self.variants if (v.name in names if names is not None else v.backend == "http")]

    @property
    def baseline(self) -> Variant:
        return next(v for v in self.variants if v.baseline)

    def variant(self, name: str) -> Variant:
        from ..errors import UnknownNameError

        for v in self.variants:
            if v.name == name:
                return v
        raise UnknownNameError("variant", name, [v.name for v in self.variants])

    def load_cases(self, *, problems: list[Problem] | None = None) -> list[Case]:
        """The selected cases, in file order; ids are unique across the suite. With `problems` (what
        `evalsuite validate` and `run` check first), a case-set path that does not exist, a case set
        that does not load and a selector that selects nothing are added there, at the suite file's
        line, and the selector is skipped; without, a case set that does not load raises."""
        selected: dict[str, Case] = {}
        at = _SuiteLines(self.path)
        for i, sel in enumerate(self.casesets):
            if problems is not None and not glob.glob(sel.path) and not Path(sel.path).exists():
                problems.append(at(("casesets", i, "path"), "path", f"no such case-set file or directory: {sel.path}"))
                continue
            try:
                found = all_cases(load_cases([sel.path]))
            except ValidationError as exc:
                if problems is None:
                    raise
                problems += exc.problems
                continue
            picked = [c for c in found if sel.accepts(c)]
            if not picked and problems is not None:
                problems.append(at(("casesets", i), "casesets", _why_empty(sel, found)))
            for c in picked:
                selected.setdefault(c.id, c)
        return list(selected.values())

    def resolved(self) -> dict:
        """The suite as it will run, every default filled in: saved beside each run."""
        return {
            "schema_version": 1,
            "name": self.name,
            "path": str(Path(self.path).resolve()),
            "casesets": [s.__dict__ | {k: list(v) for k, v in s.__dict__.items() if isinstance(v, tuple)} for s in self.casesets],
            "generation": self.generation.to_dict(),
            "rubric": self.rubric,
            "stage": self.stage,
            "output_dir": self.output_dir,
            "cache": self.cache,
            "variants": [v.to_dict() for v in self.variants],
            "warnings": list(self.warnings),
            "executor": self.executor.to_dict() if self.executor else {"kind": "local"},
            **({"faults": self.faults.to_dict()} if self.faults else {}),
        }


class _SuiteLines:
    """Problems at a suite file's lines (the file read at the first one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: LineMap | None = None

    def __call__(self, where: tuple, fld: str, msg: str) -> Problem:
        if self.lines is None:
            self.lines = load_yaml(self.path)[1]
        line = self.lines.line_of(where) or self.lines.line_of(where[:-1])
        return Problem(file=self.path, line=line, case_id=None, field=fld, message=msg)


def _why_empty(sel: CaseSelector, found: list[Case]) -> str:
    """Why a selector selects no case: its tags and ids that no case has, with close matches."""
    tags = sorted({t for c in found for t in c.tags})
    ids = [c.id for c in found]
    parts = [f"selects no case of {len(found)} in {sel.path}"]
    parts += [f"tag {t!r} is on no case{suggest(t, tags)}" for t in sel.tags if t not in tags]
    parts += [f"id {x!r} is no case{suggest(x, ids)}" for x in sel.ids if x not in ids]
    return "; ".join(parts)


def _selector_fields(saved: dict) -> dict[str, Any]:
    """A case selector's fields as a resolved suite saved them (lists back to tuples)."""
    return {str(k): tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in CaseSelector.__dataclass_fields__}


def suite_from_resolved(resolved: dict) -> Suite:
    """The suite a run's resolved suite (suite.json) describes, as it ran: its variants, generation
    settings, rubric, stage and folders, without reading the suite file again (it may have changed
    since). Timing, fault probes and load are left out: a rerun from it judges outputs (`evalsuite recheck`)."""
    selectors = tuple(CaseSelector(**_selector_fields(sel)) for sel in resolved.get("casesets") or [])
    try:
        variants = tuple(Variant.from_dict(v) for v in resolved.get("variants") or [])
        generation = GenerationSettings(**(resolved.get("generation") or {}))
    except TypeError as exc:
        raise EvalsuiteError(f"suite {resolved.get('name')!r} as its run saved it cannot be read: {exc}") from None
    if sum(v.baseline for v in variants) != 1:
        raise EvalsuiteError(f"suite {resolved.get('name')!r} as its run saved it has no single baseline variant")
    return Suite(
        name=str(resolved.get("name") or "suite"),
        path=str(resolved.get("path") or ""),
        casesets=selectors,
        variants=variants,
        generation=generation,
        rubric=resolved.get("rubric"),
        stage=resolved.get("stage"),
        output_dir=str(resolved.get("output_dir") or "reports"),
        cache=resolved.get("cache"),
        raw=dict(resolved),
        warnings=tuple(resolved.get("warnings") or ()),
    )


def _variant_problem(file: str, line: int | None, variant: str | None, field: str, message: str) -> Problem:
    """A problem of one variant (`file:line: variant b: field: message`), not of a case."""
    return Problem(file, line, variant, field, message, subject="variant")


def _variant_problem_at(file: str, lines: LineMap, i: int, variant: str, key: str, message: str) -> Problem:
    """A problem of field `key` of the suite's i-th variant."""
    return _variant_problem(file, lines.line_of(("variants", i, key)), variant, f"variants[{i}].{key}", message)


def _gen_settings(
    raw: object, base: GenerationSettings, file: str, lines: LineMap, path: tuple, problems: list[Problem], who: str | None
) -> GenerationSettings:
    if raw is None:
        return base
    if not isinstance(raw, dict):
        problems.append(_variant_problem(file, lines.line_of(path), who, ".".join(map(str, path)), "expected a mapping"))
        return base
    unknown = set(raw) - _GEN_KEYS
    for k in sorted(unknown, key=repr):
        problems.append(_variant_problem(file, lines.line_of(path + (k,)), who, f"generation.{k}", f"unknown setting (known: {', '.join(sorted(_GEN_KEYS))})"))
    values = {k: v for k, v in raw.items() if k in _GEN_KEYS}
    types: dict[str, type | tuple[type, ...]] = {
        "max_new_tokens": int,
        "samples": int,
        "seed": int,
        "batch_size": int,
        "temperature": (int, float),
        "top_p": (int, float),
        "timeout_s": (int, float, type(None)),
    }
    for k, v in list(values.items()):
        if not isinstance(v, types[k]) or isinstance(v, bool):
            problems.append(_variant_problem(file, lines.line_of(path + (k,)), who, f"generation.{k}", f"expected a number, got {v!r}"))
            del values[k]
        elif k in ("max_new_tokens", "samples", "batch_size") and isinstance(v, int) and v < 1:
            problems.append(_variant_problem(file, lines.line_of(path + (k,)), who, f"generation.{k}", "must be at least 1"))
            del values[k]
    return replace(base, **values)


def _resolve_paths(d: Any, keys: tuple[str, ...], rel, models: tuple[str, ...] = ()) -> Any:
    """Paths inside a variant's settings are relative to the suite file; `models` keys may also
    name a hub model (`org/name`), kept as it is (see `model_ref`)."""
    if not isinstance(d, dict):
        return d
    out = dict(d)
    for k in keys:
        v = out.get(k)
        if k not in out:
            continue
        if k in models:
            out[k] = model_ref(v, rel)
        elif isinstance(v, str) and v and not v.startswith(("~", "embedded")) and ("/" in v or Path(rel(v)).exists()):
            out[k] = rel(v)
    return out


def model_ref(v: Any, rel) -> Any:
    """A model named in a suite: "embedded", an absolute or `~` path (as is), `./x` or `../x` or an
    existing path beside the suite file (made relative to it), else as written: a hub id, or a path
    relative to the working directory (evalsuite.models.hub decides when it resolves)."""
    if not isinstance(v, str) or not v or v == "embedded" or v.startswith("~") or Path(v).is_absolute():
        return v
    if v.startswith(("./", "../")) or Path(rel(v)).exists():
        return rel(v)
    return v


def compute_changes(variant: Variant, baseline: Variant) -> tuple[str, ...]:
    """Which categories a variant changes against the baseline."""
    changed = []
    if (variant.quantization or None) != (baseline.quantization or None):
        changed.append("quantization")
    if (variant.speculative or None) != (baseline.speculative or None):
        changed.append("speculative")
    (options, layer), (base_options, base_layer) = split_compile(variant.options), split_compile(baseline.options)
    if (variant.backend, variant.model, variant.revision, options) != (baseline.backend, baseline.model, baseline.revision, base_options):
        changed.append("backend")
    if (variant.environment or None) != (baseline.environment or None):
        changed.append("framework")
    # another backend's compile options are part of that backend's configuration (vLLM's
    # `enforce_eager: true` against transformers is not a compile change): compared within one backend
    if layer != base_layer and variant.backend == baseline.backend:
        changed.append(COMPILE)
    if variant.generation.request_part() != baseline.generation.request_part():
        changed.append("generation")
    if variant.generation.batch_size != baseline.generation.batch_size:
        changed.append("batch")
    if variant.trim != baseline.trim:
        changed.append("context")
    if (variant.kv_cache or None) != (baseline.kv_cache or None):
        changed.append("kv_cache")
    return tuple(changed)


def _strings(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(i, str) for i in x)


def _parse_casesets(raw_sets: object, file: str, lines: LineMap, rel: Callable[[str], str], problems: list[Problem]) -> list[CaseSelector]:
    """The suite's `casesets:` entries (paths or mappings with `path` and filters) as selectors."""
    selectors: list[CaseSelector] = []
    if not raw_sets or not isinstance(raw_sets, list):
        problems.append(Problem(file, lines.line_of(("casesets",)), None, "casesets", "list at least one case-set path or glob"))
        return selectors
    for i, item in enumerate(raw_sets):
        if isinstance(item, str):
            selectors.append(CaseSelector(rel(item)))
        elif isinstance(item, dict) and "path" in item:
            extra = set(item) - {"path", "tags", "exclude_tags", "kinds", "scenarios", "ids"}
            for k in sorted(extra, key=repr):
                problems.append(Problem(file, lines.line_of(("casesets", i, k)), None, f"casesets[{i}].{k}", "unknown field"))
            bad = [k for k in ("tags", "exclude_tags", "kinds", "scenarios", "ids") if not _strings(item.get(k, []))]
            bad += [] if isinstance(item["path"], str) else ["path"]
            for k in bad:
                problems.append(
                    Problem(
                        file,
                        lines.line_of(("casesets", i, k)),
                        None,
                        f"casesets[{i}].{k}",
                        "expected a path (a string)" if k == "path" else "expected a list of strings",
                    )
                )
            if bad:
                continue
            selectors.append(
                CaseSelector(
                    rel(item["path"]),
                    tuple(item.get("tags", ())),
                    tuple(item.get("exclude_tags", ())),
                    tuple(item.get("kinds", ())),
                    tuple(item.get("scenarios", ())),
                    tuple(item.get("ids", ())),
                )
            )
        else:
            problems.append(Problem(file, lines.line_of(("casesets", i)), None, f"casesets[{i}]", "expected a path or a mapping with `path`"))

    return selectors


def _parse_variants(
    raw_variants: list, generation: GenerationSettings, file: str, lines: LineMap, rel: Callable[[str], str], problems: list[Problem]
) -> list[Variant]:
    """The suite's variants, each inheriting the baseline's backend, model, options and generation."""
    baselines = [i for i, v in enumerate(raw_variants) if isinstance(v, dict) and v.get("baseline") is True]
    if raw_variants and len(baselines) != 1:
        problems.append(
            Problem(file, lines.line_of(("variants",)), None, "variants", f"exactly one variant must have `baseline: true` (found {len(baselines)})")
        )
    base_raw = raw_variants[baselines[0]] if len(baselines) == 1 else {}

    variants: list[Variant] = []
    names: set[str] = set()
    for i, rv in enumerate(raw_variants):
        if not isinstance(rv, dict) or not isinstance(rv.get("name"), str):
            problems.append(Problem(file, lines.line_of(("variants", i)), None, f"variants[{i}].name", "each variant needs a name"))
            continue
        name = rv["name"]
        for k in sorted(set(rv) - _VARIANT_KEYS, key=repr):
            problems.append(_variant_problem_at(file, lines, i, name, k, f"unknown field (known: {', '.join(sorted(_VARIANT_KEYS))})"))
        if name in names:
            problems.append(_variant_problem_at(file, lines, i, name, "name", "duplicate variant name"))
        names.add(name)
        inherit = lambda k, default=None, rv=rv: rv.get(k, base_raw.get(k, default))  # noqa: E731
        for k in ("options", "quantization", "speculative", "kv_cache", "degrade"):
            if rv.get(k) is not None and not isinstance(rv.get(k), dict):
                problems.append(_variant_problem_at(file, lines, i, name, k, "expected a mapping"))
        if not isinstance(inherit("backend", "fake"), str):
            problems.append(_variant_problem_at(file, lines, i, name, "backend", "expected a backend name"))
        if rv.get("changes") is not None and not isinstance(rv["changes"], str) and not _strings(rv["changes"]):
            problems.append(_variant_problem_at(file, lines, i, name, "changes", "expected a category name or a list of them"))
        gen = _gen_settings(base_raw.get("generation"), generation, file, lines, ("variants", baselines[0] if baselines else 0, "generation"), [], name)
        gen = _gen_settings(rv.get("generation"), gen, file, lines, ("variants", i, "generation"), problems, name)
        model = inherit("model")
        revision = rv.get("revision") if "model" in rv else inherit("revision")  # a variant's own model does not take the baseline's revision
        quant = _resolve_paths(rv.get("quantization"), ("calibration", "checkpoint"), rel, models=("checkpoint",))
        spec = _resolve_paths(rv.get("speculative"), ("model",), rel, models=("model",))
        if isinstance(spec, dict) and isinstance(spec.get("draft"), dict):
            spec = dict(spec, draft=_resolve_paths(spec["draft"], ("model",), rel, models=("model",)))
        trim = parse_trim_block(rv.get("trim"), file, lines.line_of, problems, ("variants", i, "trim"), name)
        if revision is not None and not isinstance(revision, str):
            problems.append(_variant_problem_at(file, lines, i, name, "revision", "expected a branch, tag or commit (a string)"))
        env_at = ("variants", i if "environment" in rv else (baselines or [i])[0], "environment")  # one inherited is reported once, at the baseline
        environment = parse_environment(inherit("environment"), file, lines, env_at, name, problems if "environment" in rv else [], rel)
        variants.append(
            Variant(
                name=name,
                backend=inherit("backend", "fake"),
                model=model_ref(model, rel),
                revision=revision if isinstance(revision, str) else None,
                options=dict(inherit("options", {})) if isinstance(inherit("options", {}), dict) else {},
                quantization=quant,
                speculative=spec,
                kv_cache=rv.get("kv_cache") if isinstance(rv.get("kv_cache"), dict) else None,
                generation=gen,
                baseline=rv.get("baseline") is True,
                noise=rv.get("noise") is True,
                degrade=rv.get("degrade"),
                description=rv.get("description", ""),
                trim=trim,
                environment=environment,
            )
        )
    return variants


def parse_environment(raw: object, file: str, lines: LineMap, path: tuple, who: str, problems: list[Problem], rel: Callable[[str], str]) -> dict | None:
    """A variant's `environment:`: `{requirements: [pip requirement, ...]}` (an environment evalsuite
    builds) or `{python: PATH}` (an interpreter that exists; relative to the suite file), or None."""
    if raw is None:
        return None
    where = ".".join(map(str, path[2:]))
    field_name = f"variants[{path[1]}].{where}"

    def bad(key: tuple, message: str) -> None:
        problems.append(_variant_problem(file, lines.line_of(path + key) or lines.line_of(path), who, field_name + "".join(f".{k}" for k in key), message))

    if not isinstance(raw, dict):
        bad((), "expected a mapping: {requirements: [...]} or {python: PATH}")
        return None
    for k in sorted(set(raw) - {"requirements", "python"}, key=repr):
        bad((k,), "unknown field (known: python, requirements)")
    if ("requirements" in raw) == ("python" in raw):
        bad((), "give exactly one of `requirements` (an environment evalsuite builds) and `python` (an existing interpreter)")
        return None
    if "python" in raw:
        if not isinstance(raw["python"], str) or not raw["python"].strip():
            bad(("python",), "expected the path of a Python interpreter")
            return None
        python = raw["python"]
        return {"python": python if python.startswith("~") or Path(python).is_absolute() else rel(python)}
    reqs = raw["requirements"]
    if not _strings(reqs) or not reqs:
        bad(("requirements",), 'expected a list of pip requirements, e.g. ["transformers==5.25.0"]')
        return None
    ok = True
    for j, req in enumerate(reqs):
        why = requirement_problem(req)
        if why:
            bad(("requirements", j), f"{req!r}: {why}")
            ok = False
    return {"requirements": [r.strip() for r in reqs]} if ok else None


def requirement_problem(req: str) -> str | None:
    """Why `req` is not a pip requirement (a name with an optional version), or None."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # pragma: no cover - packaging comes with pip and setuptools
        return None if req.strip() and not req.strip().startswith("-") else "not a requirement"
    if req.strip().startswith("-"):
        return "pip options are not requirements"
    try:
        Requirement(req)
    except InvalidRequirement as exc:
        return f"not a pip requirement ({str(exc).splitlines()[0]})"
    return None


def _check_backends(variants: list[Variant], file: str, lines: LineMap, problems: list[Problem]) -> None:
    """An unknown backend name is a problem, with the close matches; so is a `kv_cache:` or an
    `environment:` on a backend that does not take one, and a compile-layer option its backend
    does not take or would refuse."""
    for i, v in enumerate(variants):
        for fld, message in compile_problems(v.backend, v.options, v.kv_cache, v.name) if isinstance(v.backend, str) else []:
            line = lines.line_of(("variants", i, *fld.split("."))) or lines.line_of(("variants", i, "options")) or lines.line_of(("variants", i))
            problems.append(_variant_problem(file, line, v.name, f"variants[{i}].{fld}", message))
        # fields only some backends take: (value, field, those backends, what a vLLM variant uses instead)
        for value, fld, takers, vllm_way in (
            (v.environment, "environment", ENVIRONMENT_BACKENDS, "vLLM runs in its own environment already: `make vllm`, docs/serving.md"),
            (v.kv_cache, "kv_cache", KV_CACHE_BACKENDS, "vLLM's KV-cache dtype is `quantization: {kv_cache_dtype: fp8}`"),
        ):
            if value and v.backend not in takers:
                hint = f" ({vllm_way})" if v.backend == "vllm" else ""
                message = f"the {v.backend} backend does not take `{fld}`{hint}; backends that do: {', '.join(takers)}"
                problems.append(_variant_problem_at(file, lines, i, v.name, fld, message))
        if isinstance(v.backend, str) and v.backend not in BACKENDS:
            hint = suggest(v.backend, BACKENDS.names(), n=2, quote=False)
            problems.append(
                _variant_problem(
                    file,
                    lines.line_of(("variants", i, "backend")),
                    v.name,
                    "backend",
                    f"unknown backend {v.backend!r}{hint}; available: {', '.join(BACKENDS.names())}",
                )
            )


def _parse_load(raw: object, raw_variants: list, variants: list[Variant], file: str, lines: LineMap, problems: list[Problem]) -> LoadSettings | None:
    """The suite's `load:` block, with the variants it puts under load checked."""
    load = parse_load_block(raw, file, lines.line_of, problems)
    if load is not None:
        _check_load_targets(load, raw_variants, variants, file, lines, problems)
    return load


def _check_load_targets(load: LoadSettings, raw_variants: list, variants: list[Variant], file: str, lines: LineMap, problems: list[Problem]) -> None:
    """`load.variants` name served variants, and load goes only to a loopback server: a variant's
    `base_url` on another host is refused (the load would hit a service others use)."""
    by_name = {v.name: (i, v) for i, v in enumerate(variants)}
    for name in load.variants or ():
        if name not in by_name:
            problems.append(Problem(file, lines.line_of(("load", "variants")), None, "load.variants", f"unknown variant {name!r}{suggest(name, by_name)}"))
        elif by_name[name][1].backend != "http":
            problems.append(Problem(file, lines.line_of(("load", "variants")), None, "load.variants", f"variant {name!r} is not served (`backend: http`)"))
    for v in variants:
        if v.backend != "http" or (load.variants is not None and v.name not in load.variants):
            continue
        why = loopback_problem((v.options or {}).get("base_url"))
        if why:
            i = next(j for j, rv in enumerate(raw_variants) if isinstance(rv, dict) and rv.get("name") == v.name)
            line = lines.line_of(("variants", i, "options", "base_url")) or lines.line_of(("variants", i))
            problems.append(_variant_problem(file, line, v.name, "options.base_url", f"load: {why}"))


def _resolve_changes(variants: list[Variant], raw_variants: list) -> tuple[list[Variant], list[str]]:
    """Each variant with what it changes against the baseline, and the warnings of the
    one-variable-at-a-time principle."""
    warnings: list[str] = []
    baseline = next(v for v in variants if v.baseline)
    resolved_variants = []
    for v in variants:
        changes = () if v.baseline else compute_changes(v, baseline)
        declared = next((rv.get("changes") for rv in raw_variants if rv.get("name") == v.name), None)
        declared_set = None if declared is None else set([declared] if isinstance(declared, str) else declared)
        # a variant that declares exactly what it changes has been made so on purpose: say it once, quietly
        if len(changes) > 1 and declared_set != set(changes):
            warnings.append(
                f"variant {v.name!r} changes {', '.join(changes)} against the baseline: change one variable at a time, or a regression cannot be attributed "
                f"(declare `changes: [{', '.join(changes)}]` if that is intended)"
            )
        elif len(changes) > 1:
            log.info("variant %r changes %s against the baseline, as declared", v.name, ", ".join(changes))
        if declared_set is not None and declared_set != set(changes):
            warnings.append(f"variant {v.name!r} declares changes {declared!r} but changes {list(changes)!r}")
        if not v.baseline and not changes and not v.noise and not v.degrade:
            warnings.append(f"variant {v.name!r} changes nothing against the baseline (mark it `noise: true` if it is a rerun)")
        resolved_variants.append(replace(v, changes=changes))
    return resolved_variants, warnings


def is_suite_file(path: str | Path) -> bool:
    """A YAML file whose top level lists `variants:` (a suite), not a case set."""
    p = Path(path)
    if not p.is_file() or p.suffix not in (".yaml", ".yml"):
        return False
    try:
        import yaml

        data = yaml.safe_load(p.read_text("utf-8"))
    except Exception:  # noqa: BLE001 - an unreadable file is the case-set loader's to report
        return False
    return isinstance(data, dict) and "variants" in data and "cases" not in data


def load_suite(path: str | Path) -> Suite:
    """Load and validate a suite file; raise ValidationError naming every problem."""
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise ValidationError([Problem(file, None, None, "path", "suite file not found")])
    data, lines = load_yaml(path)
    problems: list[Problem] = []
    if not isinstance(data, dict):
        raise ValidationError([Problem(file, 1, None, "(top level)", "expected a mapping")])
    _check_top_level(data, file, lines, problems)
    base_dir = path.parent

    def rel(p: str, kind: Kind = "caseset") -> str:
        """A path of the suite: relative to its folder, or `shipped:NAME` (evalsuite.shipped)."""
        try:
            return resolve_ref(p, base_dir, kind)
        except EvalsuiteError as exc:
            problems.append(Problem(file, None, None, kind, str(exc)))
            return p

    selectors = _parse_casesets(data.get("casesets"), file, lines, rel, problems)
    generation = _gen_settings(data.get("generation"), GenerationSettings(), file, lines, ("generation",), problems, None)
    raw_variants = data.get("variants")
    if not isinstance(raw_variants, list) or not raw_variants:
        problems.append(Problem(file, lines.line_of(("variants",)), None, "variants", "list the variants, exactly one with `baseline: true`"))
        raw_variants = []
    variants = _parse_variants(raw_variants, generation, file, lines, rel, problems)
    _check_backends(variants, file, lines, problems)

    executor = parse_executor(data.get("executor"), file, lines.line_of, problems)
    timing = parse_timing_block(data.get("timing"), file, lines.line_of, problems)
    faults = _check_fault_variants(parse_faults_block(data.get("faults"), file, lines.line_of, problems), variants, file, lines, problems)
    load = _parse_load(data.get("load"), raw_variants, variants, file, lines, problems)
    stage = data.get("stage")  # None: the one default of evalsuite.verdict.rubric.resolve_stage
    if isinstance(stage, str) and stage not in STAGES:
        problems.append(Problem(file, lines.line_of(("stage",)), None, "stage", f"unknown stage {stage!r}; known: {', '.join(STAGES)}"))
    if problems:
        raise ValidationError(problems)

    resolved_variants, warnings = _resolve_changes(variants, raw_variants)
    for w in warnings:
        log.warning(w)

    return Suite(
        name=data.get("name", path.stem),
        path=file,
        casesets=tuple(selectors),
        variants=tuple(resolved_variants),
        generation=generation,
        rubric=rel(data["rubric"], "rubric") if data.get("rubric") else None,
        stage=stage,
        output_dir=rel(data.get("output_dir", "../reports")) if data.get("output_dir") else str(Path("reports")),
        cache=rel(data["cache"]) if data.get("cache") else None,
        raw=data,
        warnings=tuple(warnings),
        executor=executor,
        timing=timing,
        faults=faults,
        load=load,
    )


def _check_top_level(data: dict, file: str, lines: LineMap, problems: list[Problem]) -> None:
    """Unknown top-level fields, and the string ones that are not strings."""
    for k in sorted(set(data) - _SUITE_KEYS, key=repr):  # YAML keys may be of any type
        problems.append(Problem(file, lines.line_of((k,)), None, str(k) or "''", f"unknown field (known: {', '.join(sorted(_SUITE_KEYS))})"))
    for k in ("name", "description", "rubric", "stage", "output_dir", "cache"):
        if data.get(k) is not None and not isinstance(data[k], str):
            problems.append(Problem(file, lines.line_of((k,)), None, k, f"expected a string, got {data[k]!r}"))


def _check_fault_variants(faults: FaultSettings | None, variants: list[Variant], file: str, lines: LineMap, problems: list[Problem]) -> FaultSettings | None:
    """`faults`, once its `variants` are checked: variants of the suite, each served by a server evalsuite starts."""
    if faults is None or faults.variants is None:
        return faults
    by_name = {v.name: v for v in variants}
    for name in faults.variants:
        v = by_name.get(name)
        if v is None:
            problems.append(
                Problem(file, lines.line_of(("faults", "variants")), None, "faults.variants", f"unknown variant {name!r}{suggest(name, list(by_name))}")
            )
        elif not (v.backend == "http" and isinstance(v.options.get("serve"), dict)):
            problems.append(
                Problem(
                    file,
                    lines.line_of(("faults", "variants")),
                    name,
                    "faults.variants",
                    "fault probes need a served variant (backend: http with a `serve` launcher)",
                )
            )
    return faults
