"""`evalsuite init`: a commented suite file for your own model, returned as data (the CLI writes and prints it).

    evalsuite init --model Qwen/Qwen2.5-7B-Instruct --variants gptq,bnb-nf4,compressed-tensors:ORG/ID,speculative:prompt-lookup

The suite has the baseline (your model, by hub id or directory, with its revision), a noise rerun
(the baseline again in batches of 4: what batching alone changes), one variant per `--variants`
kind, each changing one thing, the stage and the rubric. Every model it names (the baseline, a
published checkpoint, a draft model) is checked without downloading anything: a local directory, the
local hub cache, or (online) the hub; offline, a missing one is reported with the command that
fetches it. The text is validated by `load_suite` before it is returned.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import EvalsuiteError, UnknownNameError, suggest
from ..shipped import PREFIX, copy_starter, names

#: variant kinds, what each becomes, and what its argument (after `:`) is
KINDS: dict[str, str] = {
    "gptq": "GPTQ 4-bit built from the baseline by gptqmodel (minutes, cached); gptq:ID loads a published GPTQ checkpoint",
    "awq": "AWQ 4-bit built from the baseline by gptqmodel (minutes, cached); awq:ID loads a published AWQ checkpoint (GEMM packing on CPU)",
    "bnb-int8": "bitsandbytes LLM.int8() at load",
    "bnb-nf4": "bitsandbytes 4-bit NF4 at load",
    "compressed-tensors": "compressed-tensors:ID loads a published llm-compressor checkpoint (W4A16, W8A8, FP8 ...)",
    "llm-compressor": "llm-compressor:SCHEME builds one from the baseline with oneshot (W8A8, W4A16, FP8_DYNAMIC; default W8A8)",
    "torchao-int8": "torchao int8 weight-only at load (torchao:int8_dynamic also quantizes activations)",
    "torchao": "torchao:SCHEME at load: int8_weight_only, int8_dynamic, int4_weight_only (CUDA only)",
    "hqq": "HQQ at load, hqq:BITS (default 4) with group size 64",
    "speculative": "speculative:prompt-lookup (n-gram lookup in the prompt) or speculative:draft:ID (a smaller draft model)",
    "served": "served:URL: the same model behind an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp)",
}
DEFAULT_VARIANTS = ("bnb-int8", "bnb-nf4", "speculative:prompt-lookup")


@dataclass(frozen=True)
class InitRequest:
    """What `evalsuite init` was asked for (paths as given: relative to the working directory)."""

    model: str
    revision: str | None = None
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    out: Path = Path("suites/mine.yaml")
    casesets: Path = Path("casesets")
    rubric: Path | None = Path("rubrics/default.yaml")
    reports: Path = Path("reports")
    device: str = "auto"
    max_new_tokens: int = 128
    #: refer to the case sets and rubric shipped with evalsuite (`shipped:NAME`) instead of the project's copies
    shipped: bool = False


@dataclass(frozen=True)
class InitResult:
    """The suite text, where it goes, each model's resolution, warnings and the next commands."""

    text: str
    path: Path
    resolutions: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    next_commands: list[str] = field(default_factory=list)


# -- one variant per kind --------------------------------------------------------------------------
def _split_ref(ref: str) -> tuple[str, str | None]:
    """`org/name@rev` -> (org/name, rev)."""
    name, _, rev = ref.partition("@")
    return name, rev or None


