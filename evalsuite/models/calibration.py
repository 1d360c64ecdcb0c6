"""Calibration text for the quantizers that need it (GPTQ, AWQ, llm-compressor's GPTQ): the case sets' documents and prompts."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import EvalsuiteError

log = logging.getLogger("evalsuite")

#: used when no case set is found: a few generic sentences, better than nothing
FALLBACK_CALIBRATION = (
    "The quarterly report summarises revenue, costs and the outlook for the next year.",
    "To reset your password, open the self-service portal and follow the instructions.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Our products are designed for teams that value clarity, speed and reliability.",
    "员工可以通过公司门户网站提交休假申请，并由直属经理审批。",
)


def calibration_texts(source: str | os.PathLike | Sequence[str] | None, limit: int = 64) -> list[str]:
    """Calibration text for GPTQ: the context documents (and prompts) of the case sets at `source`.

    `source` is a case-set path or directory (or a list of them); default `casesets/` in the working
    directory. The texts are sorted by content, so the result does not depend on file order.
    """
    paths: list[str] = []
    if source is None:
        if Path("casesets").is_dir():
            paths = ["casesets"]
    elif isinstance(source, (str, os.PathLike)):
        paths = [str(source)]
    else:
        paths = [str(s) for s in source]
    texts: set[str] = set()
    if paths:
        from ..cases.caseset import all_cases, load_cases

        try:
            cases = all_cases(load_cases(paths))
        except EvalsuiteError as exc:
            raise EvalsuiteError(f"cannot read the GPTQ calibration case sets {paths}: {exc}") from exc
        # the long-context set's large document pool would displace the other sets' texts from the
        # hash-ordered sample, changing the calibration (hence the weights) of every existing GPTQ
        # variant: its cases count only where they are all there is; the tool_use set (added later)
        # likewise, for the same reason
        cases = [c for c in cases if "long" not in c.tags and c.scenario != "tool_use"] or cases
        for c in cases:
            for d in c.context:
                texts.add(f"{d.title}\n{d.text.strip()}")
            if c.prompt:
                texts.add(c.prompt.strip())
    if not texts:
        log.warning("no case-set text for GPTQ calibration (looked at %s): using built-in sentences", paths or "casesets/")
        texts = set(FALLBACK_CALIBRATION)
    ordered = sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    return ordered[:limit]
