"""A run's score records on disk: one Parquet file, columnar and compact, that pandas, pyarrow and
DuckDB read as they are (`pd.read_parquet(run / "scores.parquet")`).

A run of 10,000 cases x 4 variants holds 600,000 score records. As JSON lines (`scores.jsonl`, what
runs stored before schema version 1 of this file) every record repeats every key and every string:
153 MB that took seconds to parse on every command. Here each column is stored once, its strings
dictionary-encoded (a few variants, metrics and scenarios; one id per case), and the file is
compressed (zstd). `details` is a JSON string per record (one type per column); identical details
are parsed once and shared between records, which treat them as read-only.

The file's key-value metadata holds `evalsuite.schema_version`; a reader refuses a newer version
with an error that names the file. Older runs' `scores.jsonl` still load (`read_run_scores`), and
`evalsuite export RUN --format jsonl` writes the records back as JSON lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, overload

from ..errors import EvalsuiteError, MissingExtraError
from ..yamlio import atomic_path

#: the version of the Parquet score file this evalsuite writes (and the newest it reads)
SCORES_SCHEMA_VERSION = 1
#: metadata keys of the file (Parquet key-value metadata, bytes)
VERSION_KEY = b"evalsuite.schema_version"
KIND_KEY = b"evalsuite.kind"
KIND = b"scores"
#: the score records of runs stored before the Parquet file, by the Parquet file's name
LEGACY_NAMES = {"scores.parquet": "scores.jsonl", "load_scores.parquet": "load_scores.jsonl"}
#: columns that repeat a few values (one per case at most): dictionary-encoded in memory as on disk
_DICT_COLUMNS = ("variant", "case_id", "scenario", "kind", "metric", "details")


@dataclass(frozen=True, kw_only=True)
class ScoreRecord:
    """A stored score: who produced the output, for which case and sample, and the score."""

    variant: str
    case_id: str
    sample: int | None  #: None for case-level metrics (pass@k, perturbation robustness)
    scenario: str
    kind: str
    metric: str
    value: float | None
    passed: bool | None
    higher_is_better: bool
    details: dict  #: read-only: records read from one file share the dict of identical details

    def to_dict(self) -> dict:
        # the fields by name, without `asdict`'s recursive deep copy of `details` (a run writes every record)
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict) -> ScoreRecord:
        fields: dict = {k: d.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


#: the record's fields, in the file's column order
FIELDS: tuple[str, ...] = tuple(ScoreRecord.__dataclass_fields__)


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow as pa
    except ImportError as exc:  # a core dependency; an environment without it says what to install
        raise MissingExtraError(what, "parquet", "pyarrow") from exc
    return pa


def _schema(pa: Any) -> Any:
    s = pa.string()
    return pa.schema(
        [
            ("variant", s),
            ("case_id", s),
            ("sample", pa.int64()),
            ("scenario", s),
            ("kind", s),
            ("metric", s),
            ("value", pa.float64()),
            ("passed", pa.bool_()),
            ("higher_is_better", pa.bool_()),
            ("details", s),
        ],
        metadata={VERSION_KEY: str(SCORES_SCHEMA_VERSION).encode(), KIND_KEY: KIND},
    )


def _details_text(d: Any) -> str | None:
    if d is None:
        return None
    return "{}" if not d else json.dumps(d, ensure_ascii=False, default=str)


def _value(v: Any) -> float | None:
    return None if v is None else float(v)


def _table(records: Sequence[ScoreRecord]) -> Any:
    pa = _pyarrow("storing a run's scores")
    schema = _schema(pa)
    cols: dict[str, list] = {
        "variant": [r.variant for r in records],
        "case_id": [r.case_id for r in records],
        "sample": [r.sample for r in records],
        "scenario": [r.scenario for r in records],
        "kind": [r.kind for r in records],
        "metric": [r.metric for r in records],
        "value": [_value(r.value) for r in records],
        "passed": [r.passed for r in records],
        "higher_is_better": [bool(r.higher_is_better) for r in records],
        "details": [_details_text(r.details) for r in records],
    }
    return pa.Table.from_arrays([_arrow(pa, cols[f.name], f.type) for f in schema], schema=schema)


def _arrow(pa: Any, values: list, typ: Any) -> Any:
    """One column as an Arrow array built from its buffers (validity bitmap, values, offsets).

    `pa.array` would do the same, but first imports pandas (a third of a second, most of a warm re-run's
    write) to ask whether the values are pandas objects; these never are. A column holding values of
    another type than its own (an int in a string column) goes through `pa.array`, which names them."""
    import numpy as np

    n = len(values)
    nulls = values.count(None)
    kinds = set(map(type, values)) - {type(None)}
    bitmap = pa.py_buffer(np.packbits(np.fromiter((v is not None for v in values), dtype=bool, count=n), bitorder="little")) if nulls else None
    if pa.types.is_string(typ) and kinds <= {str}:
        data = [v.encode("utf-8") for v in values] if not nulls else [b"" if v is None else v.encode("utf-8") for v in values]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] < 2**31:
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(data))], null_count=nulls)
    elif pa.types.is_boolean(typ) and kinds <= {bool}:
        bits = np.array(values, dtype=bool) if not nulls else np.fromiter((v is True for v in values), dtype=bool, count=n)
        return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(np.packbits(bits, bitorder="little"))], null_count=nulls)
    elif pa.types.is_floating(typ) and kinds <= {float, int}:
        nums = np.array(values if not nulls else [0.0 if v is None else v for v in values], dtype=np.float64)
        return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(nums)], null_count=nulls)
    elif pa.types.is_integer(typ) and kinds <= {int}:
        ints = np.array(values if not nulls else [0 if v is None else v for v in values], dtype=np.int64)
        return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(ints)], null_count=nulls)
    return pa.array(values, type=typ)


def write_score_file(path: str | Path, records: Iterable[ScoreRecord]) -> Path:
    """Write score records as one Parquet file, atomically (readers see the old file or the new one)."""
    import pyarrow.parquet as pq

    path = Path(path)
    table = _table(list(records))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=list(_DICT_COLUMNS), write_statistics=False)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def _check_version(path: Path, metadata: dict | None) -> None:
    meta = metadata or {}
    if meta.get(KIND_KEY) != KIND or VERSION_KEY not in meta:
        raise EvalsuiteError(f"{path}: not an evalsuite score file (its Parquet metadata has no {VERSION_KEY.decode()})")
    raw = meta[VERSION_KEY].decode("utf-8", "replace")
    try:
        version = int(raw)
    except ValueError:
        raise EvalsuiteError(f"{path}: {VERSION_KEY.decode()} is {raw!r}, not a number") from None
    if version > SCORES_SCHEMA_VERSION:
        raise EvalsuiteError(
            f"{path}: score file schema version {version} is newer than this evalsuite reads ({SCORES_SCHEMA_VERSION}); upgrade evalsuite to read this run"
        )


def _column(table: Any, name: str) -> list:
    """A column as Python values; a dictionary column's values are shared objects (one per distinct value)."""
    col = table.column(name)
    if col.num_chunks == 1 and hasattr(col.chunk(0), "dictionary"):
        chunk = col.chunk(0)
        values = chunk.dictionary.to_pylist()
        if chunk.null_count == 0:
            return [values[i] for i in chunk.indices.to_numpy(zero_copy_only=False).tolist()]
        return [None if i is None else values[i] for i in chunk.indices.to_pylist()]
    out: list = []
    for chunk in col.chunks:
        if hasattr(chunk, "dictionary"):
            values = chunk.dictionary.to_pylist()
            out += [None if i is None else values[i] for i in chunk.indices.to_pylist()]
        else:
            out += chunk.to_pylist()
    return out


