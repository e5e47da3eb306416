"""Exercises that learners check and instructors grade.

``check(exercise_id, answer)`` gives feedback (and, under the autograder, records the answer);
the references live in one module per chapter, all imported here so that every id is known.
Each exercise declares its per-student variants (:mod:`.variants`); the instructor tools are
``python -m servelib.grading student|grade|report`` (:mod:`.student`, :mod:`.grade`,
:mod:`.report`, with :mod:`.roster` and :mod:`.integrity`).
"""
from . import kv  # noqa: F401  (registers the KV-cache chapter's exercises)
from . import economics  # noqa: F401  (registers the economics chapter's exercises)
from . import capstone  # noqa: F401  (registers the capstone chapter's exercises)
from . import prefill  # noqa: F401  (registers the prefill-and-decode chapter's exercises)
from . import roofline_ex  # noqa: F401  (registers the roofline chapter's exercises)
from . import batching  # noqa: F401  (registers the batching chapter's exercises)
from . import scheduling  # noqa: F401  (registers the scheduling chapter's exercises)
from . import quantization  # noqa: F401  (registers the quantization chapter's exercises)
from . import speculative  # noqa: F401  (registers the speculative-decoding chapter's exercises)
from . import disagg  # noqa: F401  (registers the disaggregated prefill and decode chapter's exercises)
from . import engine  # noqa: F401  (registers the engine chapter's exercises)
from .check import check
from .registry import REGISTRY, Exercise, exercise

__all__ = ["check", "exercise", "Exercise", "REGISTRY"]
