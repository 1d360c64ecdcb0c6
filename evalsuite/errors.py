"""Errors that name the file, the line, the case and the field, so a user can fix input at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def close_matches(name: object, options: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The options closest to `name`, best first (difflib's ratio, at least `cutoff`)."""
    import difflib

    return difflib.get_close_matches(str(name), list(options), n=n, cutoff=cutoff)


def suggest(name: object, options: Iterable[str], *, n: int = 1, cutoff: float = 0.6, quote: bool = True) -> str:
    """` (did you mean 'x'?)` naming the options closest to `name`, or "" when none is close: the one
    spelling of every close-match hint (unknown fields, names, kinds, variants)."""
    close = close_matches(name, options, n=n, cutoff=cutoff)
    if not close:
        return ""
    return f" (did you mean {', '.join(repr(c) if quote else c for c in close)}?)"


class EvalsuiteError(Exception):
    """Base class for errors evalsuite reports to the user (no traceback needed)."""


@dataclass(frozen=True)
class Problem:
    """One problem found in an input file."""

    file: str
    line: int | None
    case_id: str | None
    field: str
    message: str
    subject: str = "case"  #: what `case_id` names: a case, or a suite's variant ("variant b: backend: ...")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        case = f" {self.subject} {self.case_id}:" if self.case_id else ""
        return f"{where}:{case} {self.field}: {self.message}"


class ValidationError(EvalsuiteError):
    """Raised when input files have problems; carries every problem found, not only the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UnknownNameError(EvalsuiteError, KeyError):
    """An unknown registered name; the message lists close matches and what is available."""

    def __init__(self, kind: str, name: str, available: list[str]):
        close = close_matches(name, available, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        msg = f"unknown {kind} {name!r}.{hint} Available: {', '.join(sorted(available))}"
        super().__init__(msg)
        self.args = (msg,)

    def __str__(self) -> str:
        return self.args[0]


class MissingExtraError(EvalsuiteError, ImportError):
    """A feature needs an optional dependency that is not installed."""

    def __init__(self, feature: str, extra: str, missing: str):
        super().__init__(f"{feature} needs the optional package {missing!r}: pip install 'evalsuite[{extra}]'")
