"""Scorers: pure functions of a case and an output, registered by name."""

from .base import SCORERS, Score, ScoreInput, ScoreRecord, ScorerSpec, scorer

__all__ = ["SCORERS", "Score", "ScoreInput", "ScoreRecord", "ScorerSpec", "scorer"]
