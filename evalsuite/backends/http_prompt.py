"""Prompts for the completions endpoint: a case's chat rendered to one text, as the model expects it.

The completions endpoint takes a raw prompt, so the client renders the chat itself. The faithful
rendering is the model's own chat template (the Jinja template a transformers model directory
ships), applied the way transformers applies it: a sandboxed Jinja environment with
`trim_blocks` and `lstrip_blocks`, `tojson`, `raise_exception`, the tokenizer's special tokens as
variables, and `add_generation_prompt`. Then a completions request sees the same prompt text the
chat endpoint would have built from the same messages. `plain` joins the turns' texts with blank
lines, for base models without a template.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from ..errors import EvalsuiteError

PLAIN = "plain"
_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


def load_chat_template(source: str | Path) -> tuple[str, dict]:
    """The template text and the special tokens of a model directory, a tokenizer_config.json or a .jinja file."""
    p = Path(source).expanduser()
    tokens: dict[str, str] = {}
    config_path = p / "tokenizer_config.json" if p.is_dir() else (p if p.name.endswith(".json") else None)
    config: dict = {}
    if config_path is not None and config_path.is_file():
        config = json.loads(config_path.read_text("utf-8"))
        for k in _SPECIAL:
            v = config.get(k)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str):
                tokens[k] = v
    if p.is_file() and not p.name.endswith(".json"):
        return p.read_text("utf-8"), tokens
    if p.is_dir() and (p / "chat_template.jinja").is_file():
        return (p / "chat_template.jinja").read_text("utf-8"), tokens
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    if not isinstance(template, str):
        raise EvalsuiteError(
            f"no chat template found at {source} (looked for chat_template.jinja and tokenizer_config.json's chat_template); set `chat_template` to a model directory or a .jinja file, or `prompt_format: plain`"
        )
    return template, tokens


@lru_cache(maxsize=16)
def _compiled(template: str):
    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: _dt.datetime.now().strftime(fmt)
    return env.from_string(template)


class PromptRenderer:
    """Renders a request's messages to the prompt text of a completions request."""

    def __init__(self, source: str | Path | None):
        self.source = str(source) if source is not None else PLAIN
        if self.source == PLAIN:
            self.template, self.tokens = None, {}  # type: ignore[var-annotated]
        else:
            self.template, self.tokens = load_chat_template(self.source)

    def identity(self) -> dict:
        """What the rendering depends on (part of the variant's fingerprint)."""
        if self.template is None:
            return {"prompt_format": PLAIN}
        return {"chat_template_sha256": hashlib.sha256(self.template.encode()).hexdigest(), "special_tokens": self.tokens}

    def render(self, messages: Sequence[tuple[str, str]]) -> str:
        if self.template is None:
            return "\n\n".join(content for _, content in messages)
        from jinja2 import TemplateError

        try:
            return _compiled(self.template).render(messages=[{"role": r, "content": c} for r, c in messages], add_generation_prompt=True, **self.tokens)
        except TemplateError as exc:
            raise EvalsuiteError(f"the chat template from {self.source} failed: {exc}") from exc
