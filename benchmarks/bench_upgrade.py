"""The upgrade and compile-layer variants (issue 42) side by side: tokens/s measured interleaved,
compile and warm-up time apart, outputs identical to the baseline's.

    python benchmarks/bench_upgrade.py [--quick] [--rounds N] [--no-vllm]

1. `suites/upgrade.yaml` on the embedded model: every variant's backend is built the way the runner
   builds it (`make_backend`: transformers 5.25 in its own environment, through its worker) and
   loaded once (load and compile seconds recorded apart); then each round asks every variant for the
   same cases, in its own batch size, the order reversed every other round (ABCDE EDCBA ...). A
   variant's figure is its new tokens per second of generation; its ratio is the geometric mean of
   the per-round ratios to the baseline's, with a 95% interval. The first round is a warm-up (a
   compiled graph's first shapes, caches) and is not counted.
2. vLLM's compile layer (with `make vllm`): `enforce_eager: true` (the baseline, what the suites use
   on this CPU) against `enforce_eager: false` (vLLM compiles the model) and `batch_invariant: true`
   (`VLLM_BATCH_INVARIANT=1`), or the reason vLLM refuses one.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import REPO, Row, median, ratio  # noqa: E402

_VLLM_ENGINE = {"dtype": "bfloat16", "max_model_len": 2048, "enforce_eager": True, "seed": 0}


def _chunks(xs: list, n: int) -> list[list]:
    return [xs[i : i + n] for i in range(0, len(xs), max(1, n))]


def _loaded(variants: list, cases: list) -> tuple[dict[str, Any], dict[str, list], dict[str, dict], list[Row]]:
    """Each variant's backend loaded (or the reason it was refused), its requests, and its setup figures."""
    from evalsuite.backends.base import make_backend
    from evalsuite.run.prompting import build_requests

    backends: dict[str, Any] = {}
    requests: dict[str, list] = {}
    setup: dict[str, dict] = {}
    refused: list[Row] = []
    for v in variants:
        t0 = time.perf_counter()
        try:
            be = make_backend(v)
            be.load()
            err = None
        except Exception as exc:  # noqa: BLE001 - a refused variant is a figure, not a crash
            be, err = None, str(exc)
        if be is None or err:
            refused.append(Row("upgrade", f"{v.name}: refused", str(err)[:300], verdict="measured"))
            print(f"  [upgrade] {v.name}: refused: {str(err)[:300]}", flush=True)
            continue
        load_s = time.perf_counter() - t0
        env = be.environment()
        setup[v.name] = {"load_s": load_s, "compile_s": be.compile_s(), "libraries": env.get("libraries", {})}
        print(f"  [upgrade] {v.name}: loaded in {load_s:.1f}s, compile {setup[v.name]['compile_s']}, {env.get('libraries')}", flush=True)
        backends[v.name] = be
        requests[v.name] = build_requests(cases, v)
    return backends, requests, setup, refused


def _side(be: Any, reqs: list, batch: int):
    def call() -> tuple[float, int, dict[str, str]]:
        t0 = time.perf_counter()
        gens = [g for chunk in _chunks(reqs, batch) for g in be.generate(chunk)]
        dt = time.perf_counter() - t0
        bad = [g for g in gens if not g.ok]
        if bad:
            raise RuntimeError(f"{bad[0].variant} {bad[0].case_id}: {bad[0].error}")
        return dt, sum(g.new_tokens or 0 for g in gens), {g.case_id: g.text for g in gens}

    return call


def _rounds(sides: dict[str, Any], rounds: int, label: str) -> tuple[dict[str, list[tuple[float, int, dict[str, str]]]], dict[str, str]]:
    """Round 0 is a warm-up (not returned); then each side once per round, alternating order. A side
    that fails (vLLM's batch invariance dies on this CPU in its first batch) leaves the rounds with its
    error; the others go on. Returns the results of the sides that never failed, and the failures."""
    sides = dict(sides)
    out: dict[str, list] = {k: [] for k in sides}
    failed: dict[str, str] = {}
    for r in range(rounds + 1):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            try:
                res = sides[name]()
            except Exception as exc:  # noqa: BLE001 - a failing side is a figure, not the end of the benchmark
                failed[name] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"  [{label}] {name} failed in round {r}: {failed[name]}", flush=True)
                del sides[name], out[name]
                continue
            if r:
                out[name].append(res)
        if r and out:
            print(f"  [{label}] round {r}/{rounds}: " + ", ".join(f"{k} {v[-1][1] / v[-1][0]:.1f} tok/s" for k, v in out.items()), flush=True)
    return out, failed


def _failed_rows(label: str, failed: dict[str, str]) -> list[Row]:
    return [Row(label, f"{name}: failed", why, verdict="measured") for name, why in failed.items()]


