"""YAML/JSONL loading that remembers the line of every field, so errors can point at it."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem, ValidationError

PathKey = tuple  # a path into the loaded document: keys and list indices
#: libyaml's loader where PyYAML was built with it: ~7x less CPU on the shipped case sets (docs/performance.md)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineMap(dict):
    """Maps a path (tuple of keys/indices) to its 1-based line; `line_of` falls back to parents."""

    def line_of(self, path: PathKey) -> int | None:
        path = tuple(path)
        while True:
            if path in self:
                return self[path]
            if not path:
                return None
            path = path[:-1]


def _walk(node: yaml.Node, path: PathKey, lines: LineMap) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
            lines[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def load_yaml(path: str | Path) -> tuple[Any, LineMap]:
    """Load one YAML document and its line map; a syntax error becomes a located Problem."""
    path = Path(path)
    text = read_utf8(path)
    try:
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise ValidationError([Problem(str(path), line, None, "yaml", _yaml_message(exc))]) from None
    lines = LineMap()
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def _yaml_message(exc: yaml.YAMLError) -> str:
    """PyYAML's error in one plain sentence, placed by our own file:line (its `in "<unicode string>",
    line 2, column 5` marks are noise beside it)."""
    problem = getattr(exc, "problem", None)
    if not problem:
        return str(exc).replace("\n", " ")
    mark, context, cmark = getattr(exc, "problem_mark", None), getattr(exc, "context", None), getattr(exc, "context_mark", None)
    where = f" at column {mark.column + 1}" if mark is not None else ""
    ctx = f" ({context}, from line {cmark.line + 1})" if context and cmark is not None else (f" ({context})" if context else "")
    return f"{problem}{where}{ctx}"


def read_utf8(path: Path) -> str:
    """A file's text; bytes that are not UTF-8 become a located Problem, not a UnicodeDecodeError."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValidationError([Problem(str(path), line, None, "encoding", f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})")]) from None


def load_jsonl(path: str | Path, text: str | None = None) -> tuple[list[Any], LineMap]:
    """Load a JSONL file (one object per line, blank lines skipped) with each record's line; `text`:
    the file's text when the caller has read it already."""
    path = Path(path)
    records: list[Any] = []
    lines = LineMap()
    problems = []
    for lineno, raw in enumerate((read_utf8(path) if text is None else text).split("\n"), start=1):  # not splitlines: JSON strings may hold U+2028
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(path), lineno, None, "json", exc.msg))
            continue
        lines[(len(records),)] = lineno
        records.append(obj)
    if problems:
        raise ValidationError(problems)
    return records, lines


#: an atomic write's temporary file: `.NAME.PID-RANDOM.tmp` beside its target, so a later writer can
#: tell a dead writer's leftover (its process is gone) from a write in progress
_TMP_SUFFIX = ".tmp"
_swept_dirs: set[str] = set()
_umask_lock = threading.Lock()


def file_mode() -> int:
    """The mode a new file gets under the process's umask (0666 & ~umask): what `open()` would give.

    mkstemp creates 0600 files; a report or a run file written atomically must be as readable as any
    other file the user writes. Linux names the umask in /proc; elsewhere it is read (and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def temp_writer_pid(name: str) -> int | None:
    """The writer's pid in an atomic write's temporary file name (`.NAME.PID-RANDOM.tmp`), else None."""
    if not (name.startswith(".") and name.endswith(_TMP_SUFFIX)):
        return None
    tag = name[: -len(_TMP_SUFFIX)].rsplit(".", 1)[-1]
    pid, _, rand = tag.partition("-")
    return int(pid) if pid.isdigit() and rand else None


def sweep_temp_files(directory: str | Path) -> list[Path]:
    """Remove the temporary files that killed writers left in `directory` (their process is gone);
    a live writer's file is left alone. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        pid = temp_writer_pid(e.name)
        if pid is not None and pid != os.getpid() and not pid_alive(pid) and e.is_file(follow_symlinks=False):
            try:
                os.unlink(e.path)
                removed.append(Path(e.path))
            except OSError:
                pass
    return removed


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write into; on a clean exit it replaces `path` at once
    (readers see the old file or the new one, never half of it), with the mode a new file gets
    under the umask (or the replaced file's own mode). On an error the temporary file is removed.

    The first atomic write into a directory removes what killed writers left there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(path.parent)
    if key not in _swept_dirs:
        sweep_temp_files(path.parent)
        _swept_dirs.add(key)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=_TMP_SUFFIX)
    os.close(fd)
    try:
        yield Path(tmp)
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = file_mode()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str, check=None) -> None:
    """Write a file so that readers see the old content or the new one, never half of it.

    `check(tmp_path)`, if given, runs on the written temporary file before it replaces `path`;
    if it raises, `path` is left untouched.
    """
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if check is not None:
            check(str(tmp))


def dump_yaml(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
