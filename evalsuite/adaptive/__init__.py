"""Adaptive verdicts: generate a variant's cases only until its gate verdict is statistically decided.

`sequential` holds the anytime-valid tests (betting e-processes, with and without replacement),
`verdict` turns rubric rules into sequential checks and decides them, `driver` runs a suite
adaptively (`evalsuite run SUITE --adaptive`) and replays stored runs, `gating` is the gate of an
adaptive run. How the error rates are kept: docs/thresholds.md, "Adaptive verdicts".
"""
