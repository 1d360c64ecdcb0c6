"""Logit agreement between the baseline and a variant (transformers backends only).

Teacher-forced on the baseline's own output: both models read the same prompt and the same
baseline continuation, and at each position of the continuation we compare their next-token
distributions: the mean KL(baseline || variant) and the share of positions whose top token agrees.
Unlike text metrics, this sees a quantization's drift even where greedy outputs still coincide.

It needs the models, so it is not a registered (pure) scorer: it runs as an optional step after
generation and stores its scores in the run (`logits.jsonl`, merged into `scores.parquet`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence

from ..errors import EvalsuiteError
from .base import ScoreRecord

log = logging.getLogger("evalsuite")

KL_METRIC = "logits.kl_mean"
TOP1_METRIC = "logits.top1_agreement"
LOGITS_FILE = "logits.jsonl"


def _continuation_ids(backend, text_or_ids) -> list[int]:
    if isinstance(text_or_ids, (list, tuple)):
        return [int(t) for t in text_or_ids]
    return backend.tokenizer(text_or_ids, add_special_tokens=False)["input_ids"]


def _next_token_logprobs(backend, ids: list[int], start: int):
    """Log-probabilities the model gives each position's next token, for positions start-1..end-2."""
    import torch

    dev = backend._input_device()
    x = torch.tensor([ids], device=dev)
    with torch.inference_mode():
        logits = backend.model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0]
    return torch.log_softmax(logits[start - 1 : len(ids) - 1].float(), dim=-1).cpu()


def logit_agreement(baseline_backend, variant_backend, requests: Sequence, baseline_texts: Sequence) -> list[dict]:
    """Per request: mean KL(baseline || variant) and top-1 agreement over the baseline's continuation.

    `baseline_texts[i]` is the baseline's output for `requests[i]`: text, or its token ids (exact).
    Returns one dict per request: case_id, sample, positions, kl_mean, kl_max, top1_agreement,
    first_disagreement (index of the first position whose top tokens differ, or None) and
    baseline_margin there: how much the baseline preferred its own token over the variant's, in nats
    (log-probability difference). Under greedy decoding that position is where the two outputs
    diverge, so a small margin means a near-tie that flipped (the review queue's "knife-edge").
    """
    if len(requests) != len(baseline_texts):
        raise EvalsuiteError(f"logit_agreement: {len(requests)} requests but {len(baseline_texts)} baseline outputs")
    for be in (baseline_backend, variant_backend):
        if not hasattr(be, "load") or not hasattr(be, "encode"):
            raise EvalsuiteError(f"logit agreement needs transformers backends, not {type(be).__name__}")
        be.load()
    if len(baseline_backend.tokenizer) != len(variant_backend.tokenizer):
        raise EvalsuiteError("logit agreement needs the same tokenizer on both sides (vocabulary sizes differ)")
    out = []
    for req, cont in zip(requests, baseline_texts):
        prompt = baseline_backend.encode([req])["input_ids"][0].tolist()
        cont_ids = _continuation_ids(baseline_backend, cont)
        row = {"case_id": req.case_id, "sample": req.sample, "positions": len(cont_ids)}
        if not cont_ids:
            row.update({"kl_mean": None, "kl_max": None, "top1_agreement": None, "first_disagreement": None, "baseline_margin": None})
            out.append(row)
            continue
        ids = prompt + cont_ids
        lp_b = _next_token_logprobs(baseline_backend, ids, len(prompt))
        lp_v = _next_token_logprobs(variant_backend, ids, len(prompt))
        n = min(lp_b.shape[-1], lp_v.shape[-1])  # padded vocabularies: compare the shared part
        lp_b, lp_v = lp_b[:, :n], lp_v[:, :n]
        kl = (lp_b.exp() * (lp_b - lp_v)).sum(-1).clamp_min(0.0)
        top_b, top_v = lp_b.argmax(-1), lp_v.argmax(-1)
        agree = top_b == top_v
        disagree = (~agree).nonzero()
        first = int(disagree[0, 0]) if len(disagree) else None
        row.update(
            {
                "kl_mean": float(kl.mean()),
                "kl_max": float(kl.max()),
                "top1_agreement": float(agree.float().mean()),
                "first_disagreement": first,
                "baseline_margin": None if first is None else float(lp_b[first, top_b[first]] - lp_b[first, top_v[first]]),
            }
        )
        if not math.isfinite(row["kl_mean"]):
            row["kl_mean"] = None
        out.append(row)
    return out


