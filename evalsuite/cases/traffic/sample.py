"""A sample, not a dump: exact and near-duplicate requests collapsed (MinHash LSH, datasketch), then a
seeded sample of N cases per stratum (scenario, language, prompt length)."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...hashing import sha256_json
from .extra import need
from .infer import Inferred
from .records import TrafficRequest

NUM_PERM = 64  #: MinHash permutations: enough to tell a 0.8 Jaccard neighbour from a stranger
_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A request read as a draft case, with the key that dedup compares."""

    request: TrafficRequest
    inferred: Inferred
    text: str  #: the request's text and response_format (what makes two requests the same)


@dataclass(frozen=True, kw_only=True)
class Deduped:
    """The distinct candidates (first seen kept) and how many of the others were exact or near copies."""

    kept: tuple[Candidate, ...]
    exact: int
    near: int


def exact_key(text: str) -> str:
    """Two requests are the same when their text is, up to case and white space."""
    return sha256_json(" ".join(text.casefold().split()))


def shingles(text: str) -> set[bytes]:
    """Word 3-grams, and character 3-grams of CJK text (which has no spaces between words)."""
    words = _WORD.findall(text.casefold())
    grams = {" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))}
    cjk = "".join(_CJK.findall(text))
    grams |= {cjk[i : i + 3] for i in range(max(0, len(cjk) - 2))}
    return {g.encode("utf-8") for g in grams if g}


def dedup(candidates: Sequence[Candidate], *, threshold: float = 0.8) -> Deduped:
    """Exact copies dropped first, then requests whose MinHash Jaccard estimate with a kept one passes `threshold`."""
    datasketch = need("datasketch", "datasketch", "near-duplicates")
    MinHash, MinHashLSH = datasketch.MinHash, datasketch.MinHashLSH
    seen: set[str] = set()
    distinct = []
    for c in candidates:
        key = exact_key(c.text)
        if key not in seen:
            seen.add(key)
            distinct.append(c)
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    hashes = MinHash.bulk([sorted(shingles(c.text)) for c in distinct], num_perm=NUM_PERM)
    kept = []
    for i, (c, mh) in enumerate(zip(distinct, hashes)):
        if not lsh.query(mh):
            lsh.insert(str(i), mh)
            kept.append(c)
    return Deduped(kept=tuple(kept), exact=len(candidates) - len(distinct), near=len(distinct) - len(kept))


def stratified(candidates: Sequence[Candidate], *, per_stratum: int, seed: int) -> tuple[list[Candidate], dict[tuple[str, str, str], tuple[int, int]]]:
    """A seeded sample of at most `per_stratum` candidates from each stratum, in input order, and each
    stratum's (available, taken)."""
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, c in enumerate(candidates):
        groups[c.inferred.stratum].append(i)
    rng = random.Random(seed)
    taken: list[int] = []
    strata: dict[tuple[str, str, str], tuple[int, int]] = {}
    for key in sorted(groups):
        idx = groups[key]
        pick = idx if len(idx) <= per_stratum else rng.sample(idx, per_stratum)
        taken.extend(pick)
        strata[key] = (len(idx), len(pick))
    return [candidates[i] for i in sorted(taken)], strata


def candidate_text(req: TrafficRequest) -> str:
    """What dedup compares: the messages and the response_format asked for."""
    parts: list[Any] = [t for _, t in req.messages]
    if req.response_format:
        parts.append(sha256_json(req.response_format))
    return "\n".join(parts)
