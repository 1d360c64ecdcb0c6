"""Child process of `evalsuite.models.compressed.run_oneshot`: quantize a model with llm-compressor.

    python -m evalsuite.models.llmcompressor_worker SPEC.json

SPEC holds the baseline directory, the output directory, the settings (scheme, group_size, ignore,
algorithm) and the calibration texts (for `algorithm: gptq`). The checkpoint is saved compressed
(compressed-tensors format) with the baseline's tokenizer.
"""

from __future__ import annotations

import json
import sys


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


def main(spec_path: str) -> int:
    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = json.loads(open(spec_path, encoding="utf-8").read())
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
