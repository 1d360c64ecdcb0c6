"""Performance verdicts that hold on a noisy machine.

One sequential pass per variant measures the machine's mood as much as the variant: another job
starting halfway through makes whichever variant ran then look slow. So evalsuite times variants
*interleaved*: short blocks of the same requests, baseline and variants alternating (ABBA order,
repeated), every block generated afresh (never served from the cache). Each round gives one paired
ratio per variant (variant block / baseline block of the same round), slow drifts of the machine
cancel within a round, and the spread of the ratios over rounds gives a confidence interval.

The `timing:` settings are parsed with the suite (evalsuite.cases.options); the interleaved timer
that writes a run's `timing.json` is the runner's (evalsuite.run.timing). This package is the statistics:

- `stats`: paired log-ratio statistics: a ratio with its t confidence interval; a timing document's paired figures
- `verdict`: the rubric's performance rules on those intervals: pass, fail or cannot judge
"""

from .stats import RatioCI, paired_figures, paired_ratio
from .verdict import PerfCheck, judge_ratio

__all__ = ["PerfCheck", "RatioCI", "judge_ratio", "paired_figures", "paired_ratio"]
