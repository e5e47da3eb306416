"""Exercises that learners check and instructors grade.

``check(exercise_id, answer)`` gives feedback and records the result; the references live
in one module per chapter, all imported here so that every id is known.
"""
from . import kv  # noqa: F401  (registers the KV-cache chapter's exercises)
from . import economics  # noqa: F401  (registers the economics chapter's exercises)
from . import capstone  # noqa: F401  (registers the capstone chapter's exercises)
from . import prefill  # noqa: F401  (registers the prefill-and-decode chapter's exercises)
from . import roofline_ex  # noqa: F401  (registers the roofline chapter's exercises)
from . import batching  # noqa: F401  (registers the batching chapter's exercises)
from . import scheduling  # noqa: F401  (registers the scheduling chapter's exercises)
from . import engine  # noqa: F401  (registers the engine chapter's exercises)
from .check import check
from .registry import REGISTRY, Exercise, exercise

__all__ = ["check", "exercise", "Exercise", "REGISTRY"]
