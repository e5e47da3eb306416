"""The exercise registry: each exercise id maps to a reference computed by servelib.

Chapters register their exercises in one module each (``servelib.grading.kv`` for the
KV-cache chapter, ...). A reference is a function, not a typed literal, so the answer key
cannot drift from the formulas the book teaches.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .. import _check

#: What an exercise id looks like: a chapter prefix and a number, e.g. ``kv-3``. The same
#: pattern finds ``check("kv-3", ...)`` calls in notebooks (student versions, grader).
ID_PATTERN = r"[A-Za-z0-9][\w-]*"


@dataclass(frozen=True)
class Exercise:
    """One gradable exercise.

    ``id``: e.g. ``'kv-3'``. ``reference``: a zero-argument function returning the right
    answer (a number, a bool or a string). ``rtol``: relative tolerance for numbers
    (0 means the answer must be exact, as for a count of sequences or GPUs).
    ``unit``: printed beside numbers. ``points``: marks when correct.
    ``hints``: extra ``(ratio, message)`` pairs: an answer that is ``ratio`` x the reference
    gets ``message`` (the common slips are built in, see :mod:`servelib.grading.check`).
    """

    id: str
    reference: Callable[[], Any]
    rtol: float = 1e-3
    unit: str = ""
    points: int = 1
    hints: tuple = ()

    @property
    def tolerance(self) -> str:
        """The tolerance in words, as the learner sees it: ``'exact'`` or ``'within 0.1%'``."""
        return "exact" if self.rtol == 0 else f"within {self.rtol * 100:g}%"


REGISTRY: dict[str, Exercise] = {}


def exercise(exercise_id: str, *, rtol: float = 1e-3, unit: str = "", points: int = 1,
             hints: tuple = ()):
    """Decorator: register the decorated zero-argument function as ``exercise_id``'s reference.

    Raises ValueError if the id is already registered, is not a word such as ``kv-3``
    (letters, digits, ``_`` and ``-``), the tolerance is outside [0, 1), ``points`` is not
    an integer >= 1, or a hint is not a ``(positive ratio, message)`` pair.
    """
    if not isinstance(exercise_id, str) or not re.fullmatch(ID_PATTERN, exercise_id):
        raise ValueError(f"exercise_id must look like 'kv-3' (letters, digits, '_', '-'), "
                         f"got {exercise_id!r}")
    _check.fraction("rtol", rtol, open_right=True)
    _check.positive_int("points", points)
    for pair in hints:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], str)):
            raise ValueError(f"hints must be (ratio, message) pairs, got {pair!r}")
        _check.positive("hint ratio", pair[0])

    def register(fn):
        if exercise_id in REGISTRY:
            raise ValueError(f"exercise id {exercise_id!r} is registered twice")
        REGISTRY[exercise_id] = Exercise(exercise_id, fn, rtol, unit, points, tuple(hints))
        return fn

    return register
