"""The fake backend: scripted outputs, injectable errors and delays. First class: most tests use it.

Options (under a variant's `options`):

- `outputs`:  {case_id: text, or a list of texts indexed by sample}
- `default`:  text for other cases; `{case_id}` and `{sample}` are filled in
- `function`: "module:attr" of a callable(request) -> text (wins over `default`)
- `tool_calls`: {case_id: [{name, arguments}, ...]}: the calls a backend that parses them would
  return beside the text (`Generation.tool_calls`; `[]`: it looked and found none)
- `errors`:   {case_id: message}: generating that case raises (the whole batch fails, as a real
  backend would; the runner then retries the batch's requests one by one)
- `delay_s`:  seconds per request (a number, or {case_id: seconds}); past the suite's
  `timeout_s` the request is reported as a timeout
- `load_s`:   seconds the "model" takes to load (once, on `load()` or the first generate), as a
  real backend's weights do
- `compile_s`: seconds the "model" then takes to compile and warm up (once, after the load), as a
  compiled variant's first forward does; reported by `compile_s()`, apart from the load
- `refuse`:   a message: loading fails with it, as a library refusing a variant's settings on this
  machine does (the backend's `load_error`: the variant cannot be judged)
- `call_log`: path of a file that gets one line per generated request (tests count calls with it)
- `engine_metrics`: a scripted summary of the engine's own counters (as the vllm backend's
  `engine_metrics()` returns it: requests, ttft_mean_s, prefix_cache_hit_rate, ...)
- `cost`:     scripted cost records, linear in the prompt's words (`extra["cost"]`, as the
  transformers backend measures them: evalsuite.perf.context): `{prefill_s_per_1k, peak_memory_mb,
  memory_mb_per_1k, kv_bytes_per_token}`, each optional (0 when left out)
- `faults`:   {case_id: kind}: fault injection for reliability tests. Kinds that fail the whole
  batch, as a real backend would: `raise` (RuntimeError), `oom` (MemoryError), `cuda_oom` (an
  error shaped like torch's CUDA OutOfMemoryError), `hang` (blocks, ignoring `timeout_s`, until
  the backend is closed: the runner's hard limit must stop it), `wrong_count` (one generation
  too few). Kinds that spoil that request's answer only: `none_text`, `non_str` (an int),
  `not_generation` (a dict), `other_case` (the answer of another case id)

Two environment variables stand in for an engine upgrade (tests of `evalsuite releases` and
`evalsuite recheck`), neither part of the fingerprint, as a library version is not part of a fake's:

- `EVALSUITE_FAKE_ENVIRONMENT`: JSON merged over the environment the fake reports
  (`Backend.environment`: evalsuite's own process), e.g. `{"libraries": {"transformers": "5.25.0"}}`
- `EVALSUITE_FAKE_OUTPUTS`: JSON `{variant: {case_id: text}}`: these outputs win over the variant's
  scripted `outputs` (what the upgraded engine now answers)
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from ..errors import EvalsuiteError
from .base import Backend, Generation, Request, local_environment
from .toolcalls import ToolCall, parse_text_calls

FAULTS = ("raise", "oom", "cuda_oom", "hang", "wrong_count", "none_text", "non_str", "not_generation", "other_case")


ENVIRONMENT_VAR = "EVALSUITE_FAKE_ENVIRONMENT"
OUTPUTS_VAR = "EVALSUITE_FAKE_OUTPUTS"


def _json_var(name: str) -> dict:
    """A JSON mapping from an environment variable ({} when unset); anything else is refused by name."""
    raw = os.environ.get(name)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise EvalsuiteError(f"${name}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise EvalsuiteError(f"${name}: must be a JSON mapping, got {type(value).__name__}")
    return value


class SimulatedCudaOOM(RuntimeError):
    """Shaped like torch.cuda.OutOfMemoryError (a RuntimeError subclass) without importing torch."""


class FakeBackend(Backend):
    name = "fake"

    def __init__(self, variant):
        self.variant = variant
        self.options = dict(variant.options or {})
        self.calls = 0
        self._compile_s: float | None = None  #: the scripted compile time, once loaded
        self._released = threading.Event()  #: set by close(): lets `hang` faults return
        self.faults = dict(self.options.get("faults") or {})
        bad = {k: v for k, v in self.faults.items() if v not in FAULTS}
        if bad:
            raise EvalsuiteError(f"variant {variant.name!r}: unknown fake fault(s) {bad}; known: {', '.join(FAULTS)}")
        fn = self.options.get("function")
        self._fn = None
        if fn:
            module, _, attr = fn.partition(":")
            self._fn = getattr(importlib.import_module(module), attr)

    def fingerprint(self) -> str:
        return self.variant.fingerprint({"fake": 1})

    def engine_identity(self) -> dict:
        """The engine for the report's engine column: scripted outputs, no version."""
        return {"engine": "fake"}

    def environment(self) -> dict:
        """evalsuite's own process, with `$EVALSUITE_FAKE_ENVIRONMENT` merged over it (a test's upgrade)."""
        env = local_environment()
        extra = _json_var(ENVIRONMENT_VAR)
        for key, value in extra.items():
            env[key] = {**(env.get(key) or {}), **value} if isinstance(value, dict) and isinstance(env.get(key), dict) else value
        return env

    def engine_metrics(self) -> dict | None:
        """The scripted `engine_metrics` option (None without one), as a vLLM engine's would be read."""
        scripted = self.options.get("engine_metrics")
        return dict(scripted) if scripted is not None else None

    def _text(self, req: Request) -> str:
        drifted = (_json_var(OUTPUTS_VAR).get(self.variant.name) or {}).get(req.case_id)
        scripted = drifted if drifted is not None else self.options.get("outputs", {}).get(req.case_id)
        if scripted is not None:
            if isinstance(scripted, list):
                return scripted[req.sample % len(scripted)]
            return scripted
        if self._fn is not None:
            return self._fn(req)
        default = self.options.get("default", "fake output for {case_id}")
        return default.format(case_id=req.case_id, sample=req.sample)

    def _delay(self, req: Request) -> float:
        d = self.options.get("delay_s", 0.0)
        if isinstance(d, dict):
            return float(d.get(req.case_id, 0.0))
        return float(d)

    def load(self) -> None:
        if self.options.get("refuse"):
            from ..errors import EvalsuiteError

            self.load_error = f"variant {self.variant.name!r}: {self.options['refuse']}"
            raise EvalsuiteError(self.load_error)
        if not getattr(self, "_loaded", False):
            time.sleep(float(self.options.get("load_s", 0.0)))
            t0 = time.perf_counter()
            time.sleep(float(self.options.get("compile_s", 0.0)))
            self._compile_s = time.perf_counter() - t0 if "compile_s" in self.options else None
            self._loaded = True

    def compile_s(self) -> float | None:
        """The scripted compile time (`compile_s`), once loaded; None without one."""
        return self._compile_s

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        self.load()
        errors = self.options.get("errors", {})
        failing = [r.case_id for r in requests if r.case_id in errors]
        if failing:
            raise RuntimeError(f"injected error for {failing[0]}: {errors[failing[0]]}")
        self._batch_faults(requests)
        out = self._generate(requests)
        return self._spoil(requests, out)

    def _batch_faults(self, requests: Sequence[Request]) -> None:
        for r in requests:
            kind = self.faults.get(r.case_id)
            if kind == "raise":
                raise RuntimeError(f"injected fault for {r.case_id}")
            if kind == "oom":
                raise MemoryError(f"injected out of memory for {r.case_id}")
            if kind == "cuda_oom":
                raise SimulatedCudaOOM(f"CUDA out of memory. Tried to allocate 2.00 GiB (injected for {r.case_id})")
            if kind == "hang":
                self._released.wait(3600)  # a wedged backend: ignores the suite's timeout
                raise RuntimeError(f"hung request for {r.case_id} released by close()")

    def _spoil(self, requests: Sequence[Request], out: list) -> list:
        kinds = [self.faults.get(r.case_id) for r in requests]
        if "wrong_count" in kinds:
            return out[:-1]
        spoiled = []
        for r, g, kind in zip(requests, out, kinds):
            if kind == "none_text":
                g = replace(g, text=None)
            elif kind == "non_str":
                g = replace(g, text=12345)
            elif kind == "not_generation":
                g = g.to_dict()
            elif kind == "other_case":
                g = replace(g, case_id=r.case_id + "-other")
            spoiled.append(g)
        return spoiled

    def _generate(self, requests: Sequence[Request]) -> list[Generation]:
        timeout = self.variant.generation.timeout_s
        out = []
        for req in requests:
            t0 = time.perf_counter()
            delay = self._delay(req)
            if timeout is not None and delay > timeout:
                time.sleep(timeout)
                out.append(
                    Generation(
                        req.case_id,
                        self.variant.name,
                        req.sample,
                        error=f"timed out after {timeout}s",
                        timeout=True,
                        finish_reason="timeout",
                        latency_s=time.perf_counter() - t0,
                        batch_size=len(requests),
                    )
                )
                continue
            if delay:
                time.sleep(delay)
            text = self._text(req)
            self.calls += 1
            log = self.options.get("call_log")
            if log:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(f"{self.variant.name}\t{req.case_id}\t{req.sample}\t{os.getpid()}\n")
            latency = time.perf_counter() - t0
            ntok = len(text.split())
            prompt_tokens = sum(len(m[1].split()) for m in req.messages)
            out.append(
                Generation(
                    case_id=req.case_id,
                    variant=self.variant.name,
                    sample=req.sample,
                    text=text,
                    prompt_tokens=prompt_tokens,
                    new_tokens=ntok,
                    latency_s=latency,
                    ttft_s=latency,
                    tokens_per_s=ntok / latency if latency > 0 else None,
                    finish_reason="stop",
                    batch_size=len(requests),
                    extra=self._cost(prompt_tokens, ntok)
                    | ({"tools_received": [t["function"]["name"] for t in req.tool_list() or []]} if req.tools is not None else {}),
                    tool_calls=self._calls(req, text),
                )
            )
        return out

    def passes_tools(self) -> bool:
        """The fake takes tools natively (`tools: native`): it parses the calls in its scripted text, as a server would."""
        return True

    def _calls(self, req: Request, text: str) -> tuple[ToolCall, ...] | None:
        """The scripted parsed calls of a case (option `tool_calls`); with tools passed natively, the
        calls in its text; else None (the scorers parse the text)."""
        scripted = (self.options.get("tool_calls") or {}).get(req.case_id)
        if scripted is None:
            return parse_text_calls(text) if req.tools is not None else None
        return tuple(ToolCall(id=c.get("id"), name=c["name"], arguments=c.get("arguments"), raw=c.get("raw", ""), error=c.get("error")) for c in scripted)

    def _cost(self, prompt_tokens: int, new_tokens: int) -> dict:
        """The scripted cost record of a generation (option `cost`), or none."""
        c = self.options.get("cost")
        if not c:
            return {}
        k = prompt_tokens / 1000.0
        kv = c.get("kv_bytes_per_token")
        return {
            "cost": {
                "prefill_s": float(c.get("prefill_s_per_1k", 0.0)) * k,
                "peak_memory_mb": float(c.get("peak_memory_mb", 0.0)) + float(c.get("memory_mb_per_1k", 0.0)) * k,
                "kv_cache_bytes": int(kv * (prompt_tokens + new_tokens)) if kv is not None else None,
                "kv_cache_tokens": prompt_tokens + new_tokens,
                "context_tokens": prompt_tokens,
            }
        }

    def close(self) -> None:
        self._released.set()
