"""The compile layer of a transformers variant: `options.compile` (`torch.compile` of the model's
forward, decoding with a static KV cache) and `options.attn_implementation` (the attention kernel
`from_pretrained` builds the model with). Both are settings of evalsuite.cases.compile_options.

The backend warms such a variant up when its model loads: one short generation with the variant's
batch size and settings, so that the graphs are compiled (and a kernel the library cannot build
here fails) before the runner's clock starts. Its seconds are the variant's `compile_s`, apart from
the load and from the timed generation; the recompilations torch makes later (a longer prompt than
the static cache holds, a smaller last batch) are added to it as they happen.

A setting the library refuses on this machine is a refusal of the variant, with the library's own
message (never a fallback to the uncompiled model or to another kernel): transformers refusing an
attention implementation, torch unable to compile, a mode that captures CUDA graphs on a machine
without CUDA (torch is asked to raise rather than skip the graphs: `triton.cudagraph_or_error`),
or transformers skipping compilation because the model does not meet its criteria.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..cases.compile_options import TorchCompile, parse_attn, parse_compile
from ..errors import EvalsuiteError

#: how many tokens the warm-up generates: the first decode step compiles the graph, the next ones
#: the recompilation torch makes once the attention mask's length varies (dynamic shapes)
WARM_UP_TOKENS = 4


@dataclass(frozen=True)
class CompileLayer:
    """A transformers variant's compile-layer settings (both None: the baseline's eager forward, the
    model's default attention)."""

    compile: TorchCompile | None = None
    attn_implementation: str | None = None

    @classmethod
    def from_options(cls, options: dict, who: str) -> CompileLayer:
        """The settings of a variant's `options` (validated: errors name the variant and the field)."""
        return cls(compile=parse_compile(options.get("compile"), who), attn_implementation=parse_attn(options.get("attn_implementation"), who))

    @property
    def active(self) -> bool:
        """Anything to warm up (and to refuse) when the model loads."""
        return self.compile is not None or self.attn_implementation is not None

    def load_kwargs(self) -> dict:
        """Keyword arguments of `from_pretrained` for these settings."""
        return {"attn_implementation": self.attn_implementation} if self.attn_implementation else {}

    def generate_kwargs(self, device: str) -> dict:
        """Keyword arguments of `model.generate` compiling the decoding forward (none without `compile`)."""
        if self.compile is None:
            return {}
        from transformers import CompileConfig

        c = self.compile
        config = CompileConfig(fullgraph=c.fullgraph, dynamic=c.dynamic, mode=c.mode)
        if not device.startswith("cuda"):
            # transformers compiles on CUDA (and a few accelerators) only, unless told to compile on
            # every device: the flag its CompileConfig keeps for that
            config._compile_all_devices = True  # type: ignore[assignment]  # declared None, read as a flag
        out: dict[str, Any] = {"cache_implementation": "static", "compile_config": config}
        if c.max_cache_len is not None:
            out["max_cache_len"] = c.max_cache_len
        return out

    def describe(self) -> list[str]:
        """The engine column's words: `compile=default`, `attn=sdpa`."""
        return ([self.compile.describe()] if self.compile else []) + ([f"attn={self.attn_implementation}"] if self.attn_implementation else [])


def compiled_seconds() -> float:
    """Seconds torch's compiler has spent in this process so far (every frame Dynamo compiled)."""
    from torch._dynamo.utils import compilation_time_metrics

    return float(sum(compilation_time_metrics.get("_compile.compile_inner", [])))


