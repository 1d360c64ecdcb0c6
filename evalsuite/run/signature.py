"""A run's signature (signature.json): what was run, with what, where: the suite's cases and
generation settings, each variant's fingerprint, weights and engine, the libraries and the hardware,
and for a run with code cases the sandbox's isolation (its mode and seccomp filter)."""

from __future__ import annotations

import functools
import logging
import platform
import sys
from collections.abc import Sequence
from importlib import metadata

from .. import __version__
from ..backends.base import Backend
from ..cases.caseset import Case, suite_digest
from ..cases.suite import Suite
from ..hashing import sha256_json
from ..models.describe import weights_summary
from .prompting import PROMPT_VERSION

log = logging.getLogger("evalsuite")

_LIBRARIES = ("numpy", "torch", "transformers", "accelerate", "bitsandbytes", "gptqmodel", "jsonschema", "sacrebleu", "scipy", "statsmodels", "vllm")


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # reading package metadata costs tens of milliseconds; installed versions do not change in a process
    out = []
    for name in _LIBRARIES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            pass
    return tuple(out)


def library_versions() -> dict:
    """Python's and the installed libraries' versions, for the run's signature."""
    return {"python": platform.python_version(), **dict(_installed_versions())}


def hardware() -> dict:
    info = {"platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(), "cpus": _cpu_count()}
    if "torch" in sys.modules:  # only report CUDA if a backend already imported torch
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_signature(
    suite: Suite,
    cases: Sequence[Case],
    fingerprints: dict[str, str],
    weights: dict[str, dict] | None = None,
    engines: dict[str, dict] | None = None,
    environments: dict[str, dict | None] | None = None,
) -> dict:
    sets: dict[str, list[str]] = {}
    for c in cases:
        sets.setdefault(c.source, []).append(c.digest())
    signature = {
        "schema_version": 1,
        "evalsuite": __version__,
        "suite": suite.name,
        "case_digest": suite_digest(cases),
        "cases": len(cases),
        "casesets": {src: sha256_json(d) for src, d in sorted(sets.items())},
        "prompt_version": PROMPT_VERSION,
        "generation": suite.generation.to_dict(),
        "variants": fingerprints,
        "weights": weights or {},  #: per variant: hub commits and libraries of its weights (evalsuite.models.describe)
        "engines": engines or {},  #: per variant: its engine, version and settings (evalsuite.models.engines)
        "environments": environments or {},  #: per variant: where its outputs were computed (Backend.environment; None: unknown)
        "baseline": suite.baseline.name,
        "libraries": library_versions(),
        "hardware": hardware(),
    }
    if any(runs_in_sandbox(c) for c in cases):
        # the sandbox's mode, seccomp filter (denied calls, digest, libseccomp version) and warnings;
        # imported here: only a run with code cases needs the sandbox, which probes the machine once
        from ..sandbox import isolation_summary

        signature["sandbox"] = isolation_summary()
    return signature


def runs_in_sandbox(case: Case) -> bool:
    """Whether the code scorers run this case's answers (or tests) in the sandbox: a code case with unit tests."""
    return case.scenario == "code" and bool(case.expect.tests)


def weights_of(backends: dict[str, Backend]) -> dict[str, dict]:
    """Per variant, what its backend knows of its weights' origin (the variant matrix's commits and
    library versions); variants whose backend has no weights identity (a server, the fake) are left out."""
    out = {}
    for name, be in backends.items():
        identity = be.weights_identity()
        if identity is not None and (summary := weights_summary(identity)):
            out[name] = summary
    return out


def engine_identities(backends: dict[str, Backend]) -> dict[str, dict]:
    """Per variant, what its backend reports of its engine (name, version, device, settings: the
    report's engine column); a backend whose `engine_identity` is None is described from its spec alone."""
    out = {}
    for name, be in backends.items():
        try:
            identity = be.engine_identity()
        except Exception as exc:  # noqa: BLE001 - a description, never a reason to stop the run
            log.debug("variant %s: no engine identity (%s)", name, exc)
            continue
        if identity is not None:
            out[name] = identity
    return out


def environments_of(backends: dict[str, Backend]) -> dict[str, dict | None]:
    """Per variant, the environment its outputs are computed in (`Backend.environment`: libraries,
    python, device, driver), what a clearance is checked against later (`evalsuite releases`); a
    backend that cannot say is recorded as None (unknown), never a reason to stop the run."""
    out: dict[str, dict | None] = {}
    for name, be in backends.items():
        try:
            out[name] = be.environment()
        except Exception as exc:  # noqa: BLE001 - a description, never a reason to stop the run
            log.warning("variant %s: its environment is not known (%s); it is recorded as unknown", name, exc)
            out[name] = None
    return out
