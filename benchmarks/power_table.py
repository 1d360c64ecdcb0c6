"""Print the power tables of docs/thresholds.md (computed exactly; see evalsuite/power.py)."""

from evalsuite.power import tables

if __name__ == "__main__":
    print(tables())
