"""The engine column of the report and the terminal: per variant, which engine generated, its
version and its settings, in a few words ("vllm 0.32.0 · cpu · bf16 · kv_cache_dtype=fp8 ·
speculative ngram k=5", "transformers 5.24.0 · cpu · fp32 · bnb-int8", "transformers 5.24.0 · cpu · fp32 ·
compile=default · attn=eager").

`variant_engines(variants, signature)` is the one function the report and the CLI call. It reads a
variant as the run's resolved suite holds it (`Variant.to_dict()`) and what its backend reported
of its engine when the run began (`signature["engines"][name]`, from each backend's
`engine_identity()`: the engine's own version and the settings it was started with, as the
fingerprint holds them). A run made before engines were recorded falls back to the variant's spec
and the run's library versions, with "?" for a version nobody recorded. Pure: no engine is imported.
"""

from __future__ import annotations

from typing import Any

from .describe import describe_quantization

_DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}
#: how a launcher's server is named in the column
_SERVERS = {"vllm": "vllm server", "transformers": "transformers serve", "llama_cpp": "llama.cpp server"}
#: the library whose version is a launcher's version
_SERVER_LIBRARY = {"vllm": "vllm", "transformers": "transformers", "llama_cpp": "llama_cpp_python"}
#: vLLM engine arguments shown first (in this order), each in its own words
_VLLM_FIRST = ("dtype", "quantization", "kv_cache_dtype", "speculative_config")
#: transformers options that are not engine settings (where, not how), or are shown in words of their own
_TF_SKIP = {"device", "dtype", "cache_dir", "compile", "attn_implementation"}


def short_dtype(dtype: object) -> str:
    """bfloat16 -> bf16, float32 -> fp32 (others as given)."""
    text = str(dtype).replace("torch.", "")
    return _DTYPE_SHORT.get(text.lower(), text)


def _scalar(key: str, value: object) -> str | None:
    """`key=value` for a setting (True: the key alone), or None for one too big to show."""
    if value is True:
        return key
    if isinstance(value, bool):
        return f"{key}=false"
    if isinstance(value, (int, float, str)) and len(str(value)) <= 40:
        return f"{key}={value}"
    return None


def _speculative(method: object, tokens: object, model: object = None) -> str:
    draft = f" ({str(model).rstrip('/').rsplit('/', 1)[-1]})" if model and method not in ("ngram", "prompt_lookup") else ""
    return f"speculative {method}" + (f" k={tokens}" if tokens is not None else "") + draft


def _vllm_settings(variant: dict, args: dict) -> list[str]:
    out: list[str] = []
    q = variant.get("quantization") or {}
    for key in _VLLM_FIRST:
        value = args.get(key)
        if value in (None, "", "auto") and key != "dtype":
            continue
        if key == "dtype":
            out.append(short_dtype(value or "auto"))
        elif key == "quantization":
            scheme = q.get("scheme")
            out.append(f"{value} {str(scheme).upper()}" if scheme else str(value))
        elif key == "speculative_config" and isinstance(value, dict):
            out.append(_speculative(value.get("method"), value.get("num_speculative_tokens"), value.get("model")))
        else:
            out.append(f"{key}={value}")
    for key, value in args.items():
        if key == "compilation_config" and isinstance(value, dict):
            out.append(_mapping(key, value))
        elif key not in _VLLM_FIRST and key != "model" and (text := _scalar(key, value)):
            out.append(text)
    return out


def _mapping(key: str, value: dict) -> str:
    """`key k=v,k=v` for a small settings mapping (vLLM's `compilation_config`), cut at 60 characters."""
    text = ",".join(f"{k}={v}" for k, v in value.items())
    return f"{key} {text if len(text) <= 60 else text[:57] + '...'}" if text else f"{key} {{}}"


def _compile_layer(opts: dict) -> list[str]:
    """A transformers variant's compile layer in words: `compile=default`, `attn=sdpa`."""
    out = []
    c = opts.get("compile")
    if isinstance(c, dict):
        out.append(f"compile={c.get('mode', 'default')}" + (" fullgraph" if c.get("fullgraph") else ""))
    if opts.get("attn_implementation"):
        out.append(f"attn={opts['attn_implementation']}")
    return out


def _vllm_args_from_spec(variant: dict) -> dict:
    """vLLM's engine arguments as far as the spec says (a run that recorded none)."""
    opts = dict(variant.get("options") or {})
    args: dict[str, Any] = {"dtype": opts.pop("dtype", "auto")}
    q, spec = variant.get("quantization") or {}, variant.get("speculative") or {}
    if q.get("method"):
        args["quantization"] = "compressed-tensors" if q["method"] in ("llm-compressor", "llmcompressor") else q["method"]
    if q.get("kv_cache_dtype"):
        args["kv_cache_dtype"] = q["kv_cache_dtype"]
    if spec:
        args["speculative_config"] = {"method": spec.get("method"), "num_speculative_tokens": spec.get("num_tokens"), "model": spec.get("model")}
    engine_args = opts.pop("engine_args", None) or {}
    for key in ("cache_dir", "cpu_kvcache_space_gib", "trust_remote_code"):
        opts.pop(key, None)
    return {**args, **opts, **engine_args}


