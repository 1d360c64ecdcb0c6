"""Adaptive verdicts against the fixed-n gate, on the same data: false alarms, catch rate, cases.

    python benchmarks/bench_adaptive.py [--reps 200] [--stage production] [--pass-side evalsuite|oracle|free] [--out FILE]

Setup (once, fake backend, nothing to download): the synthetic case sets of the gate tests at the
shipped sizes (100 kb_qa, 75 code, 80 brand; tests/verdict_synth.py), a correct baseline, and every
planted degrader of evalsuite/run/degrade.py applied to *every* eligible case, all scored by the real
scorers. Each repetition then builds a (baseline, variant) pair from those scores: run-to-run noise
flips each pass/fail outcome (but a canary leak) of each side independently with probability q
(q = 0: greedy decoding, as the fake backend; q = 2%: sampling or batch non-determinism), and the
degrader's seeded choice of cases (degrade.choose_cases with seed = repetition) takes its damaged
scores on the variant. "Unchanged" variants are noise only. The fixed-n gate (evalsuite.verdict.gate on the full paired comparison) and the
adaptive verdict (evalsuite.adaptive.checks.replay: the driver's batch loop on a seeded order,
seed = repetition) judge the same variant; the adaptive one reports how many cases it generated.

`--pass-side oracle` puts the best pass side any gate could have (the SPRT that knows the noise
rate) in place of evalsuite's, and `--pass-side free` one that passes at once (the cost of the rest);
the run also prints the floor on cases that any gate with a given miss rate must pay without noise
(benchmarks/adaptive_frontier.py). docs/thresholds.md reads the three side by side.

Prints one markdown table (the one in docs/thresholds.md) and writes the raw figures as JSON.

`make bench` (`python -m benchmarks --only adaptive`) runs `run()` instead: the adaptive driver's
time per batch on a 1,000-case synthetic suite, at the start and at the end of the run, this code
against the previous code (`common.PREVIOUS_REF`) in alternating fresh processes
(benchmarks/child_adaptive.py). A run that re-reads its outputs or re-aggregates its scores on every
batch gets slower batch after batch; this one's batches take the same time at the end as at the start.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from benchmarks.adaptive_frontier import patched, prefix_floor  # noqa: E402
from evalsuite.adaptive.checks import AdaptiveSettings, build_checks, replay, seeded_order  # noqa: E402
from evalsuite.verdict.compare import CaseAgg, Comparison, _compare_metric, per_case  # noqa: E402
from evalsuite.run.degrade import KINDS, choose_cases  # noqa: E402
from evalsuite.verdict.gate import gate  # noqa: E402
from evalsuite.verdict.rubric import load_rubric  # noqa: E402


def setup(root: Path):
    from verdict_synth import write_sets, write_suite

    from evalsuite.run.runner import RunOptions

    from evalsuite.scoring.pipeline import run_suite
    from evalsuite.cases.suite import load_suite

    outputs = write_sets(root, n_kb=100, n_code=75, n_brand=80)
    variants = [{"name": f"all-{k}", "degrade": {"kind": k, "rate": 1.0, "seed": 0}} for k in KINDS]
    res = run_suite(load_suite(write_suite(root, outputs, variants)), RunOptions(progress=False))
    per = per_case(res.store.scores())
    base = {(s, m): a for (v, s, m), a in per.items() if v == "baseline"}
    damaged = {k: {(s, m): a for (v, s, m), a in per.items() if v == f"all-{k}"} for k in KINDS}
    return res.cases, base, damaged


def flip(a: CaseAgg) -> CaseAgg:
    return CaseAgg(values=[1.0 - x for x in a.values], passes=[1.0 - x for x in a.passes], hib=a.hib, details=a.details, kind=a.kind)


def make_pair(base, damaged, cases, kind: str | None, rate: float, q: float, rep: int):
    """(baseline, variant) per-case scores of one repetition: run-to-run noise flips each pass/fail
    outcome of *both* sides independently with probability q (so an unchanged variant is
    exchangeable with its baseline; a leaked canary is evidence, never noise), then the degrader
    damages its seeded choice of the variant's cases."""
    rng = np.random.default_rng([rep, int(q * 1000), int(rate * 1000)])
    chosen = choose_cases(cases, {"kind": kind, "rate": rate, "seed": rep}) if kind else set()
    b_out, v_out = {}, {}
    for key, aggs in base.items():
        bo, vo = {}, {}
        dmg = damaged[kind].get(key, {}) if kind else {}
        noisy = q > 0 and key[1] != "grounding.leak"
        for cid, a in aggs.items():
            b = flip(a) if noisy and a.passes and rng.random() < q else a
            v = flip(a) if noisy and a.passes and rng.random() < q else a
            if cid in chosen and cid in dmg:
                v = dmg[cid]
            bo[cid], vo[cid] = b, v
        b_out[key], v_out[key] = bo, vo
    return b_out, v_out


