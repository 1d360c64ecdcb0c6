"""Fake-backend `function`s the Ray tests run inside actors (importable there through PYTHONPATH)."""

from __future__ import annotations

import os

#: env var naming a marker file: when it exists and holds this request's case id, the process dies
CRASH_MARKER = "EVALSUITE_TEST_CRASH_MARKER"


def text_or_die(req) -> str:
    """The answer for `req`, unless the crash marker names its case: then remove the marker (once,
    atomically: only the first caller wins the unlink) and kill this process mid-batch."""
    marker = os.environ.get(CRASH_MARKER)
    if marker and os.path.exists(marker):
        with open(marker, encoding="utf-8") as fh:
            target = fh.read().strip()
        if target == req.case_id:
            try:
                os.unlink(marker)
            except FileNotFoundError:
                pass
            else:
                os._exit(17)  # no cleanup, no exception: the actor process is simply gone
    return f"answer {req.case_id} s{req.sample}"
