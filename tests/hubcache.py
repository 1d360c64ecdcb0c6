"""A real Hugging Face hub cache layout, built locally from a model directory (nothing reaches a network).

    <cache>/models--<org>--<name>/blobs/<sha256>           file contents, named by their hash
    <cache>/models--<org>--<name>/snapshots/<commit>/<f>   links to ../../blobs/<sha256>
    <cache>/models--<org>--<name>/refs/<branch or tag>     the commit it points to

which is what `hf download` leaves behind and what huggingface_hub reads with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: the files a snapshot gets (what evalsuite asks the hub for)
SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".jinja")


def fake_commit(label: str) -> str:
    """A 40-hex commit hash, stable per label."""
    return hashlib.sha1(label.encode()).hexdigest()


def add_snapshot(cache: Path, repo_id: str, src: Path, commit: str, refs=("main",), edit=None) -> Path:
    """Put `src`'s model files into `cache` as `repo_id` at `commit`, pointed to by `refs`.

    `edit(name, bytes) -> bytes` may change a file on the way (a new revision of the same model).
    Blobs are hard-linked from `src` when unchanged (a 500 MB model costs no disk). Returns the snapshot.
    """
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in sorted(Path(src).iterdir()):
        if not f.is_file() or f.suffix not in SUFFIXES or f.name.startswith("evalsuite-"):
            continue
        data = f.read_bytes()
        new = edit(f.name, data) if edit else data
        blob = repo / "blobs" / hashlib.sha256(new).hexdigest()
        if not blob.exists():
            if new is data:
                try:
                    os.link(f, blob)
                except OSError:
                    shutil.copyfile(f, blob)
            else:
                blob.write_bytes(new)
        link = snap / f.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (repo / "refs" / ref).write_text(commit)
    return snap


def point_ref(cache: Path, repo_id: str, ref: str, commit: str) -> None:
    """Move a branch (a force-push, or a new upload to main)."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs" / ref).write_text(commit)
