"""Whether a cleared variant would still run where it was cleared: its environment then and now.

Every run records where each variant's outputs were computed (`Backend.environment`, in the run's
signature: library versions, python, platform, device and driver), and every ledger decision keeps
that record. A clearance is *stale* when the environment the variant would run in now (its backend
built from the cleared block of the resolved suite, asked without loading a model) differs from the
one it was cleared with: a library's version, the device or the driver (with the GPU's name), the
platform, anything else a backend reports (an engine). Python counts by its minor version only: a
patch release fixes the interpreter without changing what the libraries compute (their wheels are
built per minor version). A stale clearance still stands; `evalsuite recheck` judges it again.

It is *unknown*, neither stale nor fresh, when the decision was recorded before environments were
(schema version 1 of the ledger), or when either side does not say which libraries computed the
outputs (an external server: evalsuite cannot see its libraries), or when the environment now cannot
be read (the backend cannot be built here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

EnvironmentState = Literal["fresh", "stale", "unknown"]

#: a variant's resolved-suite block -> (its environment now, or None and why not)
EnvironmentProbe = Callable[[Mapping[str, object]], tuple[dict | None, str]]

ARROW = "→"
UNRECORDED = "cleared before evalsuite recorded environments (a gate of a new run records one)"


@dataclass(frozen=True, kw_only=True)
class EnvironmentCheck:
    """A clearance's environment then and now."""

    state: EnvironmentState
    changes: tuple[str, ...] = ()  #: what changed, one item each: "transformers 5.24.0 → 5.25.0"
    reason: str = ""  #: why it is unknown
    cleared: Mapping[str, object] | None = None  #: the environment it was cleared with
    now: Mapping[str, object] | None = None  #: the environment it would run in now

    @property
    def stale(self) -> bool:
        return self.state == "stale"

    def summary(self) -> str:
        """One line: `stale: transformers 5.24.0 → 5.25.0`, `fresh`, or `environment unknown: why`."""
        if self.state == "stale":
            return "stale: " + "; ".join(self.changes)
        if self.state == "unknown":
            return f"environment unknown: {self.reason}"
        return "fresh"


def _python_minor(version: object) -> str | None:
    return ".".join(str(version).split(".")[:2]) if version else None


def _flat(env: Mapping[str, object]) -> dict[str, object]:
    """name -> value, one level deep: libraries by their own names, other mappings as `key.sub`."""
    out: dict[str, object] = {}
    for key, value in env.items():
        if key == "libraries" and isinstance(value, Mapping):
            out.update({str(k): v for k, v in value.items()})
        elif isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        elif key == "python":
            out["python"] = _python_minor(value)
        else:
            out[key] = value
    return out


def environment_changes(then: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """What differs between two environments, libraries first: `transformers 5.24.0 → 5.25.0`,
    `driver 550.54 → 560.28`, `python 3.11 → 3.12` ("absent" where one side has no value)."""
    a, b = _flat(then), _flat(now)
    lib_then, lib_now = then.get("libraries"), now.get("libraries")
    libs = set(lib_then if isinstance(lib_then, Mapping) else {}) | set(lib_now if isinstance(lib_now, Mapping) else {})
    names = sorted(set(a) | set(b), key=lambda k: (k not in libs, k))
    return [f"{k} {a.get(k) or 'absent'} {ARROW} {b.get(k) or 'absent'}" for k in names if a.get(k) != b.get(k)]


def check_environment(cleared: Mapping[str, object] | None, now: Mapping[str, object] | None, why_not_now: str = "") -> EnvironmentCheck:
    """Compare the environment a variant was cleared with and the one it would run in now."""
    if cleared is None:
        return EnvironmentCheck(state="unknown", reason=UNRECORDED, now=now)
    if now is None:
        return EnvironmentCheck(state="unknown", reason=why_not_now or "its environment now cannot be read", cleared=cleared)
    if not isinstance(cleared.get("libraries"), Mapping) or not isinstance(now.get("libraries"), Mapping):
        where = now.get("server") or cleared.get("server")
        why = f"its outputs come from a server evalsuite does not start ({where}): its libraries are not visible" if where else "no library versions recorded"
        return EnvironmentCheck(state="unknown", reason=why, cleared=cleared, now=now)
    changes = tuple(environment_changes(cleared, now))
    return EnvironmentCheck(state="stale" if changes else "fresh", changes=changes, cleared=cleared, now=now)


def current_environment(spec: Mapping[str, object]) -> tuple[dict | None, str]:
    """The environment a variant (its block of a resolved suite) would run in now, asked of its backend
    without loading a model; (None, why) when the backend cannot be built or cannot say."""
    from ..backends.base import make_backend
    from ..cases.suite import Variant

    try:
        backend = make_backend(Variant.from_dict(dict(spec)))
        try:
            return backend.environment(), ""
        finally:
            backend.close()
    except Exception as exc:  # noqa: BLE001 - an unknown environment is shown as such, never a crash of `releases`
        return None, f"its environment now cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