def _details(texts: list) -> list:
    parsed: dict[str, Any] = {}
    out: list = []
    for t in texts:
        if t is None:
            out.append(None)
            continue
        d = parsed.get(t)
        if d is None:
            d = parsed[t] = json.loads(t)
        out.append(d)
    return out


class ScoreTable(Sequence[ScoreRecord]):
    """Score records held as the file's columns (one list a field, in `FIELDS` order).

    Judging a large run reads columns, not objects: `rows()` gives each record's fields as a tuple,
    and the records themselves are built only when something iterates or indexes the table (once,
    then kept). At 600,000 records that saves the seconds that building the objects costs.
    """

    def __init__(self, columns: Sequence[list], records: list[ScoreRecord] | None = None) -> None:
        if len(columns) != len(FIELDS):
            raise ValueError(f"a score table has {len(FIELDS)} columns, not {len(columns)}")
        self._columns = tuple(columns)
        self._records = records

    @classmethod
    def from_records(cls, records: Iterable[ScoreRecord]) -> ScoreTable:
        recs = list(records)
        return cls([[getattr(r, f) for r in recs] for f in FIELDS], recs)

    def column(self, name: str) -> list:
        """One field's values, in record order (shared, read-only)."""
        return self._columns[FIELDS.index(name)]

    def rows(self) -> Iterator[tuple]:
        """Each record's fields as a tuple, in `FIELDS` order (no record objects are built)."""
        return zip(*self._columns)

    def records(self) -> list[ScoreRecord]:
        """The records as objects, built once."""
        if self._records is None:
            # the records' attribute dicts built in C (map/zip), then set on bare instances: a dataclass's
            # __init__ (one object.__setattr__ per field of a frozen record) costs seconds at 600,000 records
            new, setattr_, cls = object.__new__, object.__setattr__, ScoreRecord
            out: list[ScoreRecord] = []
            append = out.append
            for d in map(dict, map(zip, repeat(FIELDS), self.rows())):
                r = new(cls)
                setattr_(r, "__dict__", d)
                append(r)
            self._records = out
        return self._records

    def where(self, field: str, keep: Callable[[Any], bool]) -> ScoreTable:
        """The records whose `field` (a hashable one: not `details`) passes `keep`, as a table (the test
        runs once per distinct value)."""
        col = self.column(field)
        kept = {x for x in set(col) if keep(x)}
        picked = [i for i, x in enumerate(col) if x in kept]
        if len(picked) == len(col):
            return self
        return ScoreTable([[c[i] for i in picked] for c in self._columns])

    def __len__(self) -> int:
        return len(self._columns[0])

    def __iter__(self) -> Iterator[ScoreRecord]:
        return iter(self.records())

    @overload
    def __getitem__(self, i: int) -> ScoreRecord: ...
    @overload
    def __getitem__(self, i: slice) -> list[ScoreRecord]: ...
    def __getitem__(self, i: int | slice) -> ScoreRecord | list[ScoreRecord]:
        return self.records()[i]


