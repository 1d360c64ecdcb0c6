"""Where a model named in a suite file lives: the embedded model, a local directory, or a hub id.

A hub id (`Qwen/Qwen2.5-7B-Instruct`, with an optional `revision:` branch, tag or commit) resolves
through `huggingface_hub.snapshot_download`: its cache (`HF_HUB_CACHE`, else `HF_HOME/hub`), its
offline switch (`HF_HUB_OFFLINE`) and its token (`HF_TOKEN` or `hf auth login`; read by the library,
never by evalsuite, so it never reaches a run file). The snapshot's commit hash is part of the
resolved model's identity: a branch that moved is a different variant, not a cache hit.

Only the files a transformers model needs are fetched (configs, safetensors weights, tokenizer
files, chat templates): no pickled `.bin` weights, no code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import EvalsuiteError, MissingExtraError, close_matches

EMBEDDED = "embedded"
#: the files of a transformers model that a snapshot download fetches
ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ResolvedModel:
    """A model directory and where it came from (`source`: embedded, local or hub)."""

    path: Path
    source: str
    name: str
    repo_id: str | None = None
    revision: str | None = None
    commit: str | None = None

    def identity(self) -> dict:
        """What names these weights beyond their file hashes (no local paths: the same on every machine).
        The commit, not the revision's name: `main` and the hash it points to are the same weights."""
        if self.source == "hub":
            return {"source": "hub", "repo_id": self.repo_id, "commit": self.commit}
        return {"source": self.source}


def looks_like_hub_id(name: str) -> bool:
    """`org/name` (what the hub accepts), not a path spelled as one (`./x`, `/x`, `~/x`, `a/b/c`)."""
    return bool(_REPO_ID.match(name)) and ".." not in name and not name.endswith((".", "-"))


def hub_cache_dir() -> Path:
    """The hub cache huggingface_hub uses, read from the environment now (it may change after import)."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:
        return Path.home() / ".cache" / "huggingface" / "hub"


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as set now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "on", "yes", "true")


def fetch_command(repo_id: str, revision: str | None) -> str:
    """The command that puts a hub model into the local cache (huggingface_hub's CLI)."""
    rev = f" --revision {revision}" if revision and revision != "main" else ""
    return f"HF_HUB_OFFLINE=0 hf download {repo_id}{rev}"


def cached_repo_ids(cache: Path | None = None) -> list[str]:
    """The model ids in the local hub cache (`models--org--name` folders)."""
    cache = cache or hub_cache_dir()
    if not cache.is_dir():
        return []
    return sorted(p.name[len("models--") :].replace("--", "/", 1) for p in cache.iterdir() if p.name.startswith("models--"))


def resolve_model(name: str | None, revision: str | None = None, *, field: str = "model", ensure_embedded=None) -> ResolvedModel:
    """The directory of a model named in a suite: "embedded" (or None), a local directory, or a hub id.

    `field` names the suite field in errors (`model`, `quantization.checkpoint`, `speculative.model`).
    `ensure_embedded` returns the embedded model's directory (converting it once).
    """
    if name in (None, "", EMBEDDED):
        if revision:
            raise EvalsuiteError(f"{field}: `revision: {revision}` applies to hub ids, not to the embedded model")
        if ensure_embedded is None:
            raise EvalsuiteError(f"{field}: the embedded model needs a converter")
        return ResolvedModel(Path(ensure_embedded()), "embedded", EMBEDDED)
    name = str(name)
    local = Path(name).expanduser()
    if local.is_dir():
        if revision:
            raise EvalsuiteError(f"{field}: `revision: {revision}` applies to hub ids, but {name!r} is a local directory")
        _require_config(local, name, field)
        return ResolvedModel(local, "local", name)
    if not looks_like_hub_id(name):
        raise EvalsuiteError(
            f"{field}: model directory {name!r} not found, and it is not a hub id (org/name); "
            "use a local model directory, a hub id such as Qwen/Qwen2.5-7B-Instruct, or 'embedded' for the default model"
        )
    return _resolve_hub(name, revision, field)


def _require_config(path: Path, name: str, field: str) -> None:
    if not (path / "config.json").is_file():
        raise EvalsuiteError(f"{field}: {name!r} is not a transformers model directory (no config.json in {path})")


def _resolve_hub(repo_id: str, revision: str | None, field: str) -> ResolvedModel:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - a dependency of transformers
        raise MissingExtraError("models by hub id", "models", "huggingface_hub") from exc
    cache = hub_cache_dir()
    offline = hub_offline()
    try:
        path = Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), allow_patterns=list(ALLOW_PATTERNS), local_files_only=offline))
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes one message naming the id and the fix
        raise EvalsuiteError(_hub_error(repo_id, revision, field, exc, cache, offline)) from exc
    _require_config(path, repo_id, field)
    commit = path.name if _COMMIT.match(path.name) else None
    return ResolvedModel(path, "hub", repo_id, repo_id, revision or "main", commit)