def _measured(label: str, base: str, sides: dict[str, Any], rounds: int, setup: dict[str, dict]) -> list[Row]:
    """The sides' rounds as rows: ratios against `base` while it ran; every failed side as its own row."""
    res, failed = _rounds(sides, rounds, label.split(" (")[0])
    rows = _rows(label, base, res, setup) if base in res and len(res) > 1 else []
    return rows + _failed_rows(label, failed)


def _rows(label: str, base: str, res: dict[str, list], setup: dict[str, dict]) -> list[Row]:
    rows = []
    tps = {k: [n / dt for dt, n, _ in v] for k, v in res.items()}
    base_text = res[base][0][2]
    for name, series in res.items():
        text = series[0][2]
        same = sum(text.get(c) == t for c, t in base_text.items())
        stable = all(s[2] == text for s in series)
        s = setup.get(name, {})
        comp = s.get("compile_s")
        libs = ", ".join(f"{k} {v}" for k, v in (s.get("libraries") or {}).items())
        figures = (
            f"{median(tps[name]):.1f} tok/s (median of {len(series)}); same as {base} {same}/{len(base_text)}"
            f"{'' if stable else ', outputs changed between rounds'}; load {s.get('load_s', 0):.1f}s, "
            f"compile {'-' if comp is None else f'{comp:.1f}s'}; {libs}"
        )
        if name == base:
            rows.append(Row(label, f"{name} (baseline): tokens/s", figures, verdict="measured"))
        else:
            rows.append(Row(label, f"{name} / {base}: tokens/s", figures, ratio(tps[name], tps[base]), verdict="measured"))
    return rows


def _upgrade(quick: bool, rounds: int) -> list[Row]:
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import select_cases

    suite = load_suite(REPO / "suites" / "upgrade.yaml")
    tokens = 32 if quick else 64
    variants = [replace(v, generation=replace(v.generation, max_new_tokens=tokens)) for v in suite.variants]
    cases = select_cases(suite, ["brand", "code", "kb_qa"], 1 if quick else 2)
    backends, requests, setup, refused = _loaded(variants, cases)
    base = suite.baseline.name
    try:
        sides = {v.name: _side(backends[v.name], requests[v.name], v.generation.batch_size) for v in variants if v.name in backends}
        rows = _measured(f"upgrade suite ({len(cases)} cases, {tokens} new tokens)", base, sides, rounds, setup)
    finally:
        for be in backends.values():
            be.close()
    return rows + refused


def _vllm(quick: bool, rounds: int) -> list[Row]:
    from evalsuite.backends import vllm_env
    from evalsuite.cases.suite import Variant
    from evalsuite.errors import EvalsuiteError

    try:
        if vllm_env.locate() is None:
            return [Row("vllm compile layer", "skipped", "no .venv-vllm (make vllm)", verdict="not judged")]
    except EvalsuiteError as exc:
        return [Row("vllm compile layer", "skipped", str(exc), verdict="not judged")]
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import select_cases

    suite = load_suite(REPO / "suites" / "upgrade.yaml")
    cases = select_cases(suite, ["brand", "code", "kb_qa"], 1 if quick else 2)
    gen = replace(suite.baseline.generation, max_new_tokens=32 if quick else 64, batch_size=8)
    variants = [
        Variant(name="vllm-eager", backend="vllm", model="embedded", options=dict(_VLLM_ENGINE), generation=gen, baseline=True),
        Variant(name="vllm-compiled", backend="vllm", model="embedded", options=dict(_VLLM_ENGINE, enforce_eager=False), generation=gen),
        Variant(name="vllm-batch-invariant", backend="vllm", model="embedded", options=dict(_VLLM_ENGINE, batch_invariant=True), generation=gen),
    ]
    rows: list[Row] = []
    # one engine at a time in memory would not interleave; two cores hold two small engines
    backends, requests, setup, refused = _loaded(variants, cases)
    try:
        sides = {v.name: _side(backends[v.name], requests[v.name], 8) for v in variants if v.name in backends}
        if "vllm-eager" in sides and len(sides) > 1:
            rows = _measured(f"vllm compile layer ({len(cases)} cases)", "vllm-eager", sides, rounds, setup)
    finally:
        for be in backends.values():
            be.close()
    return rows + refused


def run(quick: bool = False, rounds: int | None = None, with_vllm: bool = True) -> list[Row]:
    n = rounds or (2 if quick else 6)
    rows = _upgrade(quick, n)
    if with_vllm:
        rows += _vllm(quick, n)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    got = run("--quick" in args, int(args[args.index("--rounds") + 1]) if "--rounds" in args else None, "--no-vllm" not in args)
    for row in got:
        print(" | ".join(row.cells()))