def _slug(ref: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", ref.rsplit("/", 1)[-1].lower()).strip("-")[:40] or "model"


def _checkpoint(method: str, arg: str) -> dict:
    ref, rev = _split_ref(arg)
    q = {"method": method, "checkpoint": ref} | ({"revision": rev} if rev else {})
    return {"name": f"{method}-{_slug(ref)}", "quantization": q, "_models": [("quantization.checkpoint", ref, rev)]}


def _group_size(hidden: int | None) -> int:
    """The largest usual group size that divides the model's hidden size (128 when unknown)."""
    return next((g for g in (128, 64, 32) if not hidden or hidden % g == 0), 32)


def variant_for(kind: str, ctx: dict) -> dict:
    """One variant (as suite-file fields, plus `_comment` and `_models` to check) for a `--variants` item."""
    head, _, arg = kind.partition(":")
    head = head.strip().lower()
    if head not in KINDS:
        raise UnknownNameError("variant kind", head, list(KINDS))
    calib = ctx["casesets"]
    if head in ("gptq", "awq"):
        if arg:
            return _checkpoint(head, arg)
        return {"name": f"{head}-4bit", "quantization": {"method": head, "bits": 4, "group_size": _group_size(ctx.get("hidden")), "calibration": calib}}
    if head in ("bnb-int8", "bnb-nf4"):
        q = {"method": "bnb", "bits": 8} if head == "bnb-int8" else {"method": "bnb", "bits": 4, "quant_type": "nf4"}
        return {"name": head, "quantization": q}
    if head == "compressed-tensors":
        if not arg:
            raise EvalsuiteError(
                "--variants compressed-tensors:ID names the checkpoint (a hub id or directory, optionally @revision); to build one use llm-compressor:W8A8"
            )
        return _checkpoint("compressed-tensors", arg)
    if head == "llm-compressor":
        scheme = (arg or "W8A8").upper()
        q = {"method": "llm-compressor", "scheme": scheme} | ({"group_size": _group_size(ctx.get("hidden"))} if scheme.startswith(("W4A16", "W8A16")) else {})
        return {"name": f"llm-compressor-{scheme.lower()}", "quantization": q}
    if head in ("torchao", "torchao-int8"):
        scheme = arg or "int8_weight_only"
        return {"name": f"torchao-{scheme.replace('_', '-')}", "quantization": {"method": "torchao", "scheme": scheme}}
    if head == "hqq":
        bits = int(arg or 4)
        return {"name": f"hqq-{bits}bit", "quantization": {"method": "hqq", "bits": bits, "group_size": 64}}
    if head == "speculative":
        return _speculative(arg)
    return _served(arg)


def _speculative(arg: str) -> dict:
    method, _, ref = arg.partition(":")
    method = method or "prompt-lookup"
    if method in ("prompt-lookup", "prompt_lookup", "ngram"):
        return {"name": "speculative-prompt-lookup", "speculative": {"method": "prompt_lookup", "num_tokens": 10}}
    if method == "draft" and ref:
        name, rev = _split_ref(ref)
        spec = {"method": "draft", "model": name, "num_tokens": 5} | ({"revision": rev} if rev else {})
        return {"name": f"speculative-draft-{_slug(name)}", "speculative": spec, "_models": [("speculative.model", name, rev)]}
    hint = suggest(method, ["prompt-lookup", "draft"], quote=False)
    raise EvalsuiteError(f"--variants speculative:{arg}: use speculative:prompt-lookup or speculative:draft:ID{hint}")


def _served(arg: str) -> dict:
    if not arg.startswith(("http://", "https://")):
        raise EvalsuiteError(f"--variants served:URL needs the server's API root, e.g. served:http://127.0.0.1:8000/v1 (got {arg!r})")
    return {"name": "served", "backend": "http", "options": {"base_url": arg, "timeout_s": 600}}


_COMMENTS = {
    "gptq": "GPTQ: quantized once from the baseline on the case sets' text (minutes), cached",
    "awq": "AWQ: quantized once from the baseline on the case sets' text (minutes), cached",
    "bnb": "bitsandbytes at load (needs the bitsandbytes package; int8 is slow on CPU)",
    "compressed-tensors": "a published llm-compressor checkpoint; on CPU its weights are decompressed and activation quantization simulated",
    "llm-compressor": "built from the baseline with llm-compressor's oneshot (seconds, cached); runs in vLLM as is",
    "torchao": "torchao at load (int8 runs on CPU; int4 needs CUDA)",
    "hqq": "HQQ at load (a minute on CPU per load; its PyTorch backend dequantizes on the fly)",
    "speculative": "speculative decoding keeps the weights: greedy outputs should not change",
    "served": "the same model behind a server: what serving (batching, kernels) changes",
}


def _comment(v: dict) -> str:
    if "quantization" in v:
        return _COMMENTS.get(v["quantization"]["method"], "")
    return _COMMENTS["speculative" if "speculative" in v else "served"]


# -- the suite text --------------------------------------------------------------------------------
def _flow(d: dict) -> str:
    """A mapping as one YAML flow line."""
    return yaml.safe_dump(d, default_flow_style=True, sort_keys=False, width=10**6).strip()


def _scalar(value) -> str:
    """A value as a YAML scalar (quoted only when it must be)."""
    return _flow({"k": value})[4:-1]


def _rel(target: Path, out_dir: Path) -> str:
    return os.path.relpath(os.path.abspath(target), os.path.abspath(out_dir)).replace(os.sep, "/")


def _caseset_refs(req: InitRequest, out_dir: Path) -> list[str]:
    """The suite's case-set entries: the shipped ones by name (`--shipped`), else the project's folder."""
    return [PREFIX + n for n in names("caseset")] if req.shipped else [_rel(req.casesets, out_dir)]


def _header(req: InitRequest, out_dir: Path) -> list[str]:
    where = f"{PREFIX}default" if req.shipped else _rel(req.rubric, out_dir) if req.rubric else None
    rubric = [f"rubric: {where}  # the gate's rules per stage"] if where else []
    sets_note = (
        "# the case sets shipped with evalsuite (shipped:NAME; `evalsuite init` without --shipped copies them into the project)"
        if req.shipped
        else "# the fixed case sets (paths are relative to this file; `evalsuite init` copied the starter sets here: edit them)"
    )
    return [
        f"# evalsuite suite for {req.model} (written by `evalsuite init`; docs/quickstart.md, docs/formats.md).",
        "# The baseline is the reference; every other variant inherits its backend, model and options and",
        "# changes one thing, so a regression can be attributed to it.",
        "schema_version: 1",
        f"name: {_scalar(Path(req.out).stem)}",
        f"description: {json.dumps(f'Does {req.model} keep its quality when optimized?')}",
        sets_note + "; filters by tag or scenario: docs/formats.md",
        "casesets:",
        *(f"  - {ref}" for ref in _caseset_refs(req, out_dir)),
        "# greedy, one sample per case; batch size 1 keeps each output independent of the others in a batch",
        f"generation: {_flow({'max_new_tokens': req.max_new_tokens, 'temperature': 0, 'samples': 1, 'seed': 1234, 'batch_size': 1})}",
        *rubric,
        "stage: pilot  # dev, pilot or production: how strict the gate is (evalsuite gate --stage)",
        f"output_dir: {_rel(req.reports, out_dir)}  # runs go to <output_dir>/runs/<run-id>/",
        "variants:",
    ]


def _baseline(req: InitRequest) -> list[str]:
    rev = (
        "  # the resolved commit is part of the fingerprint: a moved branch is a new variant"
        if req.revision
        else "  # a hub id (add `revision:` to pin a branch, tag or commit) or a directory"
    )
    return [
        "  # the reference every variant is compared with, case by case",
        "  - name: baseline",
        "    baseline: true",
        "    backend: transformers",
        f"    model: {_scalar(req.model)}{rev}",
        *([f"    revision: {_scalar(req.revision)}"] if req.revision else []),
        f"    options: {_flow({'device': req.device, 'dtype': 'auto'})}  # auto: CUDA with bfloat16 when there is a GPU, else CPU with float32",
        "  # the baseline again, in batches of 4: what batching alone changes. The gate uses it as the",
        "  # noise floor: a flip that this rerun also shows is not a regression",
        "  - name: baseline-rerun",
        "    noise: true",
        "    generation: {batch_size: 4}",
    ]


def _variant_lines(v: dict) -> list[str]:
    lines = [f"  # {_comment(v)}", f"  - name: {v['name']}"]
    for key in ("backend", "quantization", "speculative", "options"):
        if key in v:
            lines.append(f"    {key}: {v[key] if isinstance(v[key], str) else _flow(v[key])}")
    return lines


def _unique(variants: list[dict]) -> list[dict]:
    seen: dict[str, int] = {}
    out = []
    for v in variants:
        n = seen.get(v["name"], 0)
        seen[v["name"]] = n + 1
        out.append(v if not n else dict(v, name=f"{v['name']}-{n + 1}"))
    return out


def render_suite(req: InitRequest, variants: list[dict]) -> str:
    """The suite file's text for a request and its variants."""
    out_dir = Path(req.out).parent
    lines = _header(req, out_dir) + _baseline(req)
    for v in variants:
        lines += _variant_lines(v)
    return "\n".join(lines) + "\n"


# -- checks ----------------------------------------------------------------------------------------
def _hidden_size(model: str, revision: str | None) -> int | None:
    """The model's hidden size when its config is at hand (a directory, the hub cache), else None."""
    from ..models.hub import check_model

    found = check_model(model, revision)
    path = Path(found["message"]) if found["ok"] and found["where"] in ("local", "cache") else None
    if model in (None, "", "embedded"):
        return 576  # SmolLM2-135M-Instruct
    try:
        return int(json.loads((path / "config.json").read_text("utf-8"))["hidden_size"]) if path else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_models(req: InitRequest, variants: list[dict]) -> list[dict]:
    """Each model the suite names, resolved without downloading (evalsuite.models.hub.check_model)."""
    from ..models.hub import check_model

    wanted = [("baseline", "model", req.model, req.revision)]
    wanted += [(v["name"], fld, ref, rev) for v in variants for fld, ref, rev in v.get("_models", [])]
    return [{"variant": who, "field": fld} | check_model(ref, rev, field=fld) for who, fld, ref, rev in wanted]


def _requirements(variants: list[dict]) -> list[str]:
    from ..models.formats import missing_requirement

    out = []
    for v in variants:
        try:
            why = missing_requirement(v.get("quantization"))
        except EvalsuiteError:
            why = None
        if why:
            out.append(f"variant {v['name']}: {why}")
    return out


def _validate(text: str, out: Path) -> None:
    """Load the text as a suite from beside `out` (relative paths resolve as they will)."""
    from ..cases.suite import load_suite

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".init-", suffix=".yaml", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_suite(tmp)
    finally:
        os.unlink(tmp)


def write_starter(req: InitRequest) -> list[Path]:
    """Copy the starter case sets and the default rubric into the project where the suite expects them
    (`req.casesets`, `req.rubric`), so the project owns its fixed samples; a folder or file already
    there is kept as it is. Nothing with `--shipped`. Returns the files written."""
    if req.shipped:
        return []
    casesets = None if Path(req.casesets).exists() else req.casesets
    return copy_starter(casesets, req.rubric)


def scaffold(req: InitRequest) -> InitResult:
    """The suite file for `req` (validated), each model's resolution, what is missing, the next commands.
    Writes nothing but a temporary file beside `req.out` while validating."""
    calib = f"{PREFIX}kb_qa" if req.shipped else _rel(req.casesets, Path(req.out).parent)
    ctx = {"casesets": calib, "hidden": _hidden_size(req.model, req.revision)}
    variants = _unique([variant_for(k, ctx) for k in req.variants if k.strip()])
    text = render_suite(req, variants)
    _validate(text, Path(req.out))
    resolutions = check_models(req, variants)
    warnings = [f"{r['variant']}: {r['field']} {r['name']!r} does not resolve here: {r['message']}" for r in resolutions if not r["ok"]]
    warnings += _requirements(variants)
    out = str(req.out)
    commands = [f"evalsuite run {out}", "evalsuite gate last"]
    return InitResult(text=text, path=Path(req.out), resolutions=resolutions, warnings=warnings, next_commands=commands)
