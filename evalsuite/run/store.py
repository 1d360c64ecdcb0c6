"""Run directories and the shared generation cache.

Layout of a run, `reports/runs/<run-id>/`:

- `suite.yaml`        the resolved suite (every default filled in)
- `signature.json`    case-set digest, variant fingerprints, settings, versions, hardware
- `generations.jsonl` one generation per line, appended as each batch finishes (fsync'd at least every second)
- `variants.json`     per-variant performance summary (latency, tokens/s, peak memory, errors)
- `scores.parquet`    per-case scores, columnar (evalsuite.run.scorefile; recomputable with `evalsuite score RUN`;
                      older runs stored `scores.jsonl`, which still loads)
- `status.json`       `complete: true` once every planned generation is stored

Crash safety: a kill at any moment leaves at most one partial last line in `generations.jsonl`,
which the next open repairs (truncates); every other file is replaced atomically, and what a killed
writer left (a temporary file, a run directory whose creation it did not finish) is removed by the
next process that writes there. The cache is
SQLite (transactional): a generation is committed there before it is appended to the run, so a
resumed run never generates anything twice.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar, cast, overload

from ..backends.base import Generation
from ..errors import EvalsuiteError
from ..yamlio import atomic_write_text, dump_yaml
from .cache import DEFAULT_CACHE as DEFAULT_CACHE
from .cache import KEEP_SCORER_VERSIONS as KEEP_SCORER_VERSIONS
from .cache import SCHEMA_VERSION, utc_now
from .cache import GenerationCache as GenerationCache
from .scorefile import LEGACY_NAMES, ScoreTable, read_run_scores, write_run_scores
from .scorefile import ScoreRecord as ScoreRecord

log = logging.getLogger("evalsuite")

T = TypeVar("T")


def beside_runs(name: str, store: RunStore | None = None, *, runs_dir: str | Path | None = None) -> Path:
    """A file kept beside the runs folder, shared by every run in it (the review queue, the release
    ledger): `reports/<name>` for runs under `reports/runs/`."""
    if store is not None:
        return Path(store.dir).parent.parent / name
    if runs_dir is not None:
        return Path(runs_dir).parent / name
    return Path("reports") / name


def _stat(path: Path) -> tuple:
    try:
        st = path.stat()
    except FileNotFoundError:
        return ()
    return (st.st_size, st.st_mtime_ns)


def _merge(out: dict, gens: Iterable[Generation]) -> dict:
    """Generations by key, in file order: a later success replaces an error, nothing else replaces."""
    for g in gens:
        k = g.key()
        prev = out.get(k)
        if prev is None or (not prev.ok and g.ok):
            out[k] = g
    return out


def _creator(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / RunStore.CREATING).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def incomplete(run_dir: Path) -> str | None:
    """Why `run_dir` is not a complete run directory (None when it is one): its creation was cut short."""
    if (run_dir / RunStore.CREATING).exists():
        who = _creator(run_dir) or {}
        return f"its creation did not finish (process {who.get('pid', '?')} on {who.get('host', '?')})"
    if not (run_dir / RunStore.SIGNATURE).is_file():
        started = any((run_dir / n).is_file() for n in (RunStore.SUITE, RunStore.STATUS, RunStore.GENERATIONS))
        return "its creation did not finish (no signature.json)" if started else "not a run directory"
    missing = [n for n in (RunStore.SUITE, RunStore.STATUS, RunStore.GENERATIONS) if not (run_dir / n).is_file()]
    if missing:
        return f"its creation did not finish (no {', '.join(missing)})"
    return None


def sweep_runs(runs_dir: Path) -> list[Path]:
    """Remove the run directories whose creation a killed process left unfinished (its creator, on
    this host, is gone), with a notice each; and the temporary files killed writers left in `runs_dir`."""
    from ..yamlio import pid_alive, sweep_temp_files

    sweep_temp_files(runs_dir)
    removed = []
    host = socket.gethostname()
    for marker in runs_dir.glob(f"*/{RunStore.CREATING}"):
        who = _creator(marker.parent)
        if not who or who.get("host") != host or who.get("pid") == os.getpid() or pid_alive(int(who.get("pid", 0))):
            continue
        shutil.rmtree(marker.parent, ignore_errors=True)
        log.warning("removed %s: a run whose creation was cut short (its process %s is gone)", marker.parent, who.get("pid"))
        removed.append(marker.parent)
    return removed


class RunStore:
    """One run directory: append-only generations, atomically replaced metadata.

    The directory's file names are named here and nowhere else: code reads and writes a run's files
    through these names (or the accessors below). `memo` hands out what is computed from the files
    once per state of them: the run's comparison (evalsuite.verdict.compare.compare_run) is computed
    once however many entry points ask for it, and again when a file it reads changes.
    """

    SUITE = "suite.yaml"  #: the resolved suite
    SIGNATURE = "signature.json"  #: case-set digest, variant fingerprints, settings, versions, hardware
    STATUS = "status.json"  #: complete or not
    CASES = "cases.jsonl"  #: the cases as the run saw them
    GENERATIONS = "generations.jsonl"  #: appended as each generation finishes
    VARIANTS = "variants.json"  #: per-variant performance summaries
    SCORES = "scores.parquet"  #: per-case scores (evalsuite.run.scorefile); older runs: scores.jsonl
    TIMING = "timing.json"  #: interleaved timing blocks (evalsuite.run.timing)
    LOAD = "load.json"  #: served variants under load: one record per window (evalsuite.run.load)
    LOAD_SCORES = "load_scores.parquet"  #: scores of the answers replayed under load (evalsuite.scoring.run)
    ADAPTIVE = "adaptive.json"  #: an adaptive run's settings, order and decisions (evalsuite.adaptive)
    RUBRIC = "rubric.yaml"  #: an imported run's own rubric (evalsuite.importers), named by its suite.yaml
    IMPORTED_CASES = "imported_cases.jsonl"  #: an imported run's documents: id, task, output type, prompt, target
    IMPORTED_SCORES = "imported_scores.jsonl"  #: the metric values the other tool recorded (kept by `evalsuite score`)
    FAULTS = "faults.json"  #: each served variant's fault probes and their outcomes (evalsuite.run.faults)
    #: appends to generations.jsonl are fsync'd at most this often (each is in the file at once)
    SYNC_INTERVAL_S = 1.0
    #: the files what `memo` holds is computed from (the comparison, the scores, the cases): a change to any invalidates it
    _MEMO_FILES = (SUITE, SIGNATURE, STATUS, CASES, IMPORTED_CASES, GENERATIONS, VARIANTS, SCORES, TIMING, FAULTS, LOAD, LOAD_SCORES, *LEGACY_NAMES.values())

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self._gen_path = self.dir / self.GENERATIONS
        self._memo: dict[Hashable, tuple[tuple, object]] = {}
        #: the stored generations by key, and the state of generations.jsonl they were read at: this
        #: process's own appends extend them in place, so a writer never re-reads what it wrote
        self._gens: dict[tuple, Generation] | None = None
        self._gens_state: tuple = ()
        self._synced = float("-inf")  #: when generations.jsonl was last fsync'd (time.monotonic)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, once per state of the run's files (their sizes and modification times)."""
        state = tuple(_stat(self.dir / name) for name in self._MEMO_FILES)
        hit = self._memo.get(key)
        if hit is not None and hit[0] == state:
            return cast(T, hit[1])  # stored by this method under the same key, so by the same `compute`
        value = compute()
        self._memo[key] = (state, value)
        return value

    # -- creation and lookup -----------------------------------------------------------------
    CREATING = ".creating"  #: in a run directory while it is being created: the creator's pid and host

    @classmethod
    def create(
        cls, runs_dir: str | Path, suite_name: str, resolved_suite: dict, signature: dict, prepare: Callable[[RunStore], None] | None = None
    ) -> RunStore:
        """A new run directory. `signature.json`, which makes a directory a run (`find`), is written
        last: a kill before it leaves a directory `find` skips and a later `find` or `create` removes.
        `prepare(store)` writes what else must be there before (the run's cases)."""
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in suite_name)[:40]
        runs_dir = Path(runs_dir)
        if runs_dir.is_dir():
            sweep_runs(runs_dir)
        base = runs_dir / f"{stamp}-{safe}"
        run_dir, n = base, 1
        while True:
            try:
                run_dir.mkdir(parents=True)
                break
            except FileExistsError:
                n += 1
                run_dir = Path(f"{base}-{n}")
        (run_dir / cls.CREATING).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}), "utf-8")
        store = cls(run_dir)
        atomic_write_text(run_dir / cls.SUITE, dump_yaml(resolved_suite))
        store.write_json(cls.STATUS, {"schema_version": SCHEMA_VERSION, "complete": False, "created": utc_now()})
        store._gen_path.touch()
        if prepare is not None:
            prepare(store)
        store.write_json(cls.SIGNATURE, signature)
        (run_dir / cls.CREATING).unlink()
        return store

    @classmethod
    def find(cls, runs_dir: str | Path, run: str) -> RunStore:
        """A run by path, by id under `runs_dir`, or `last` for the newest complete one (directories a
        killed process left half-created are skipped, or removed when their creator is gone, with a notice)."""
        runs_dir = Path(runs_dir)
        if run == "last":
            candidates = sorted((p for p in runs_dir.glob("*") if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name, reverse=True)
            swept = sweep_runs(runs_dir)
            for p in candidates:
                if p in swept:
                    continue
                why = incomplete(p)
                if why is None:
                    return cls(p)
                if why != "not a run directory":
                    log.warning("skipping %s: %s", p, why)
            raise EvalsuiteError(f"no runs under {runs_dir}")
        for p in (Path(run), runs_dir / run):
            if (p / cls.SIGNATURE).is_file():
                return cls(p)
        raise EvalsuiteError(f"run {run!r} not found (looked for {run} and {runs_dir / run}; a run directory holds signature.json)")

    @classmethod
    def all(cls, runs_dir: str | Path) -> list[RunStore]:
        """Every run under `runs_dir`, oldest first (run ids start with their time); a directory whose
        creation a killed process cut short is not a run (`incomplete`)."""
        return [cls(p) for p in sorted((p for p in Path(runs_dir).glob("*") if p.is_dir() and incomplete(p) is None), key=lambda p: p.name)]

    @classmethod
    def latest(cls, runs_dir: str | Path, suite: str) -> RunStore:
        """The newest run of one suite: `suite` is its name or its file (as the run recorded it)."""
        runs = [r for r in cls.all(runs_dir) if r.is_of(suite)]
        if not runs:
            known = sorted({r.suite_name for r in cls.all(runs_dir)})
            raise EvalsuiteError(f"no run of suite {suite!r} under {runs_dir}; runs there are of: {', '.join(known) or 'nothing'}")
        return runs[-1]

    @property
    def suite_name(self) -> str:
        """The suite's name as the run recorded it."""
        try:
            return str((self.suite or {}).get("name") or self.run_id)
        except OSError:
            return self.run_id

    def is_of(self, suite: str) -> bool:
        """Whether this run was made from `suite` (a suite name, or the path of its file)."""
        try:
            info = self.suite or {}
        except OSError:
            return False
        if str(info.get("name")) == str(suite):
            return True
        path = info.get("path")
        return bool(path) and Path(str(suite)).expanduser().resolve() == Path(str(path)).resolve()

    @property
    def run_id(self) -> str:
        return self.dir.name

    # -- metadata ------------------------------------------------------------------------------
    def write_json(self, name: str, obj: object, indent: int | None = 2) -> None:
        """Replace one of the run's JSON files atomically (`indent=None`: one line, for state that is
        rewritten often, such as adaptive.json after every batch: Python's C encoder, not its indenting one)."""
        atomic_write_text(self.dir / name, json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=True, default=str) + "\n")

    @overload
    def read_json(self, name: str) -> dict | None: ...

    @overload
    def read_json(self, name: str, default: dict) -> dict: ...

    def read_json(self, name: str, default: dict | None = None) -> dict | None:
        """One of the run's JSON files (each holds an object), or `default` when it is absent (a new
        object each call: the file itself is read once per state of the run's files)."""
        text = self.text(name)
        return default if text is None else json.loads(text)

    def text(self, name: str) -> str | None:
        """The text of one of the run's files, None when it is absent; the files that judging reads
        (`_MEMO_FILES`) are read once per state of the run's files, however many consumers ask."""
        p = self.dir / name
        if name not in self._MEMO_FILES:
            return p.read_text("utf-8") if p.is_file() else None
        return self.memo(("text", name), lambda: p.read_text("utf-8") if p.is_file() else None)

    @property
    def signature(self) -> dict:
        return self.read_json(self.SIGNATURE, {})

    @property
    def suite(self) -> dict:
        """The resolved suite the run was made with (parsed once per state of the run's files; a copy each call)."""
        import copy

        import yaml

        return copy.deepcopy(self.memo("suite", lambda: yaml.safe_load(self.text(self.SUITE) or "")))

    def mark_complete(self, complete: bool = True, **extra: object) -> None:
        status = self.read_json(self.STATUS, {}) or {}
        status.update({"schema_version": SCHEMA_VERSION, "complete": complete, "updated": utc_now(), **extra})
        self.write_json(self.STATUS, status)

    # -- generations ---------------------------------------------------------------------------
    def repair(self) -> int:
        """Truncate a partial last line left by a kill; return how many bytes were dropped."""
        if not self._gen_path.exists():
            return 0
        with self._gen_path.open("rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return 0
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return 0
            # scan back to the last newline
            pos = size - 1
            chunk = 4096
            while pos > 0:
                start = max(0, pos - chunk)
                fh.seek(start)
                data = fh.read(pos - start)
                idx = data.rfind(b"\n")
                if idx != -1:
                    cut = start + idx + 1
                    break
                pos = start
            else:
                cut = 0
            fh.truncate(cut)
            fh.flush()
            os.fsync(fh.fileno())
            return size - cut

    def append(self, gens: Iterable[Generation], encoded: Sequence[str] | None = None) -> None:
        """Append generations: one write of whole lines (`encoded`: each one's JSON, when the caller
        has it already). The write is in the file as soon as it returns, so a killed process loses
        nothing it appended; it is fsync'd at most every SYNC_INTERVAL_S (and on `sync`), so a
        machine that loses power loses at most that much, which a resume generates again."""
        gens = list(gens)
        lines = encoded if encoded is not None else [json.dumps(g.to_dict(), ensure_ascii=False) for g in gens]
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        if not data:
            return
        before = _stat(self._gen_path)
        with self._gen_path.open("ab") as fh:
            fh.write(data)
            fh.flush()
            now = time.monotonic()
            if now - self._synced >= self.SYNC_INTERVAL_S:
                os.fsync(fh.fileno())
                self._synced = now
        after = _stat(self._gen_path)
        if self._gens is not None and before == self._gens_state and before and after[0] == before[0] + len(data):
            _merge(self._gens, gens)  # what the file holds now, without reading it again
            self._gens_state = after

    def sync(self) -> None:
        """fsync generations.jsonl now (the end of a variant, of a run)."""
        if self._gen_path.exists():
            with self._gen_path.open("ab") as fh:
                os.fsync(fh.fileno())
        self._synced = time.monotonic()

    def iter_generations(self) -> Iterator[Generation]:
        if not self._gen_path.exists():
            return
        with self._gen_path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break  # partial last line of a killed run
                yield Generation.from_dict(json.loads(line))

    def generations(self) -> list[Generation]:
        """Stored generations, one per (variant, case, sample): a later success replaces an error
        (read once per state of generations.jsonl; this process's own appends are added in place)."""
        return list(self._current().values())

    def lookup(self, keys: Iterable[tuple[str, str, int]]) -> list[Generation]:
        """The stored generations of these (variant, case, sample) keys (absent keys are skipped)."""
        gens = self._current()
        return [g for k in keys if (g := gens.get(k)) is not None]

    def _current(self) -> dict[tuple, Generation]:
        state = _stat(self._gen_path)
        if self._gens is None or state != self._gens_state:
            self._gens = _merge({}, self.iter_generations())
            self._gens_state = state
        return self._gens

    # -- scores --------------------------------------------------------------------------------
    def write_scores(self, records: Iterable[ScoreRecord]) -> None:
        """Replace the run's scores (scores.parquet, atomically)."""
        write_run_scores(self.dir, self.SCORES, records)

    def scores(self) -> list[ScoreRecord]:
        """The stored score records (read once per state of the run's files; an older run's scores.jsonl)."""
        return list(self.score_table())

    def score_table(self) -> ScoreTable:
        """The stored score records as columns (read once per state of the run's files): what judging
        a large run reads, without building a record object per score."""
        return self.memo("scores", lambda: read_run_scores(self.dir, self.SCORES))

    def write_load_scores(self, records: Iterable[ScoreRecord]) -> None:
        """The scores of the answers replayed under load (evalsuite.run.load), beside the run's own."""
        write_run_scores(self.dir, self.LOAD_SCORES, records)

    def load_scores(self) -> list[ScoreRecord]:
        """The stored scores of the answers replayed under load (none without a `load:` block)."""
        return list(self.memo("load_scores", lambda: read_run_scores(self.dir, self.LOAD_SCORES)))
