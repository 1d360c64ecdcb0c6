"""A variant's own environment (`environment:` in a suite): a virtual environment with other
library versions than evalsuite's, where the transformers backend runs as a worker
(evalsuite.backends.transformers_env).

`environment: {requirements: ["transformers==5.25.0"]}` builds one, once: under
`$EVALSUITE_ENVS_DIR` (default `<cache>/envs`, the cache being `$EVALSUITE_CACHE_DIR` or
`~/.cache/evalsuite`), in a folder named by the digest of what it installs. What it installs:
evalsuite's base dependencies, `torch==2.13.0` unless the requirements name torch, and the
requirements; pip resolves them together, so a pin that conflicts with evalsuite's dependencies
fails the build instead of breaking the worker. evalsuite's own code is not installed there: the
worker imports the evalsuite that started it (through a folder that holds only a link to its
package), so its generation code is always the code of the run, and only the libraries differ.

A build runs under a lock (two runs never build the same environment), and its marker file
(`evalsuite-env.json`: what was asked, what was installed, when, how long it took) is written
last: a folder without it is a half-built environment, never used, removed by the next build.
`environment: {python: PATH}` names an existing interpreter instead (nothing is built).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import EvalsuiteError
from ..hashing import sha256_json
from ..models.files import cache_root, file_lock

log = logging.getLogger("evalsuite")

ENVS_VAR = "EVALSUITE_ENVS_DIR"
MARKER = "evalsuite-env.json"
BUILD_LOG = "build.log"
#: torch as evalsuite's environment has it (the CPU build, found through pip's configured index)
DEFAULT_TORCH = "torch==2.13.0"
#: bumped when what an environment holds changes, so an older one is not taken for a new one
LAYOUT = 1
#: the libraries an environment reports besides those its requirements name
CORE_LIBRARIES = ("torch", "transformers")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def envs_root() -> Path:
    """Where built environments live: $EVALSUITE_ENVS_DIR, else `<evalsuite cache>/envs`."""
    named = os.environ.get(ENVS_VAR)
    return Path(named).expanduser() if named else cache_root() / "envs"


def requirement_name(req: str) -> str:
    """The distribution a requirement names, normalized (`Transformers[torch]==5.25` -> `transformers`)."""
    m = _NAME.match(req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else req.strip().lower()


def base_requirements() -> list[str]:
    """evalsuite's own dependencies (no extra), as its installed metadata declares them."""
    from importlib import metadata

    try:
        declared = metadata.requires("evalsuite") or []
    except metadata.PackageNotFoundError:
        declared = []
    return sorted(r.split(";")[0].strip() for r in declared if "extra" not in r.partition(";")[2])


@dataclass(frozen=True)
class EnvSpec:
    """An environment to build: the requirements a suite asks for, and all that is installed with them."""

    requirements: tuple[str, ...]  #: as the suite writes them
    install: tuple[str, ...]  #: what pip installs: evalsuite's dependencies, torch, the requirements
    python: str  #: major.minor of the interpreter it is built with

    @classmethod
    def of(cls, requirements: Sequence[str]) -> EnvSpec:
        reqs = tuple(dict.fromkeys(r.strip() for r in requirements if r.strip()))
        if not reqs:
            raise EvalsuiteError("an environment needs at least one requirement")
        named = {requirement_name(r) for r in reqs}
        base = [r for r in base_requirements() if requirement_name(r) not in named]
        torch = [] if "torch" in named else [DEFAULT_TORCH]
        return cls(requirements=reqs, install=(*base, *torch, *reqs), python=f"{sys.version_info[0]}.{sys.version_info[1]}")

    @property
    def digest(self) -> str:
        """The folder's name: what is installed (in any order) and the Python it is built with."""
        return sha256_json({"install": sorted(self.install), "python": self.python, "layout": LAYOUT})[:16]

    def libraries(self) -> tuple[str, ...]:
        """The libraries this environment reports: torch, transformers and those its requirements name."""
        return tuple(dict.fromkeys([*CORE_LIBRARIES, *(requirement_name(r) for r in self.requirements)]))