def refusal(layer: CompileLayer, who: str, exc: BaseException | str) -> EvalsuiteError:
    """The error refusing a variant whose compile layer the library cannot run here, naming the
    option it is about and carrying the library's own message."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    text = " ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())[:1500]
    attn_words = ("attn", "attention", "flash", "flex")
    about_attn = layer.attn_implementation is not None and (layer.compile is None or any(w in text.lower() for w in attn_words))
    if about_attn:
        where = f"options.attn_implementation = {layer.attn_implementation!r}"
    else:
        assert layer.compile is not None
        where = f"options.compile.mode = {layer.compile.mode!r}"
    return EvalsuiteError(f"variant {who!r}: {where} cannot run here: {text}")


@contextlib.contextmanager
def _strict(layer: CompileLayer) -> Iterator[list[str]]:
    """While warming up: torch raises instead of skipping CUDA graphs, and transformers' notice that
    it skips compilation is caught (yielded), so neither becomes a silent fallback."""
    notices: list[str] = []

    class _Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "compil" in record.getMessage():
                notices.append(record.getMessage())

    handler = _Catch(logging.WARNING)
    logger = logging.getLogger("transformers.generation.utils")
    logger.addHandler(handler)
    try:
        if layer.compile is not None and layer.compile.cudagraphs:
            import torch._inductor.config as inductor_config

            with inductor_config.patch({"triton.cudagraph_or_error": True}):
                yield notices
        else:
            yield notices
    finally:
        logger.removeHandler(handler)


def warm_up(model: Any, layer: CompileLayer, *, who: str, pad_token_id: int | None, batch_size: int, device: str) -> float:
    """One short generation with the variant's settings and batch size, so the forward is compiled
    (and the attention kernel built) before the timed generation; returns its seconds. Raises the
    variant's refusal (`refusal`) when the library cannot run the settings here."""
    import torch

    ids = torch.ones((max(1, batch_size), 8), dtype=torch.long, device=model.device)
    before = compiled_seconds() if layer.compile is not None else 0.0
    t0 = time.perf_counter()
    try:
        with _strict(layer) as notices, torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=WARM_UP_TOKENS,
                min_new_tokens=WARM_UP_TOKENS,
                do_sample=False,
                pad_token_id=pad_token_id,
                **layer.generate_kwargs(device),
            )
    except Exception as exc:  # noqa: BLE001 - the library's refusal, whatever its type, becomes the variant's
        raise refusal(layer, who, exc) from exc
    if layer.compile is not None and compiled_seconds() <= before:
        why = notices[-1] if notices else "transformers ran the forward uncompiled"
        raise refusal(layer, who, f"transformers did not compile the forward: {why}")
    return time.perf_counter() - t0


def check_combination(layer: CompileLayer, *, kv_cache_default: bool, quant_method: str | None, who: str) -> None:
    """Settings the backend cannot combine with the compile layer, refused before anything loads."""
    if layer.compile is not None and not kv_cache_default:
        raise EvalsuiteError(f"variant {who!r}: options.compile decodes with the static cache: it cannot be combined with `kv_cache`")
    if layer.attn_implementation and quant_method == "gptq":
        raise EvalsuiteError(f"variant {who!r}: options.attn_implementation: gptqmodel loads GPTQ checkpoints with its own attention")


class CompileRun:
    """One transformers variant's compile layer while it runs: the model loaded under it, the warm-up,
    the recompilations torch makes later (`seconds`), and the refusal, kept once made (every later
    load raises it again: the variant is never generated with another setting)."""

    def __init__(self, layer: CompileLayer, who: str) -> None:
        self.layer = layer
        self.who = who
        self.seconds: float | None = None  #: warm-up plus recompilations since (None: nothing warmed up)
        self.refused: EvalsuiteError | None = None

    def check(self) -> None:
        """Raise the refusal, once made."""
        if self.refused is not None:
            raise self.refused

    def _refuse(self, exc: EvalsuiteError) -> EvalsuiteError:
        self.refused = exc
        return exc

    def load(self, load_model: Callable[[], Any]) -> Any:
        """`load_model()`, an error of the library's with `attn_implementation` set refusing the variant."""
        try:
            return load_model()
        except EvalsuiteError:
            raise  # evalsuite's own (a checkpoint to build, a package to install): not the library's refusal
        except Exception as exc:
            if not self.layer.attn_implementation:
                raise
            raise self._refuse(refusal(CompileLayer(attn_implementation=self.layer.attn_implementation), self.who, exc)) from exc

    def warm_up(self, model: Any, *, pad_token_id: int | None, batch_size: int, device: str) -> None:
        """Warm the model up (`warm_up`) when the layer has anything to warm; a failure refuses the variant."""
        if not self.layer.active:
            return
        try:
            self.seconds = warm_up(model, self.layer, who=self.who, pad_token_id=pad_token_id, batch_size=batch_size, device=device)
        except EvalsuiteError as exc:
            raise self._refuse(exc) from exc.__cause__

    @contextlib.contextmanager
    def batch(self) -> Iterator[dict]:
        """Around one timed `generate`: a recompilation inside it is added to `seconds` and its own
        seconds put in the yielded dict (`recompile_s`, for the batch's `extra`)."""
        facts: dict = {}
        if self.layer.compile is None:
            yield facts
            return
        before = compiled_seconds()
        yield facts
        recompiled = compiled_seconds() - before
        if recompiled > 0:  # a shape the warm-up did not cover: torch compiled again inside this batch
            self.seconds = (self.seconds or 0.0) + recompiled
            facts["recompile_s"] = round(recompiled, 3)