def score_rows(records: Iterable[ScoreRecord]) -> Iterator[tuple]:
    """Each record's fields as a tuple in `FIELDS` order: a table's columns zipped, other records read."""
    if isinstance(records, ScoreTable):
        return records.rows()
    return map(attrgetter(*FIELDS), records)


def read_score_table(path: str | Path) -> ScoreTable:
    """The score records of one Parquet score file, as columns; EvalsuiteError naming the file when it
    is not one this evalsuite reads (another kind of file, a newer schema version, a missing column)."""
    _pyarrow("reading a run's scores")
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        pf = pq.ParquetFile(path, read_dictionary=list(_DICT_COLUMNS))
        _check_version(path, pf.schema_arrow.metadata)
        missing = [f for f in FIELDS if f not in pf.schema_arrow.names]
        if missing:
            raise EvalsuiteError(f"{path}: score file without the column(s) {', '.join(missing)}")
        table = pf.read(columns=list(FIELDS), use_threads=False)
    except EvalsuiteError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors (ArrowInvalid, OSError) name no file
        raise EvalsuiteError(f"{path}: cannot read the score file ({type(exc).__name__}: {exc})") from exc
    return ScoreTable([_column(table, f) if f != "details" else _details(_column(table, f)) for f in FIELDS])


def read_score_file(path: str | Path) -> list[ScoreRecord]:
    """The score records of one Parquet score file, as objects (see `read_score_table`)."""
    return read_score_table(path).records()


def read_jsonl_scores(path: str | Path) -> list[ScoreRecord]:
    """Score records as JSON lines (older runs' scores.jsonl, `evalsuite export --format jsonl`)."""
    path = Path(path)
    out = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(ScoreRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as exc:
                raise EvalsuiteError(f"{path}:{n}: not a score record ({exc})") from exc
    return out


def write_jsonl_scores(path: str | Path, records: Iterable[ScoreRecord]) -> Path:
    """Score records as JSON lines, one record a line, atomically (the format of older runs' scores.jsonl)."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path


def read_run_scores(run_dir: str | Path, name: str) -> ScoreTable:
    """A run's score records: its Parquet file `name`, else the JSON lines an older run stored
    (`scores.jsonl`), else none."""
    path = Path(run_dir) / name
    if path.is_file():
        return read_score_table(path)
    legacy = LEGACY_NAMES.get(name)
    if legacy is not None and (Path(run_dir) / legacy).is_file():
        return ScoreTable.from_records(read_jsonl_scores(Path(run_dir) / legacy))
    return ScoreTable.from_records([])


def write_run_scores(run_dir: str | Path, name: str, records: Iterable[ScoreRecord]) -> Path:
    """Replace a run's score file `name` (Parquet) atomically; an older run's JSON lines of the same
    records, now stale, are removed after it."""
    path = write_score_file(Path(run_dir) / name, records)
    legacy = LEGACY_NAMES.get(name)
    if legacy is not None:
        (Path(run_dir) / legacy).unlink(missing_ok=True)
    return path
