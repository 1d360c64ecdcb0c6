"""One batch through a backend, for the runner: bounded by a hard limit when the suite sets
`timeout_s`, each answer checked to be the Generation of its request, and a failing batch retried one
request at a time so a failure is recorded against its own case."""

from __future__ import annotations

import logging
import threading

from ..backends.base import Backend, Generation, Request
from ..cases.suite import Variant
from ..errors import EvalsuiteError

log = logging.getLogger("evalsuite")


class HardTimeout(Exception):
    """The backend did not return within the runner's hard limit (it ignored `timeout_s`)."""


def hard_limit_s(timeout_s: float, batch_size: int, backend: Backend | None = None) -> float:
    """The runner's backstop for a batch: generous, because backends enforce `timeout_s` themselves
    (per request or per batch) and report partial work; this only stops one that hangs. A backend's
    own longer per-request bound (`Backend.deadline_s`: http's timeout and its retries' deadline) counts."""
    own = backend.deadline_s() if backend is not None else None
    per_request = max(timeout_s, float(own)) if own is not None else timeout_s
    return 1.5 * per_request * batch_size + 0.5


def _call_backend(backend: Backend, batch: list[Request], variant: Variant) -> list:
    """`backend.generate(batch)`, bounded by `hard_limit_s` when the suite sets `timeout_s`.

    The call runs in a daemon thread that is abandoned past the limit: Python cannot kill a thread,
    so a wedged call keeps its thread (and whatever it holds) until the backend is closed.
    """
    timeout = variant.generation.timeout_s
    if timeout is None:
        return backend.generate(batch)
    limit = hard_limit_s(float(timeout), len(batch), backend)
    box: dict = {}

    def call() -> None:
        try:
            box["gens"] = backend.generate(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the runner's thread below
            box["exc"] = exc

    worker = threading.Thread(target=call, name=f"evalsuite-generate-{variant.name}", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise HardTimeout(f"backend {variant.backend} did not return within {limit:g}s (timeout_s {timeout:g}, batch of {len(batch)})")
    if "exc" in box:
        raise box["exc"]
    return box["gens"]


def _checked(g: object, req: Request, variant: Variant) -> Generation:
    """The backend's answer to `req`, or an error generation saying what was wrong with it:
    garbage is recorded against its case, never stored (or cached, or scored) as an output."""
    if not isinstance(g, Generation):
        problem = f"a {type(g).__name__}, not a Generation"
    elif (g.case_id, g.sample) != (req.case_id, req.sample):
        problem = f"the answer of case {g.case_id!r} sample {g.sample!r} for case {req.case_id!r} sample {req.sample}"
    elif not isinstance(g.text, str):
        problem = f"text of type {type(g.text).__name__}, not str"
    else:
        return g
    log.warning("case %s sample %d on %s: backend returned garbage: %s", req.case_id, req.sample, variant.name, problem)
    return Generation(req.case_id, variant.name, req.sample, error=f"backend returned garbage: {problem}", finish_reason="error")


def generate_batch(backend: Backend, batch: list[Request], variant: Variant) -> list[Generation]:
    """Generate a batch; on a batch-level failure retry one by one, recording each failure."""
    try:
        gens = _call_backend(backend, batch, variant)
        if not isinstance(gens, (list, tuple)):
            raise EvalsuiteError(f"backend {variant.backend} returned a {type(gens).__name__}, not a list of generations")
        if len(gens) != len(batch):
            raise EvalsuiteError(f"backend {variant.backend} returned {len(gens)} generations for {len(batch)} requests")
        return [_checked(g, req, variant) for g, req in zip(gens, batch)]
    except Exception as exc:  # noqa: BLE001 - a failing case (raise, out of memory, hang, garbage) must not stop the run
        if len(batch) > 1:
            log.warning("batch of %d failed on %s (%s); retrying one by one", len(batch), variant.name, exc)
            out = []
            for req in batch:
                out.extend(generate_batch(backend, [req], variant))
            return out
        req = batch[0]
        log.warning("case %s sample %d failed on %s: %s", req.case_id, req.sample, variant.name, exc)
        if isinstance(exc, HardTimeout):
            return [Generation(req.case_id, variant.name, req.sample, error=str(exc), timeout=True, finish_reason="timeout")]
        return [Generation(req.case_id, variant.name, req.sample, error=f"{type(exc).__name__}: {exc}", finish_reason="error")]
