"""Context trimming: the documents of a case a `trim:` variant keeps, and the ones it drops.

Trimming retrieved context makes prefill cheaper and can cost grounding: the gold document may be
among the dropped ones. The prompt builder applies it (`build_requests`), and the runner records the
dropped ids in each generation's `extra["context_trim"]`, so a lost citation in the report or a
review item can be traced to them. Deterministic: the same case and settings drop the same documents.

- `order: retrieved` ranks the documents as the case lists them (the retriever's order);
  `order: overlap` by how many of the question's words (Chinese: character pairs) each one holds,
  ties in retrieved order. Kept documents stay in retrieved order.
- `top_k` keeps the best k; `budget_tokens` keeps the best ones while the running total of their
  tokens (as the prompt shows them: id, title, access line and text) fits, stopping at the first
  that does not, as a retrieved list cut at a budget is.
- `tokenizer: estimate` counts about 4 characters a token, a CJK character 1.5 tokens (close to
  the embedded model's tokenizer on the shipped documents); `embedded` or a directory counts exactly.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..cases.caseset import Case, Document
from ..cases.options import ContextTrim

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]{3,}|\d[\d.,%]*", re.UNICODE)
_STOP = frozenset(
    "the and for are was what which who how does did can could our your you with from this that have has when where after before many much long".split()
)


@dataclass(frozen=True, kw_only=True)
class Trimmed:
    """A case as a trimming variant sends it, and what it left out."""

    case: Case  #: the case with only the kept documents
    dropped: tuple[str, ...]  #: ids of the documents left out, in retrieved order
    kept_tokens: int  #: tokens of the kept documents (as counted by the trim's tokenizer)
    total_tokens: int  #: tokens of every document of the case

    def record(self) -> dict:
        """What a generation stores (`extra["context_trim"]`)."""
        return {"dropped": list(self.dropped), "kept": len(self.case.context), "kept_tokens": self.kept_tokens, "total_tokens": self.total_tokens}


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is: 4 characters a token, a CJK character 1.5."""
    cjk = len(_CJK.findall(text))
    return math.ceil((len(text) - cjk) / 4 + 1.5 * cjk)


@functools.lru_cache(maxsize=4)
def _tokenizer_counter(name: str) -> Callable[[str], int]:
    from transformers import AutoTokenizer  # only for a trim that counts exactly

    if name == "embedded":
        from ..models import ensure_embedded_model

        name = str(ensure_embedded_model())
    tok = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def token_counter(tokenizer: str) -> Callable[[str], int]:
    """The trim's token counter: the estimate, or a tokenizer loaded once per process."""
    return estimate_tokens if tokenizer == "estimate" else _tokenizer_counter(tokenizer)


def document_text(d: Document) -> str:
    """A document as the prompt shows it: the one place its text is built (evalsuite.run.prompting.documents_block
    joins these; `trim_case` counts their tokens)."""
    access = d.access if d.access != "restricted" else f"restricted (roles: {', '.join(d.roles) or 'none'})"
    return f"[{d.id}] {d.title} (access: {access})\n{d.text.strip()}"


def _terms(text: str) -> set[str]:
    words = {w.casefold() for w in _WORD.findall(_CJK.sub(" ", text))} - _STOP
    cjk = "".join(_CJK.findall(text))
    return words | {cjk[i : i + 2] for i in range(len(cjk) - 1)}


def _question(case: Case) -> str:
    if case.messages:
        return " ".join(c for r, c in case.messages if r == "user")
    return case.prompt or ""


def ranked(case: Case, order: str) -> list[int]:
    """Indexes of the case's documents, best first."""
    idx = list(range(len(case.context)))
    if order == "retrieved":
        return idx
    q = _terms(_question(case))
    overlap = [len(q & _terms(f"{d.title} {d.text}")) for d in case.context]
    return sorted(idx, key=lambda i: (-overlap[i], i))


def trim_case(case: Case, trim: ContextTrim, count: Callable[[str], int] | None = None) -> Trimmed:
    """The case with the documents `trim` keeps (see the module docstring)."""
    count = count or token_counter(trim.tokenizer)
    sizes = [count(document_text(d)) for d in case.context]
    keep: set[int] = set()
    used = 0
    for i in ranked(case, trim.order):
        if trim.top_k is not None and len(keep) >= trim.top_k:
            break
        if trim.budget_tokens is not None and used + sizes[i] > trim.budget_tokens:
            break
        keep.add(i)
        used += sizes[i]
    kept = tuple(d for i, d in enumerate(case.context) if i in keep)
    dropped = tuple(d.id for i, d in enumerate(case.context) if i not in keep)
    return Trimmed(case=replace(case, context=kept) if dropped else case, dropped=dropped, kept_tokens=used, total_tokens=sum(sizes))