def _hub_error(repo_id: str, revision: str | None, field: str, exc: Exception, cache: Path, offline: bool) -> str:
    """One message: which id and revision, why, and the command that fixes it."""
    kind = type(exc).__name__
    rev = revision or "main"
    where = f"{field} {repo_id!r} (revision {rev})"
    fetch = fetch_command(repo_id, revision)
    if kind == "RevisionNotFoundError":
        return f"{where}: the hub has no revision {rev!r} for this model (a branch, tag or 40-character commit hash)"
    if kind in ("RepositoryNotFoundError", "GatedRepoError") or "401" in str(exc):
        return f"{where}: the hub refused it ({kind}): the id is wrong, or the model is private or gated (accept its terms, then set HF_TOKEN or run `hf auth login`)"
    if kind == "IncompleteSnapshotError":
        return f"{where}: the cached snapshot is incomplete ({exc}); complete it with: {fetch}"
    close = close_matches(repo_id, cached_repo_ids(cache), n=3, cutoff=0.6)
    hint = f"; cached models close to it: {', '.join(close)}" if close else ""
    if offline:
        return f"{where} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set; fetch it once with: {fetch}{hint}"
    return f"{where} could not be fetched from the hub nor found in the local cache ({cache}): {kind}: {exc}; fetch it with: {fetch}{hint}"


def check_model(name: str | None, revision: str | None = None, *, field: str = "model") -> dict:
    """Whether a model resolves here, without downloading or converting anything (for `evalsuite init`).

    Returns {name, revision, ok, where, commit, message}: `where` is embedded, local, cache, hub
    (exists on the hub, not cached yet: the first run downloads it) or missing.
    """
    out = {"name": name or EMBEDDED, "revision": revision, "ok": False, "where": "missing", "commit": None, "message": ""}
    if name in (None, "", EMBEDDED):
        from .embedded import embedded_gguf_path

        try:
            gguf = embedded_gguf_path()
        except EvalsuiteError as exc:
            return out | {"message": str(exc)}
        return out | {"ok": True, "where": "embedded", "message": f"the embedded model ({gguf.name}, converted once on the first run)"}
    if Path(str(name)).expanduser().is_dir():
        try:
            resolved = resolve_model(name, revision, field=field)
        except EvalsuiteError as exc:
            return out | {"message": str(exc)}
        return out | {"ok": True, "where": "local", "message": str(resolved.path)}
    if not looks_like_hub_id(str(name)):
        return out | {"message": f"{field}: {name!r} is neither a local model directory nor a hub id (org/name)"}
    return out | _check_hub(str(name), revision, field)


def _check_hub(repo_id: str, revision: str | None, field: str) -> dict:
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    try:
        path = Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), allow_patterns=list(ALLOW_PATTERNS), local_files_only=True))
        return {"ok": True, "where": "cache", "commit": path.name, "message": str(path)}
    except Exception as exc:  # noqa: BLE001 - a miss; online, ask the hub whether it exists
        if hub_offline():
            return {"message": _hub_error(repo_id, revision, field, exc, cache, True)}
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(repo_id, revision=revision)
        return {
            "ok": True,
            "where": "hub",
            "commit": info.sha,
            "message": f"on the hub, not cached: the first run downloads it ({fetch_command(repo_id, revision)})",
        }
    except Exception as exc:  # noqa: BLE001
        return {"message": _hub_error(repo_id, revision, field, exc, cache, False)}