def fixed_fails(base, var, sr, scenarios) -> bool:
    deltas = tuple(d for (s, m) in sorted(base) if (d := _compare_metric("v", s, m, base[(s, m)], var.get((s, m), {}), noise=False, seed=1, n_resamples=99)) is not None)
    cmp = Comparison(run_id="bench", baseline="baseline", variants=("v",), noise_runs=(), deltas=deltas, perf=(), scenarios=scenarios)
    return bool(gate(cmp, sr).failed_rules("v"))


CONDITIONS = [("unchanged, q=0", None, 0.0, 0.0), ("unchanged, q=2%", None, 0.0, 0.02)] + \
    [(f"{k} 10%, q=0", k, 0.10, 0.0) for k in KINDS] + \
    [(f"{k} 10%, q=2%", k, 0.10, 0.02) for k in KINDS] + \
    [(f"{k} 30%, q=2%", k, 0.30, 0.02) for k in ("drop_citations", "corrupt_json")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--stage", default="production")
    ap.add_argument("--only", default=None, help="semicolon-separated condition names (default: all)")
    ap.add_argument("--until", default=AdaptiveSettings.until, choices=("rules", "verdict"), help="stop a variant once every block rule is decided, or once its verdict is")
    ap.add_argument("--tolerance", type=float, default=AdaptiveSettings.tolerance, help="the pass side rules out a drop of max(rule threshold, tolerance)")
    ap.add_argument("--pass-side", default="evalsuite", choices=("evalsuite", "oracle", "free"),
                    help="oracle: the SPRT that knows each condition's noise rate in place of evalsuite's pass side; free: a pass side that passes "
                         "at once, leaving the cost of everything else (benchmarks/adaptive_frontier.py)")
    ap.add_argument("--pass-max-seen", type=float, default=None, help="early passes only while the drop seen is at most this share of tau (default: evalsuite's)")
    ap.add_argument("--out", default=None, help="default: reports/bench_adaptive.json, or bench_adaptive_PASS-SIDE.json")
    ap.add_argument("--setup-cache", default=None, help="pickle of the scored setup, reused when present (parallel runs)")
    args = ap.parse_args()
    sr = load_rubric(ROOT / "rubrics" / "default.yaml").for_stage(args.stage)
    # warn rules never fail either gate: judging the block rules alone gives the same verdicts, faster
    sr = replace(sr, rules=tuple(r for r in sr.rules if r.severity == "block"))
    t0 = time.perf_counter()
    cache = Path(args.setup_cache) if args.setup_cache else None
    if cache is not None and cache.is_file():
        cases, base, damaged = pickle.loads(cache.read_bytes())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            cases, base, damaged = setup(Path(tmp))
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(pickle.dumps((cases, base, damaged)))
    print(f"setup {time.perf_counter() - t0:.0f}s: {len(cases)} cases; stage {args.stage}, alpha {sr.alpha}, {args.reps} repetitions per condition, until {args.until}, "
          f"tolerance {args.tolerance:g}, pass side {args.pass_side}" + (f", early passes while the drop seen <= {args.pass_max_seen:g} tau" if args.pass_max_seen is not None else ""), flush=True)
    scenarios = tuple(sorted({s for s, _ in base}))
    rows, raw = [], {}
    conds = [c for c in CONDITIONS if args.only is None or c[0] in args.only.split(";")]
    for name, kind, rate, q in conds:
        t1 = time.perf_counter()
        fx, ad, gen = [], [], []
        oracle_q = {"evalsuite": None, "oracle": q, "free": "free"}[args.pass_side]
        for rep in range(args.reps):
            b, var = make_pair(base, damaged, cases, kind, rate, q, rep)
            fx.append(fixed_fails(b, var, sr, scenarios))
            order = seeded_order(cases, rep)
            checks = build_checks(sr, b, order, AdaptiveSettings(stage=args.stage, tolerance=args.tolerance))
            with patched(oracle_q, args.pass_max_seen):
                st = replay("v", checks, b, var, order, batch_size=8, until=args.until)
            ad.append(st.verdict == "fail")
            gen.append(st.generated / len(order))
        raw[name] = {"fixed_fail": float(np.mean(fx)), "adaptive_fail": float(np.mean(ad)), "cases_share_mean": float(np.mean(gen)),
                     "cases_share_median": float(np.median(gen)), "agree": float(np.mean(np.array(fx) == np.array(ad))), "reps": args.reps}
        r = raw[name]
        what = "false alarms" if kind is None else "caught"
        rows.append(f"| {name} | {what} | {r['fixed_fail']:.3f} | {r['adaptive_fail']:.3f} | {100 * r['cases_share_mean']:.0f}% (median {100 * r['cases_share_median']:.0f}%) | {100 * r['agree']:.0f}% |")
        print(rows[-1], f"  [{time.perf_counter() - t1:.0f}s]", flush=True)
    floors = {m: float(np.mean([prefix_floor(build_checks(sr, base, o, AdaptiveSettings(stage=args.stage)), o, m)
                                for o in (seeded_order(cases, rep) for rep in range(min(args.reps, 50)))])) for m in (0.005, 0.02, 0.05)}
    print()
    print("Without noise, a gate that misses a planted 10% drop in any one check at most m of the time must generate, on an unchanged variant, at least: " +
          ", ".join(f"{100 * v:.0f}% of the cases (m = {m:g})" for m, v in floors.items()) + " (benchmarks/adaptive_frontier.prefix_floor)")
    print()
    print(f"| condition ({args.reps} seeded repetitions) | rate of | fixed-n gate | adaptive | adaptive cases generated (of {len(cases)}) | same verdict |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    out = Path(args.out or ROOT / "reports" / ("bench_adaptive.json" if args.pass_side == "evalsuite" else f"bench_adaptive_{args.pass_side}.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"stage": args.stage, "alpha": sr.alpha, "until": args.until, "tolerance": args.tolerance, "pass_side": args.pass_side,
                               "pass_max_seen": args.pass_max_seen, "cases": len(cases), "conditions": raw,
                               "prefix_floor": {str(m): v for m, v in floors.items()}}, indent=2) + "\n")


