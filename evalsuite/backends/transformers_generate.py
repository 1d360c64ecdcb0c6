"""One `generate` call of the transformers backend, outside the backend class: the stop tokens, the
rows cut at their limits, what a call is given and what a batch shares, and the chat prompt a
request renders to (the tokenizer's template, or TOOL_CHAT_TEMPLATE for tools)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Request
from .toolcalls import TOOL_CHAT_TEMPLATE


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The token ids that end a generation: the model's generation config's, else the tokenizer's."""
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = set(eos if isinstance(eos, (list, tuple)) else [eos])
    return {int(i) for i in ids if i is not None}


def finished_rows(requests: list[Request], new: list[list[int]], eos: set[int]) -> list[tuple[Request, list[int], str]]:
    """Each request's new tokens, cut at its own token limit and at the first end-of-sequence token."""
    rows = []
    for req, ids in zip(requests, new):
        ids = ids[: req.max_new_tokens]
        stop_at = next((i for i, t in enumerate(ids) if t in eos), None)
        if stop_at is not None:
            rows.append((req, ids[: stop_at + 1], "stop"))
        else:
            rows.append((req, ids, "length"))
    return rows


@dataclass
class GenerateCall:
    """What one `generate` call is given, and its deadline once started."""

    kwargs: dict
    processors: Any
    stopping: Any
    timer: Any
    timeout_s: float | None
    deadline: Any = None

    def start(self, t0: float) -> None:
        from .transformers_hooks import Deadline

        if self.timeout_s is not None:
            self.deadline = Deadline(t0 + float(self.timeout_s))
            self.stopping.append(self.deadline)


@dataclass
class BatchFacts:
    """What every generation of one batch shares: its timings and the backend's facts."""

    latency: float
    ttft: float | None
    size: int
    timed_out: bool
    extra: dict


def chat_prompt(tokenizer: Any, request: Request) -> str:
    """A request's chat rendered by the tokenizer's template; a request's tools (`tools: native`) go
    through the template's `tools`, or through TOOL_CHAT_TEMPLATE where the model's own has none."""
    msgs = [{"role": r, "content": c} for r, c in request.messages]
    tools = request.tool_list()
    if tools is None:
        return tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    own = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    template = None if "tools" in own else TOOL_CHAT_TEMPLATE  # the model's own template, where it renders tools
    return tokenizer.apply_chat_template(msgs, tools=tools, chat_template=template, add_generation_prompt=True, tokenize=False)
