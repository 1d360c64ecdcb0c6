"""Quantizers that build a checkpoint run in a child process: `run_in_child` starts

    python -m evalsuite.models.worker SPEC.json

SPEC holds the kind (llmcompressor or awq), the baseline directory, the output directory, the
settings and the calibration texts. The child's output goes to `quantize.log` in the checkpoint.
Why a child: llm-compressor keeps a global session and its own logging; gptqmodel's worker threads
end the whole process (`os._exit(1)`) when a quantization step raises, which must not take an
evalsuite run (or a test session) with it; and the memory of quantizing is returned when it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..errors import EvalsuiteError


def run_in_child(kind: str, spec: dict, out_dir: Path, what: str) -> None:
    """Run the `kind` quantizer on `spec` in a child process; raise with its log's tail if it fails."""
    import evalsuite

    spec_path = Path(out_dir) / "evalsuite-quantize-spec.json"
    spec_path.write_text(json.dumps(dict(spec, kind=kind, out=str(out_dir))), "utf-8")
    env = dict(os.environ)
    root = str(Path(evalsuite.__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("GPTQMODEL_CPU_WORKERS", "2")
    logfile = Path(out_dir) / "quantize.log"
    with open(logfile, "w", encoding="utf-8") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "evalsuite.models.worker", str(spec_path)], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(out_dir), check=False
        )
    spec_path.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = logfile.read_text("utf-8", errors="replace")[-3000:]
        raise EvalsuiteError(f"{what} failed (exit {proc.returncode})\n--- quantizer log (tail) ---\n{tail}")


def _scheme(settings: dict):
    """The preset scheme, with its group size replaced where the settings give one."""
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme

    scheme = preset_name_to_scheme(settings["scheme"], ["Linear"])
    if settings.get("group_size") and scheme.weights is not None and scheme.weights.group_size:
        weights = scheme.weights.model_copy(update={"group_size": int(settings["group_size"])})
        scheme = QuantizationScheme(
            targets=["Linear"], weights=weights, input_activations=scheme.input_activations, output_activations=scheme.output_activations
        )
    return scheme


def _recipe(settings: dict):
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    groups = {"group_0": _scheme(settings)}
    if settings["algorithm"] == "gptq":
        return GPTQModifier(config_groups=groups, ignore=settings["ignore"], dampening_frac=settings.get("dampening_frac", 0.01))
    return QuantizationModifier(config_groups=groups, ignore=settings["ignore"])


def _dataset(tokenizer, texts: list[str]):
    from datasets import Dataset

    rows = [tokenizer(t, truncation=True, max_length=512, add_special_tokens=False) for t in texts]
    return Dataset.from_list([{"input_ids": r["input_ids"], "attention_mask": r["attention_mask"]} for r in rows])


def _llmcompressor(spec: dict) -> None:
    """oneshot with the scheme's recipe; saved compressed (compressed-tensors format) with the tokenizer."""
    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    settings = spec["settings"]
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(spec["baseline"])
    model = AutoModelForCausalLM.from_pretrained(spec["baseline"], dtype=torch.float32)
    kwargs: dict = {}
    if spec.get("texts"):
        kwargs = {
            "dataset": _dataset(tok, spec["texts"]),
            "num_calibration_samples": len(spec["texts"]),
            "max_seq_length": 512,
            "shuffle_calibration_samples": False,
        }
    oneshot(model=model, recipe=_recipe(settings), **kwargs)
    model.save_pretrained(spec["out"], save_compressed=True)
    tok.save_pretrained(spec["out"])
    print(f"saved {settings['scheme']} ({settings['algorithm']}) to {spec['out']}", flush=True)


def _awq(spec: dict) -> None:
    """gptqmodel's AWQ into the GEMM packing, through its portable torch kernel (runs on CPU)."""
    from gptqmodel import BACKEND, GPTQModel, QuantizeConfig
    from transformers import AutoTokenizer

    s = spec["settings"]
    qcfg = QuantizeConfig(bits=s["bits"], group_size=s["group_size"], sym=s["sym"], quant_method="awq", format="gemm")
    model = GPTQModel.load(spec["baseline"], qcfg)
    model.quantize(list(spec["texts"]), batch_size=1, backend=BACKEND.AWQ_TORCH)
    model.save(spec["out"])
    AutoTokenizer.from_pretrained(spec["baseline"]).save_pretrained(spec["out"])
    print(f"saved AWQ {s} to {spec['out']}", flush=True)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text("utf-8"))
    {"llmcompressor": _llmcompressor, "awq": _awq}[spec["kind"]](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
