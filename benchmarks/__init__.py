"""Benchmarks: `python -m benchmarks` runs them all and writes reports/benchmarks.md (docs/performance.md)."""
