"""The transformers backend's torch-side pieces: generation hooks and weight paging.

Kept apart from `transformers.py` so that constructing a backend (and fingerprinting it) imports
neither torch nor transformers: a warm run whose every generation is cached never pays for them.
Imported on the first `load()`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, StoppingCriteria
from transformers.generation.streamers import BaseStreamer

from ..models.ondemand import storage_tensors


# -- generation hooks --------------------------------------------------------------------------
class FirstStepTimer(LogitsProcessor):
    """Records when the first new token's logits exist: the batch's time to first token."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self, input_ids, scores):
        if self.first is None:
            self.first = time.perf_counter()
        return scores


class FirstTokenStreamer(BaseStreamer):
    """A streamer (batch size 1) recording when the first generated token is emitted."""

    def __init__(self) -> None:
        self.calls = 0
        self.first: float | None = None

    def put(self, value):
        self.calls += 1
        if self.calls == 2 and self.first is None:  # the first put is the prompt
            self.first = time.perf_counter()

    def end(self):
        pass


class SeededSampler(LogitsProcessor):
    """Temperature + top-p sampling per row with its own generator; returns one-hot logits.

    Generation then runs greedy (argmax of the one-hot), so each row's sample depends on its own
    seed only: batch composition cannot change which random numbers a row gets.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device) -> None:
        self.generators = []
        for s in seeds:
            g = torch.Generator(device=device)
            g.manual_seed(int(s))
            self.generators.append(g)
        self.temperature = float(temperature)
        self.top_p = float(top_p)

    def __call__(self, input_ids, scores):
        logits = scores.float() / max(self.temperature, 1e-6)
        probs = torch.softmax(logits, dim=-1)
        if self.top_p < 1.0:
            sorted_p, idx = torch.sort(probs, descending=True, dim=-1)
            cum = torch.cumsum(sorted_p, dim=-1)
            drop = (cum - sorted_p) > self.top_p  # keep the smallest prefix reaching top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
        out = torch.full_like(scores, float("-inf"))
        for row, g in enumerate(self.generators):
            p = probs[row]
            tok = torch.multinomial(p / p.sum(), 1, generator=g)
            out[row, tok] = 0.0
        return out


class Deadline(StoppingCriteria):
    """Stops the whole batch past the suite's per-batch timeout."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.hit = False

    def __call__(self, input_ids, scores, **kwargs):
        if time.perf_counter() > self.deadline:
            self.hit = True
            return torch.ones(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def touch(*modules) -> None:
    """Read every weight once, so lazily mapped pages are resident before the peak is reset."""
    with torch.inference_mode():
        for m in modules:
            if m is None:
                continue
            for t in (x for p in list(m.parameters()) + list(m.buffers()) for x in storage_tensors(p)):  # inside quantized tensor subclasses too
                if t.numel() and t.device.type == "cpu":
                    t.view(-1)[:: max(1, 4096 // max(1, t.element_size()))].float().sum()
