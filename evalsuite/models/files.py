"""Model files on disk: the cache directory, locks and atomic directories, content identity.

The base of evalsuite.models: every other module of the package builds on these, none of them on
the package itself (no import circle between a package and its modules).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cachedir import cache_root
from ..errors import MissingExtraError
from ..yamlio import atomic_write_text

log = logging.getLogger("evalsuite")

#: files whose content is the identity of a model directory
_IDENTITY_SUFFIXES = (".safetensors", ".json", ".model", ".txt", ".jinja", ".bin")


# -- cache locations ---------------------------------------------------------------------------
@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive lock between processes (two test workers must not convert the same model twice)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def atomic_dir(final: Path):
    """A temp directory beside `final`, renamed onto it on success: a crash leaves no half cache."""

    @contextlib.contextmanager
    def ctx():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            yield tmp
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    return ctx()


def build_once(final: Path, marker: str, build: Callable[[Path], None], meta: dict, announce: str) -> Path:
    """A derived model (a quantized checkpoint) built into `final` once, shared by processes: under a
    lock, into a temporary directory renamed onto `final` on success (a crash leaves no half
    checkpoint), with `marker` (`meta` and the build time, as JSON) written last. A build another
    process finished meanwhile is used as it is. `announce` is logged when this process builds."""
    with file_lock(final.parent / f".{final.name}.lock"):
        if (final / marker).is_file():
            return final
        t0 = time.perf_counter()
        log.info("%s", announce)
        with atomic_dir(final) as tmp:
            build(tmp)
            done = {**meta, "quantize_s": round(time.perf_counter() - t0, 1)}
            (tmp / marker).write_text(json.dumps(done, indent=2) + "\n", "utf-8")
        log.info("built %s in %.0fs", final.name, time.perf_counter() - t0)
    return final


# -- missing dependencies ----------------------------------------------------------------------
def require(module: str, feature: str, extra: str, package: str | None = None) -> None:
    """Raise MissingExtraError unless `module` can be imported (checked without importing it)."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(feature, extra, package or module)


# -- identity ----------------------------------------------------------------------------------
_HASH_MEMO: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path, cache_dir: str | os.PathLike | None = None) -> str:
    """sha256 of a file, memoized by (path, size, mtime) in memory and in the cache directory."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _HASH_MEMO:
        return _HASH_MEMO[key]
    index_path = cache_root(cache_dir) / "hashes.json"
    index = read_json(index_path)
    skey = f"{key[0]}|{key[1]}|{key[2]}"
    digest = index.get(skey)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
        index = read_json(index_path)  # re-read: another process may have added entries
        index[skey] = digest
        _write_json_atomic(index_path, index)
    _HASH_MEMO[key] = digest
    return digest


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _write_json_atomic(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True))


def model_dir_identity(model_dir: Path, cache_dir: str | os.PathLike | None = None) -> dict:
    """Content hashes of a model directory's weights, config and tokenizer files."""
    files = {}
    for p in sorted(Path(model_dir).iterdir()):
        if p.is_file() and p.suffix in _IDENTITY_SUFFIXES and p.name != "evalsuite-source.json":
            files[p.name] = _blob_name(p) or file_sha256(p, cache_dir)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"sha256": digest, "files": len(files)}


def _blob_name(path: Path) -> str | None:
    """A hub cache file is a link to a blob named by its content hash (sha256 for weights, the git
    blob hash for small files): that name is its identity, read without hashing gigabytes."""
    if not path.is_symlink():
        return None
    target = path.resolve()
    if target.parent.name == "blobs" and len(target.name) in (40, 64):
        return f"blob:{target.name}"
    return None


def library_identity(*names: str) -> dict:
    """Versions of the libraries that compute the outputs (a new version may change them)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out
