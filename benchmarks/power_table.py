"""Print the power tables of docs/thresholds.md (computed exactly; see evalsuite/verdict/power.py)."""

from evalsuite.verdict.power import tables

if __name__ == "__main__":
    print(tables())
