"""A variant's compile layer: the backend options that change how the same weights are executed
(graph compilation, the attention kernel, batch invariance), not what is computed from them.

- transformers: `options: {compile: {mode: default}}` (`torch.compile` of the forward, with a
  static KV cache) and `options: {attn_implementation: sdpa}` (passed to `from_pretrained`);
- vllm: `options: {enforce_eager: false, compilation_config: {...}}` (passed to `vllm.LLM`) and
  `options: {batch_invariant: true}` (`VLLM_BATCH_INVARIANT=1` in the engine's environment).

Parsed here, beneath the suite loader and the backends, so a bad value is refused when the suite
loads (`variant 'x': options.compile.mode: ...`) and both sides read it the same way. Changing only
these options is the change category `compile` (`compute_changes`), apart from `backend`.
Imports neither torch nor vllm: what the library refuses on this machine is the backend's to find.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EvalsuiteError, suggest

#: torch.compile's modes (`torch._inductor.list_mode_options`)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: modes that capture CUDA graphs: on a machine without CUDA, torch skips the graphs, and evalsuite
#: asks torch to raise instead (its `triton.cudagraph_or_error`), so the variant is refused
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
#: transformers' attention implementations (`attn_implementation` of `from_pretrained`)
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")
_COMPILE_KEYS = ("mode", "fullgraph", "dynamic", "max_cache_len")
#: per backend, its options that belong to the compile layer
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "transformers": ("compile", "attn_implementation"),
    "vllm": ("enforce_eager", "compilation_config", "batch_invariant"),
}
#: every compile-layer option, whichever backend takes it
COMPILE_OPTIONS = tuple(dict.fromkeys(k for keys in BACKEND_OPTIONS.values() for k in keys))
#: what a variant changes against its baseline when it changes one of these (compute_changes)
CATEGORY = "compile"
_HINTS = {
    "vllm": "vLLM compiles unless `enforce_eager: true`; its settings are `compilation_config`",
    "transformers": "transformers takes `compile: {mode: ...}` and `attn_implementation`",
}


@dataclass(frozen=True)
class TorchCompile:
    """`torch.compile` of a transformers model's forward (transformers' `CompileConfig`), decoding
    with a static KV cache of `max_cache_len` positions (None: sized by the longest call so far)."""

    mode: str = "default"
    fullgraph: bool = False
    dynamic: bool | None = None
    max_cache_len: int | None = None

    @property
    def cudagraphs(self) -> bool:
        """The mode captures CUDA graphs."""
        return self.mode in CUDAGRAPH_MODES

    def describe(self) -> str:
        """`compile=default` (with `fullgraph` when set): the engine column's words."""
        return f"compile={self.mode}" + (" fullgraph" if self.fullgraph else "")