def _transformers_settings(variant: dict, engine: dict) -> list[str]:
    opts = variant.get("options") or {}
    out = [short_dtype(engine.get("dtype") or opts.get("dtype") or "auto")]
    row = describe_quantization(variant)
    if row["method"] not in (None, "none"):
        label = f"{row['method']}-int{row['bits']}" if row.get("bits") else str(row["method"])
        if row["method"] in ("llm-compressor", "torchao") and row.get("scheme"):
            label = f"{row['method']} {row['scheme']}"
        out.append(label)
    spec = variant.get("speculative") or {}
    if spec:
        draft = spec.get("model") or (spec.get("draft") or {}).get("model")
        out.append(_speculative(spec.get("method"), spec.get("num_tokens", spec.get("max_ngram")), draft))
    out += _compile_layer(opts)
    out += [t for k, v in opts.items() if k not in _TF_SKIP and (t := _scalar(k, v))]
    env = variant.get("environment") or {}
    if env:  # its own environment: what it was asked for (the version above is the one installed there)
        out.append("env " + (engine.get("environment") or (f"python {env['python']}" if env.get("python") else " ".join(env.get("requirements") or []))))
    return out


def _http(variant: dict, engine: dict, libraries: dict) -> dict:
    serve = (variant.get("options") or {}).get("serve")
    if serve:
        launcher = str(serve.get("launcher") if isinstance(serve, dict) else serve)
        version = engine.get("version") or libraries.get(_SERVER_LIBRARY.get(launcher, launcher))
        settings = []
        if isinstance(serve, dict):
            settings += ["continuous batching"] if serve.get("continuous_batching") else []
            settings += [" ".join(str(a) for a in serve.get("args") or [])] if serve.get("args") else []
        return {"engine": _SERVERS.get(launcher, f"{launcher} server"), "version": version, "device": engine.get("device"), "settings": settings}
    opts = variant.get("options") or {}
    model = opts.get("model") or variant.get("model")
    settings = [str(opts.get("base_url") or "?")] + ([f"model {model}"] if model else [])
    return {"engine": "http", "version": None, "device": None, "settings": settings}


def engine_row(variant: dict, engine: dict | None = None, libraries: dict | None = None) -> dict:
    """engine (name), version, device and settings (a list of short strings) of one variant.

    `engine` is what its backend recorded (`engine_identity()`), `libraries` the run's library
    versions (the fallback for a version nobody recorded).
    """
    engine, libraries = dict(engine or {}), dict(libraries or {})
    backend = str(variant.get("backend") or "?")
    if backend == "vllm":
        recorded = engine.get("settings")
        args = recorded if isinstance(recorded, dict) else _vllm_args_from_spec(variant)
        return {"engine": "vllm", "version": engine.get("version"), "device": engine.get("device"), "settings": _vllm_settings(variant, args)}
    if backend == "transformers":
        version = engine.get("version") or libraries.get("transformers")
        return {"engine": "transformers", "version": version, "device": engine.get("device"), "settings": _transformers_settings(variant, engine)}
    if backend == "http":
        return _http(variant, engine, libraries)
    return {
        "engine": engine.get("engine") or backend,
        "version": engine.get("version") or libraries.get(backend),
        "device": engine.get("device"),
        "settings": [],
    }


def engine_text(row: dict) -> str:
    """One engine row in a few words: `engine version · device · settings...`."""
    head = str(row["engine"])
    if row["engine"] not in ("fake", "http"):
        head += f" {row.get('version') or '?'}"
    parts = [head] + ([str(row["device"])] if row.get("device") else []) + [s for s in row.get("settings") or [] if s]
    return " · ".join(parts)


def variant_engines(variants: list[dict], signature: dict) -> dict[str, str]:
    """Variant name -> its engine in words (`engine_text`), for variants as a run's resolved suite
    holds them and the run's signature. The report's engine column and the CLI's both read this."""
    engines = signature.get("engines") or {}
    libraries = dict(signature.get("libraries") or {})
    out = {}
    for v in variants:
        name = str(v.get("name"))
        libs = {**libraries, **((signature.get("weights") or {}).get(name) or {}).get("libraries", {})}
        out[name] = engine_text(engine_row(v, engines.get(name), libs))
    return out


__all__ = ["engine_row", "engine_text", "short_dtype", "variant_engines"]