def to_score_records(variant: str, rows: Iterable[dict], cases_by_id: dict) -> list[ScoreRecord]:
    """Score records (metrics logits.kl_mean, lower is better, and logits.top1_agreement) per row."""
    records = []
    for r in rows:
        case = cases_by_id.get(r["case_id"])
        scenario = case.scenario if case is not None else ""
        kind = case.kind if case is not None else ""
        details = {
            "positions": r["positions"],
            "kl_max": r.get("kl_max"),
            "first_disagreement": r.get("first_disagreement"),
            "baseline_margin": r.get("baseline_margin"),
        }
        for metric, value, higher_is_better in ((KL_METRIC, r["kl_mean"], False), (TOP1_METRIC, r["top1_agreement"], True)):
            records.append(
                ScoreRecord(
                    variant=variant,
                    case_id=r["case_id"],
                    sample=r["sample"],
                    scenario=scenario,
                    kind=kind,
                    metric=metric,
                    value=value,
                    passed=None,
                    higher_is_better=higher_is_better,
                    details=details,
                )
            )
    return records


def score_run_logits(store, suite, cases, variants: Sequence[str] | None = None, backend_factory=None, progress=None) -> list[ScoreRecord]:
    """Compute logit agreement for a stored run's transformers variants; store and merge the scores.

    The baseline also scores itself (KL 0, agreement 1), so paired comparisons have both sides.
    Records go to `logits.jsonl` in the run and are merged into `scores.parquet` (replacing older
    logits records); `evalsuite score` rewrites scores.parquet without them, as it loads no model.
    """
    import json

    from ..backends.base import make_backend
    from ..run.prompting import build_requests

    factory = backend_factory or make_backend
    base_v = suite.baseline
    if base_v.backend != "transformers":
        raise EvalsuiteError("logit agreement needs a transformers baseline")
    by_case = {c.id: c for c in cases}
    gens = {(g.variant, g.case_id, g.sample): g for g in store.generations() if g.ok}
    chosen = [v for v in suite.variants if v.backend == "transformers" and not v.noise and (variants is None or v.baseline or v.name in variants)]
    requests = [r for r in build_requests(cases, base_v) if (base_v.name, r.case_id, r.sample) in gens]
    if not requests:
        return []
    conts = []
    for r in requests:
        g = gens[(base_v.name, r.case_id, r.sample)]
        conts.append(g.extra.get("token_ids") or g.text)
    base_be = factory(base_v)
    records: list[ScoreRecord] = []
    try:
        for v in chosen:
            same_weights = not v.quantization and (v.model, v.options) == (base_v.model, base_v.options)
            if v.baseline or same_weights:
                # the baseline itself, and speculative decoding (the baseline's own weights verify
                # every token): the next-token distributions are the baseline's by construction
                rows = [
                    {
                        "case_id": r.case_id,
                        "sample": r.sample,
                        "positions": len(c) if isinstance(c, list) else None,
                        "kl_mean": 0.0,
                        "kl_max": 0.0,
                        "top1_agreement": 1.0,
                        "first_disagreement": None,
                        "by_construction": True,
                    }
                    for r, c in zip(requests, conts)
                ]
            else:
                be = factory(v)
                try:
                    rows = logit_agreement(base_be, be, requests, conts)
                finally:
                    be.close()
            records.extend(to_score_records(v.name, rows, by_case))
            if progress:
                progress(v.name)
    finally:
        base_be.close()
    from ..yamlio import atomic_write_text

    atomic_write_text(store.dir / LOGITS_FILE, "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records))
    kept = [r for r in store.scores() if not r.metric.startswith("logits.")]
    store.write_scores(kept + records)
    return records
