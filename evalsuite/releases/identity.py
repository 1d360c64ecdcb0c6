"""A variant's identity for the release ledger: its fingerprint and the content hashes of the files it
deploys (model directory or GGUF file, quantized checkpoint, draft model).

Recorded with every decision, and checked again before a rollback: the variant production falls back
to must still be the files it was cleared with. Where a variant has no local files (the fake
backend, a remote server), its identity is its fingerprint alone.

`model_path` is the one place that asks evalsuite.models where a named model lives: a local
directory, the embedded model (without converting it), or a hub id at the revision the suite pins
(through the local hub cache, offline-aware: a rollback target that is no longer cached is named).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import models
from ..errors import EvalsuiteError

#: backends that load a model's files themselves (http does when it starts the server: `options.serve`)
WEIGHT_BACKENDS = ("transformers", "vllm")


def model_path(ref: str, cache_dir: str | os.PathLike | None = None, revision: str | None = None) -> Path:
    """The local directory of a model named in a suite (never converts or downloads anything)."""
    if ref in ("", models.EMBEDDED):
        path = models.embedded_model_dir(cache_dir)
        if not (path / "config.json").is_file():
            raise EvalsuiteError(f"the embedded model is not converted here ({path}); `evalsuite demo` or a run converts it")
        return path
    return models.resolve_model_dir(ref, cache_dir, revision=revision)


def artefact_refs(variant: Mapping[str, Any]) -> dict[str, str]:
    """role -> model reference: the files a variant (a block of the resolved suite) deploys."""
    backend = variant.get("backend") or "fake"
    serve = (variant.get("options") or {}).get("serve")
    refs: dict[str, str] = {}
    if isinstance(serve, Mapping) and serve.get("launcher") == "llama_cpp":
        refs["gguf"] = str(serve.get("gguf") or models.EMBEDDED)
    elif backend in WEIGHT_BACKENDS or (backend == "http" and serve) or (backend != "http" and variant.get("model")):
        refs["model"] = str(variant.get("model") or models.EMBEDDED)
    quant = variant.get("quantization") or {}
    if quant.get("checkpoint"):
        refs["checkpoint"] = str(quant["checkpoint"])
    spec = variant.get("speculative") or {}
    draft = spec.get("model") or (spec.get("draft") or {}).get("model")
    if draft:
        refs["draft"] = str(draft)
    return refs


def artefact_revisions(variant: Mapping[str, Any]) -> dict[str, str | None]:
    """role -> the revision the suite pins for that artefact (hub ids; None: the default branch)."""
    spec = variant.get("speculative") or {}
    return {
        "model": variant.get("revision"),
        "checkpoint": (variant.get("quantization") or {}).get("revision"),
        "draft": spec.get("revision") or (spec.get("draft") or {}).get("revision"),
    }


def artefact_identity(role: str, ref: str, cache_dir: str | os.PathLike | None = None, revision: str | None = None) -> dict:
    """{ref, path, sha256, files} of one artefact, or {ref, error} when it cannot be found."""
    try:
        if role == "gguf":
            path = models.embedded_gguf_path() if ref == models.EMBEDDED else Path(ref).expanduser()
            if not path.is_file():
                raise EvalsuiteError(f"GGUF file {path} not found")
            return {"ref": ref, "path": str(path), "sha256": models.file_sha256(path, cache_dir), "files": 1}
        path = model_path(ref, cache_dir, revision)
        return {"ref": ref, "path": str(path), **models.model_dir_identity(path, cache_dir)}
    except (EvalsuiteError, OSError) as exc:
        return {"ref": ref, "error": str(exc)}


def variant_identity(variant: Mapping[str, Any], fingerprint: str) -> dict:
    """{fingerprint, backend, artefacts: role -> artefact_identity} of a resolved suite's variant block."""
    cache_dir = (variant.get("options") or {}).get("cache_dir")
    revisions = artefact_revisions(variant)
    arts = {role: artefact_identity(role, ref, cache_dir, revisions.get(role)) for role, ref in artefact_refs(variant).items()}
    return {"fingerprint": fingerprint, "backend": variant.get("backend") or "fake", "artefacts": arts}


@dataclass(frozen=True)
class IdentityCheck:
    """Whether a variant's files are still those it was cleared with."""

    ok: bool
    problems: tuple[str, ...]
    current: Mapping[str, Any]  #: the identity now

    def summary(self) -> str:
        arts = self.current.get("artefacts") or {}
        if not arts:
            return f"no model files (backend {self.current.get('backend')}): its identity is its fingerprint {str(self.current.get('fingerprint'))[:16]}"
        return "; ".join(
            f"{role} {a.get('path', a.get('ref'))}: sha256 {str(a.get('sha256', '-'))[:16]} ({a.get('files', 0)} file(s))" for role, a in arts.items()
        )


def check_identity(recorded: Mapping[str, Any], spec: Mapping[str, Any], fingerprint: str) -> IdentityCheck:
    """Compare a recorded identity with the variant's files now (and its fingerprint with the ledger's)."""
    now = variant_identity(spec, fingerprint)
    problems = []
    if recorded.get("fingerprint") != fingerprint:
        problems.append(f"fingerprint: {str(recorded.get('fingerprint'))[:16]} recorded with its identity, {fingerprint[:16]} in the ledger")
    for role, rec in (recorded.get("artefacts") or {}).items():
        cur = (now["artefacts"] or {}).get(role)
        where = f"{role} {rec.get('ref')}"
        if "error" in rec:
            problems.append(f"{where}: its files were not found when it was cleared ({rec['error']}), so there is nothing to check them against")
        elif cur is None:
            problems.append(f"{where}: no longer named by the variant")
        elif "error" in cur:
            problems.append(f"{where}: {cur['error']}")
        elif cur.get("sha256") != rec.get("sha256"):
            problems.append(
                f"{where}: its files changed since it was cleared (sha256 {str(rec.get('sha256'))[:16]}, {rec.get('files')} file(s) then; "
                f"{str(cur.get('sha256'))[:16]}, {cur.get('files')} file(s) now, in {cur.get('path')})"
            )
    return IdentityCheck(not problems, tuple(problems), now)