@dataclass(frozen=True)
class BuiltEnv:
    """An environment on disk (complete or not): what `evalsuite env list` shows."""

    path: Path
    digest: str
    complete: bool  #: its marker is there
    meta: dict  #: the marker's content ({} when incomplete)

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def requirements(self) -> list[str]:
        return list(self.meta.get("requirements") or [])

    def size_bytes(self) -> int:
        """Bytes on disk (allocated blocks, links not followed)."""
        total = 0
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, f)).st_blocks * 512
        return total


def built(digest: str) -> BuiltEnv:
    path = envs_root() / digest
    meta = _read_marker(path)
    return BuiltEnv(path=path, digest=digest, complete=bool(meta), meta=meta)


def _read_marker(path: Path) -> dict:
    try:
        meta = json.loads((path / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def list_envs() -> list[BuiltEnv]:
    """Every environment under `envs_root()`, complete or half-built, oldest first."""
    root = envs_root()
    if not root.is_dir():
        return []
    found = [built(p.name) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(found, key=lambda e: (str(e.meta.get("created") or "~"), e.digest))


def find_env(digest: str) -> BuiltEnv:
    """The environment a digest (or a unique prefix of one) names."""
    envs = list_envs()
    matches = [e for e in envs if e.digest == digest] or [e for e in envs if e.digest.startswith(digest)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(e.digest for e in envs) or "none"
        raise EvalsuiteError(f"no environment {digest!r} under {envs_root()} (built: {known})")
    raise EvalsuiteError(f"{digest!r} names {len(matches)} environments ({', '.join(e.digest for e in matches)}); give more of the digest")


def remove_env(env: BuiltEnv) -> None:
    """Delete an environment, under its build lock (never one that is being built)."""
    with file_lock(_lock_path(env.digest)):
        shutil.rmtree(env.path, ignore_errors=True)
    with contextlib.suppress(OSError):
        _lock_path(env.digest).unlink()


def _lock_path(digest: str) -> Path:
    return envs_root() / f".{digest}.lock"


def build_commands(spec: EnvSpec, target: Path) -> list[list[str]]:
    """The commands that build `spec` into `target`: a virtual environment, then one pip install."""
    python = str(target / "bin" / "python")
    return [
        [sys.executable, "-m", "venv", str(target)],
        [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", *spec.install],
    ]


class EnvBuildError(EvalsuiteError):
    """A build that failed: the requirements it was asked for and the last lines pip printed."""


def ensure_env(spec: EnvSpec, announce: Callable[[str], None] | None = None) -> BuiltEnv:
    """The environment `spec` describes, built now unless it is already (once, under a lock; the
    marker written last). `announce` is told when this process starts building. Raises
    EnvBuildError naming the requirements and pip's last lines when a step fails."""
    env = built(spec.digest)
    if env.complete:
        return env
    with file_lock(_lock_path(spec.digest)):
        env = built(spec.digest)
        if env.complete:  # another process finished it while this one waited
            return env
        if env.path.exists():
            log.info("removing the half-built environment %s", env.path)
            shutil.rmtree(env.path)
        what = ", ".join(spec.requirements)
        (announce or log.info)(f"building environment {spec.digest} ({what}) in {env.path}: a few minutes, once")
        t0 = time.perf_counter()
        try:
            _run_build(spec, env.path)
            versions = probe_versions(str(env.python), spec.libraries())
        except EvalsuiteError:
            shutil.rmtree(env.path, ignore_errors=True)
            raise
        meta = {
            "requirements": list(spec.requirements),
            "install": list(spec.install),
            "python": spec.python,
            "libraries": versions,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "build_s": round(time.perf_counter() - t0, 1),
            "layout": LAYOUT,
        }
        (env.path / MARKER).write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    return built(spec.digest)


def _run_build(spec: EnvSpec, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
        for cmd in build_commands(spec, target):
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
            if proc.returncode != 0:
                out.seek(0)
                tail = "\n".join(ln for ln in out.read().splitlines() if ln.strip())
                tail = "\n".join(tail.splitlines()[-12:])
                raise EnvBuildError(
                    f"building the environment for {', '.join(spec.requirements)} failed ({Path(cmd[0]).name} {cmd[2] if len(cmd) > 2 else ''} exited "
                    f"with {proc.returncode}); its last lines:\n{tail}"
                )


#: run by an environment's interpreter, isolated (-I): the versions it has, by package metadata (nothing imported)
_PROBE = """
import json, sys
from importlib import metadata
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


def probe_versions(python: str, libraries: Sequence[str]) -> dict[str, str | None]:
    """The installed versions of `libraries` in `python`'s environment, read from package metadata
    in a subprocess (a fraction of a second: nothing is imported)."""
    try:
        proc = subprocess.run([python, "-I", "-c", _PROBE, *libraries], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EvalsuiteError(f"the interpreter {python} does not run ({exc})") from None
    if proc.returncode != 0:
        raise EvalsuiteError(f"the interpreter {python} could not report its libraries: {proc.stderr.strip()[-500:]}")
    found: dict[str, str | None] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def interpreter(environment: dict, announce: Callable[[str], None] | None = None) -> tuple[str, EnvSpec | None]:
    """The interpreter a variant's `environment:` runs in (building it if needed), and its spec (None for `python:`)."""
    if environment.get("python"):
        python = os.path.expanduser(str(environment["python"]))
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise EvalsuiteError(f"environment.python: {python} is not an executable file")
        return python, None
    spec = EnvSpec.of(environment.get("requirements") or [])
    return str(ensure_env(spec, announce).python), spec


def built_interpreter(environment: dict) -> str | None:
    """The interpreter of a variant's environment if it exists now (nothing is built), else None."""
    if environment.get("python"):
        python = os.path.expanduser(str(environment["python"]))
        return python if os.path.isfile(python) else None
    env = built(EnvSpec.of(environment.get("requirements") or []).digest)
    return str(env.python) if env.complete else None


def specs_to_build(suite_or_requirements: Sequence[str]) -> list[EnvSpec]:
    """What `evalsuite env build` builds: a suite file's variants' environments (those evalsuite
    builds, once each), or one environment of the requirements given."""
    from ..cases.suite import is_suite_file, load_suite, requirement_problem

    args = list(suite_or_requirements)
    if len(args) == 1 and is_suite_file(args[0]):
        specs = [EnvSpec.of(v.environment["requirements"]) for v in load_suite(args[0]).variants if v.environment and v.environment.get("requirements")]
        if not specs:
            raise EvalsuiteError(f"{args[0]}: no variant has `environment: {{requirements: [...]}}`: nothing to build")
        return list({s.digest: s for s in specs}.values())
    for req in args:
        why = requirement_problem(req)
        if why:
            hint = " (nor a suite file)" if len(args) == 1 else ""
            raise EvalsuiteError(f"{req!r}: {why}{hint}")
    return [EnvSpec.of(args)]


@contextlib.contextmanager
def evalsuite_on_path() -> Iterator[str]:
    """A folder holding only a link to this process's evalsuite package: on a worker's PYTHONPATH,
    it imports the very evalsuite that started it, and nothing else of this environment."""
    import evalsuite

    package = Path(evalsuite.__file__).resolve().parent
    folder = tempfile.mkdtemp(prefix="evalsuite-path-")
    try:
        os.symlink(package, os.path.join(folder, "evalsuite"))
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = [
    "BuiltEnv",
    "EnvBuildError",
    "EnvSpec",
    "base_requirements",
    "build_commands",
    "built",
    "built_interpreter",
    "ensure_env",
    "envs_root",
    "evalsuite_on_path",
    "find_env",
    "interpreter",
    "list_envs",
    "probe_versions",
    "remove_env",
    "requirement_name",
    "specs_to_build",
]