def _batch_figures(fig: dict, k: int = 10) -> tuple[float, float]:
    """Median seconds of the first and of the last `k` full batches (the stop's own decision left out)."""
    b = fig["batches"][:-1]
    return float(np.median(b[:k])), float(np.median(b[-k:]))


def run(quick: bool = False) -> list:
    """The per-batch timing rows of `make bench` (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import PREVIOUS_REF, Row, code_root, judge, median, ratio, run_child

    n_kb, n_brand, batch, rounds = (180, 120, 8, 1) if quick else (600, 400, 8, 3)
    child = ROOT / "benchmarks" / "child_adaptive.py"
    figs: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        prev = code_root(PREVIOUS_REF, Path(tmp))
        roots = {"this": ROOT} | ({"previous": prev} if prev else {})
        for r in range(rounds):
            for name in roots if r % 2 == 0 else list(roots)[::-1]:
                figs.setdefault(name, []).append(run_child(child, roots[name], str(ROOT / "tests"), str(n_kb), str(n_brand), str(batch)))
                f = figs[name][-1]
                print(f"  [adaptive] round {r + 1}/{rounds} {name}: {len(f['batches'])} batches, {f['wall_s']:.1f}s", flush=True)
    what = f"{n_kb + n_brand}-case synthetic suite ({n_kb} kb_qa, {n_brand} brand), batches of {batch}"
    rows = []
    for name, runs in figs.items():
        start, end = zip(*(_batch_figures(f) for f in runs))
        growth = ratio(list(end), list(start))
        n = len(runs[0]["batches"]) - 1
        figures = (f"{name} code{'' if name == 'this' else f' ({PREVIOUS_REF})'}: {runs[0]['generated']} of {runs[0]['total']} cases in {n} batches; "
                   f"first 10 batches {1000 * median(list(start)):.0f} ms, last 10 {1000 * median(list(end)):.0f} ms per batch (medians)")
        flat = judge(growth, 1.5) if len(runs) > 1 else ("met" if median(list(end)) <= 1.5 * median(list(start)) else "NOT met")
        # the target is this code's; the previous code's row shows the growth the change removed
        rows.append(Row("adaptive run, time per batch", f"{what}: last 10 / first 10 batches, {name} code", figures, growth if len(runs) > 1 else None,
                        "<= 1.5 (flat)" if name == "this" else "", flat if name == "this" else ""))
    if "previous" in figs:
        wall = ratio([f["wall_s"] for f in figs["this"]], [f["wall_s"] for f in figs["previous"]])
        rows.append(Row("adaptive run, time per batch", f"{what}: whole adaptive run, this / previous code",
                        f"this {median([f['wall_s'] for f in figs['this']]):.1f}s, previous {median([f['wall_s'] for f in figs['previous']]):.1f}s (medians)", wall))
    return rows


if __name__ == "__main__":
    main()
