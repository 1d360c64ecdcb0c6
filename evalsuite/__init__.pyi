"""The public API's real types, for mypy and editors (evalsuite/__init__.py imports each name on first use).

The names are `_EXPORTS` of __init__.py; tests/test_api_types.py checks this stub re-exports the same objects.
"""

from .cases.suite import Suite as Suite
from .cases.suite import load_suite as load_suite
from .errors import EvalsuiteError as EvalsuiteError
from .judge import judge_run as judge_run
from .report.api import ReportResult as ReportResult
from .report.api import write_report as write_report
from .review.api import FlagResult as FlagResult
from .review.api import flag_run as flag_run
from .run import open_run as open_run
from .run.runner import RunOptions as RunOptions
from .run.runner import RunResult as RunResult
from .run.store import RunStore as RunStore
from .scoring.pipeline import run_suite as run_suite
from .states import ExitCode as ExitCode
from .verdict.outcome import Judgment as Judgment
from .verdict.outcome import Verdict as Verdict

__version__: str
_EXPORTS: dict[str, str]
__all__: list[str]

def __dir__() -> list[str]: ...
