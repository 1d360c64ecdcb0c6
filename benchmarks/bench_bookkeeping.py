"""evalsuite's own cost around the model: this code against the previous code, and its share of
generate time on the embedded model.

On the fake backend (its own work timed and taken off), at 800 generations: the CPU and wall time
`generate_suite` spends outside `backend.generate` once the cases are loaded (planning, request
hashes, cache lookups and writes, the run log, summaries). Each round runs this checkout and the
previous code (`common.PREVIOUS_REF`, extracted from git) in fresh processes, alternately (ABBA);
the table gives each side's mean per generation with its 95% interval and the paired ratio. Loading
the case set (per case) and scoring (per output) are measured beside it: they are phases of their
own before and after generation, not work between model calls.

On the embedded model (this code only): a few requests of the demo's baseline, and evalsuite's wall
time outside `backend.generate` as a share of the time inside it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from common import PREVIOUS_REF, REPO, Row, code_root, embedded_suite, mean_ci, ratio, run_child

CHILD = Path(__file__).resolve().parent / "child_bookkeeping.py"
TARGET_MS = 0.5


def _ms(xs: list[float]) -> str:
    m, lo, hi = mean_ci(xs)
    return f"{m:.3f} ms [{lo:.3f}, {hi:.3f}]"


def _side_by_side(n: int, rounds: int) -> tuple[dict, dict | None]:
    """Figures of this checkout and of the previous code, `rounds` each, alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        prev = code_root(PREVIOUS_REF, Path(tmp))
        roots = {"this": REPO} | ({"previous": prev} if prev else {})
        out: dict[str, dict[str, list[float]]] = {name: {} for name in roots}
        for r in range(rounds):
            for name in roots if r % 2 == 0 else list(roots)[::-1]:
                fig = run_child(CHILD, roots[name], str(n))
                for k, x in fig.items():
                    out[name].setdefault(k, []).append(float(x))
            print(f"  [bookkeeping] round {r + 1}/{rounds}: " + ", ".join(f"{k} {v['own_cpu_ms'][-1]:.3f} ms cpu" for k, v in out.items()), flush=True)
    return out["this"], out.get("previous")


def embedded_share(per_scenario: int = 2, max_new_tokens: int = 32, batch_size: int = 1) -> dict:
    """evalsuite's wall time outside `backend.generate` against the time inside it, on the embedded model."""
    import evalsuite.run.runner as runner
    from evalsuite.backends.base import make_backend

    sys.path.insert(0, str(CHILD.parent))
    from child_bookkeeping import Timed

    suite, base, cases = embedded_suite(per_scenario, max_new_tokens, batch_size)
    with tempfile.TemporaryDirectory() as tmp:
        Timed.reset()
        opts = runner.RunOptions(progress=False, backend_factory=lambda v: Timed(make_backend(v)), cache_path=f"{tmp}/c.sqlite", runs_dir=f"{tmp}/runs")
        select = runner.select_cases
        runner.select_cases = lambda *a, **k: cases
        try:
            t0 = time.perf_counter()
            res = runner.generate_suite(suite, opts)
            wall = time.perf_counter() - t0
        finally:
            runner.select_cases = select
    load = res.variants[base.name]["load_s"]
    own = wall - Timed.wall - load
    gaps = Timed.gaps()  # between one batch's return and the next batch's call: the store, the cache, the books
    return {
        "generations": res.generated,
        "batches": len(Timed.calls),
        "generate_s": Timed.wall,
        "own_s": own,
        "between_s": sum(gaps),
        "between_ms_per_batch": 1000 * sum(gaps) / max(len(gaps), 1),
        "load_s": load,
        "share_between": sum(gaps) / Timed.wall,
        "share": own / Timed.wall,
    }


def run(quick: bool = False) -> list[Row]:
    n, rounds = (200, 2) if quick else (800, 6)
    this, prev = _side_by_side(n, rounds)
    label = "evalsuite's own cost around the model (fake backend)"
    rows = []
    for key, what in (("own_cpu_ms", "CPU"), ("own_wall_ms", "wall time")):
        m, lo, hi = mean_ci(this[key])
        verdict = "met" if hi <= TARGET_MS else ("NOT met" if lo > TARGET_MS else "within noise")
        figures = f"this code {_ms(this[key])}" + (f", previous ({PREVIOUS_REF}) {_ms(prev[key])}" if prev else ", previous code not available (no git)")
        rows.append(
            Row(
                label,
                f"{what} per generation outside backend.generate, {n} generations",
                figures,
                ratio(this[key], prev[key]) if prev else None,
                f"<= {TARGET_MS} ms",
                verdict,
            )
        )
    context = f"this code: loading the cases {_ms(this['load_cpu_ms_per_case'])} per case, scoring {_ms(this['score_cpu_ms_per_output'])} per output"
    if prev:
        context += f"; previous: {_ms(prev['load_cpu_ms_per_case'])}, {_ms(prev['score_cpu_ms_per_output'])}"
    rows.append(
        Row(
            label,
            "the phases before and after generation (CPU)",
            context,
            ratio(this["score_cpu_ms_per_output"], prev["score_cpu_ms_per_output"]) if prev else None,
        )
    )
    if not quick:
        e = embedded_share()
        rows.append(
            Row(
                label,
                "share of generate time on the embedded model",
                f"{e['generations']} generations: generate {e['generate_s']:.1f}s, evalsuite outside it "
                f"{1000 * e['own_s']:.0f} ms ({1000 * e['own_s'] / e['generations']:.1f} ms/gen, load {e['load_s']:.1f}s apart): {100 * e['share']:.2f}%",
            )
        )
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(" | ".join(row.cells()))
