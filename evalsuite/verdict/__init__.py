"""Judging: the paired comparison (`compare`), the rubric and its rules (`rubric`), the gate (`gate`), power figures (`power`) and summaries."""