def parse_compile(raw: object, who: str) -> TorchCompile | None:
    """A transformers variant's `options.compile` (a mapping; `{}` is mode default) as settings;
    errors name the variant and the field."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"variant {who!r}: options.compile: expected a mapping such as {{mode: default}}, got {raw!r}")
    for k in raw:
        if k not in _COMPILE_KEYS:
            raise EvalsuiteError(f"variant {who!r}: options.compile.{k}: unknown setting{suggest(k, _COMPILE_KEYS)}; known: {', '.join(_COMPILE_KEYS)}")
    mode = raw.get("mode", "default")
    if mode not in COMPILE_MODES:
        raise EvalsuiteError(
            f"variant {who!r}: options.compile.mode: unknown mode {mode!r}{suggest(mode, COMPILE_MODES)}; available: {', '.join(COMPILE_MODES)}"
        )
    for k in ("fullgraph", "dynamic"):
        if k in raw and not isinstance(raw[k], bool) and not (k == "dynamic" and raw[k] is None):
            raise EvalsuiteError(f"variant {who!r}: options.compile.{k}: expected true or false, got {raw[k]!r}")
    length = raw.get("max_cache_len")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
        raise EvalsuiteError(f"variant {who!r}: options.compile.max_cache_len: expected a positive integer, got {length!r}")
    return TorchCompile(mode=mode, fullgraph=bool(raw.get("fullgraph", False)), dynamic=raw.get("dynamic"), max_cache_len=length)


def parse_attn(raw: object, who: str) -> str | None:
    """A transformers variant's `options.attn_implementation`, checked against transformers' names."""
    if raw is None:
        return None
    if raw not in ATTN_IMPLEMENTATIONS:
        raise EvalsuiteError(
            f"variant {who!r}: options.attn_implementation: unknown implementation {raw!r}{suggest(raw, ATTN_IMPLEMENTATIONS)}; "
            f"available: {', '.join(ATTN_IMPLEMENTATIONS)}"
        )
    return str(raw)


def check_vllm_compile(options: dict, who: str) -> None:
    """A vllm variant's compile-layer options: `enforce_eager` and `batch_invariant` are booleans,
    `compilation_config` a mapping (or vLLM's integer level); vLLM checks their contents at start."""
    for k in ("enforce_eager", "batch_invariant"):
        if k in options and not isinstance(options[k], bool):
            raise EvalsuiteError(f"variant {who!r}: options.{k}: expected true or false, got {options[k]!r}")
    cc = options.get("compilation_config")
    if cc is not None and (isinstance(cc, bool) or not isinstance(cc, (dict, int))):
        raise EvalsuiteError(f"variant {who!r}: options.compilation_config: expected a mapping of vLLM's CompilationConfig fields, got {cc!r}")
    if options.get("enforce_eager") is True and cc is not None:
        raise EvalsuiteError(f"variant {who!r}: options.compilation_config: vLLM does not compile with `enforce_eager: true` (set it false to compile)")


def compile_problems(backend: str, options: dict, kv_cache: dict | None, who: str) -> list[tuple[str, str]]:
    """(field, message) of each problem of a variant's compile-layer options, for the suite loader:
    an option its backend does not take, or a value the backend would refuse."""
    out: list[tuple[str, str]] = []
    taken = BACKEND_OPTIONS.get(backend)
    if taken is None:
        return out  # fake, http: the backend's own option check answers
    for k in COMPILE_OPTIONS:
        if k in options and k not in taken:
            out.append((f"options.{k}", f"the {backend} backend does not take `{k}` ({_HINTS[backend]})"))
    checks: dict[str, list[Callable[[], object]]] = {
        "transformers": [lambda: parse_compile(options.get("compile"), who), lambda: parse_attn(options.get("attn_implementation"), who)],
        "vllm": [lambda: check_vllm_compile(options, who)],
    }
    for check in checks[backend]:
        try:
            check()
        except EvalsuiteError as exc:
            field, _, message = str(exc).removeprefix(f"variant {who!r}: ").partition(": ")
            out.append((field, message))
    if backend == "transformers" and options.get("compile") is not None and kv_cache:
        out.append(("options.compile", "a compiled forward decodes with the static cache: it cannot be combined with `kv_cache` (one variable at a time)"))
    return out


def split_compile(options: dict | None) -> tuple[dict, dict]:
    """A variant's options as (everything else, its compile-layer options), the latter including
    `enforce_eager` and `compilation_config` given under vLLM's `engine_args`."""
    rest = dict(options or {})
    layer = {k: rest.pop(k) for k in COMPILE_OPTIONS if k in rest}
    engine_args = rest.get("engine_args")
    if isinstance(engine_args, dict) and any(k in engine_args for k in COMPILE_OPTIONS):
        rest["engine_args"] = {k: v for k, v in engine_args.items() if k not in COMPILE_OPTIONS}
        if not rest["engine_args"]:
            del rest["engine_args"]
        layer["engine_args"] = {k: v for k, v in engine_args.items() if k in COMPILE_OPTIONS}
    return rest, layer


__all__ = [
    "ATTN_IMPLEMENTATIONS",
    "CATEGORY",
    "COMPILE_MODES",
    "COMPILE_OPTIONS",
    "TorchCompile",
    "check_vllm_compile",
    "compile_problems",
    "parse_attn",
    "parse_compile",
    "split_compile",
]
