"""Library noise kept off a run's output, which carries evalsuite's own lines and progress bars.

torchao logs at import that its CUDA kernels and triton are absent (always so on a CPU machine),
torch's pytree deprecates an enum registration torchao makes, bitsandbytes warns on every int8 cast.
Called before any of them is imported (the embedded model's conversion, a backend loading a model):
a logger's level set later would come too late for what a library says while it is imported.
"""

from __future__ import annotations

import logging
import warnings

#: loggers whose warnings say nothing a user of evalsuite can act on (errors still show)
NOISY_LOGGERS = ("torchao", "bitsandbytes", "torch.utils._pytree")


def quiet_libraries() -> None:
    """Raise the noisy libraries' loggers to ERROR and drop bitsandbytes' per-call cast warning (idempotent)."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r".*MatMul8bitLt.*")
