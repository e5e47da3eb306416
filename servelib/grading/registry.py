"""The exercise registry: each exercise id maps to a reference computed by servelib.

Chapters register their exercises in one module each (``servelib.grading.kv`` for the
KV-cache chapter, ...). A reference is a function, not a typed literal, so the answer key
cannot drift from the formulas the book teaches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import _check


@dataclass(frozen=True)
class Exercise:
    """One gradable exercise.

    ``id``: e.g. ``'kv-3'``. ``reference``: a zero-argument function returning the right
    answer (a number, a bool or a string). ``rtol``: relative tolerance for numbers.
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


REGISTRY: dict[str, Exercise] = {}


def exercise(exercise_id: str, *, rtol: float = 1e-3, unit: str = "", points: int = 1,
             hints: tuple = ()):
    """Decorator: register the decorated zero-argument function as ``exercise_id``'s reference.

    Raises ValueError if the id is already registered or the tolerance is outside [0, 1).
    """
    _check.fraction("rtol", rtol, open_right=True)

    def register(fn):
        if exercise_id in REGISTRY:
            raise ValueError(f"exercise id {exercise_id!r} is registered twice")
        REGISTRY[exercise_id] = Exercise(exercise_id, fn, rtol, unit, points, tuple(hints))
        return fn

    return register
