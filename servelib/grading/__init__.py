"""Exercises that learners check and instructors grade.

``check(exercise_id, answer)`` gives feedback and records the result; the references live
in one module per chapter, all imported here so that every id is known.
"""
from . import kv  # noqa: F401  (registers the KV-cache chapter's exercises)
from . import economics  # noqa: F401  (registers the economics chapter's exercises)
from . import capstone  # noqa: F401  (registers the capstone chapter's exercises)
from .check import check
from .registry import REGISTRY, Exercise, exercise

__all__ = ["check", "exercise", "Exercise", "REGISTRY"]
