"""Scoring stored outputs without the model: 10,000 outputs through every non-code scorer.

The outputs are built from the case sets' own material (kb_qa and brand cases, both kinds of
answer: one that cites its documents and one that does not), so every scorer has real work. Three
sizes show how the cost grows with the number of outputs (cases x samples x variants).
"""

from __future__ import annotations

import sys
import time

from common import REPO, Row


def outputs_for(cases, n: int):
    """n stored generations over the cases: variants x samples as needed, texts from the cases."""
    from evalsuite.backends.base import Generation

    gens = []
    variants = ["baseline", "opt-a", "opt-b", "opt-c"]
    i = 0
    while len(gens) < n:
        v = variants[(i // len(cases)) % len(variants)]
        sample = i // (len(cases) * len(variants))
        c = cases[i % len(cases)]
        docs = " ".join(f"{d.text} [{d.id}]" for d in c.context[:2])
        terms = " ".join(str(getattr(t, "term", t)) for t in c.expect.required_terms[:3])
        answer = c.expect.reference_answer or ""
        text = f"{answer} {docs} {terms}" if (i % 2 == 0) else f'{{"answer": "{terms or "none"}", "n": {i % 5}}} {answer[: len(answer) // 2]}'
        gens.append(Generation(c.id, v, sample, text=text.strip(), new_tokens=len(text.split())))
        i += 1
    return gens


def run(quick: bool = False) -> list[Row]:
    from evalsuite.cases.caseset import all_cases, load_cases
    from evalsuite.scoring.run import load_scorers, score_generations

    cases = [c for c in all_cases(load_cases([REPO / "casesets"])) if c.scenario in ("kb_qa", "brand")]
    specs = [s for s in load_scorers() if not s.name.startswith("code.")]
    sizes = (1000, 3000) if quick else (1000, 3000, 10000)
    rows = []
    rates = []
    for n in sizes:
        gens = outputs_for(cases, n)
        # the baseline's outputs must exist for drift scorers: they are part of the n
        t0 = time.perf_counter()
        records = score_generations(cases, gens, "baseline", specs)
        wall = time.perf_counter() - t0
        rates.append(n / wall)
        print(f"  [scoring] {n} outputs: {wall:.2f}s, {n / wall:.0f} outputs/s, {len(records)} scores", flush=True)
        rows.append(Row("scoring stored outputs", f"{n} outputs, {len(specs)} non-code scorers", f"{wall:.2f}s, {n / wall:.0f} outputs/s, {len(records)} scores", None, "", ""))
    rows[-1].verdict = f"outputs/s at {sizes[0]} vs {sizes[-1]}: {rates[0]:.0f} vs {rates[-1]:.0f}"
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
