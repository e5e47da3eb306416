"""The exercise registry: each exercise id maps to a reference computed by servelib.

Checklist for a new exercise (the tests named hold each point):

1. **Reference**: ``@exercise("kv-8", rtol=..., unit=...)`` on a function whose inputs (model,
   GPU, context length, prices, mix ...) are keyword arguments with the book's values as
   defaults, in the chapter's module here.
2. **vary**: the inputs that may differ between students and their values, the default among
   them. Every combination must be solvable: a finite reference, a deployment that fits in
   the memory it describes, and the exercise's own ``hints`` still firing on the slip they
   name (``tests/test_grading_variants.py``).
3. **text**: the statement as a ``str.format`` template over the inputs, or a function of
   them. The chapter's ``**kv-8.** ...`` markdown cell must equal its default rendering word
   for word; the statement must state every number it needs (a student's other exercises
   show other variants, so "the deployment of kv-6" means nothing to them). Edit the
   chapter's ``notebooks/NN_name.py`` and regenerate it with ``scripts/nbsync.py``.
4. **rtol**: 0 for counts; otherwise the smallest tolerance that accepts an answer worked from
   the numbers the statement prints, at the precision printed, yet refuses the usual slips.
5. **Tolerance entries** in ``tests/test_grading_tolerance.py``: ``HAND[id]``, that worked
   answer, and ``SLIPS[id]``, the usual wrong answers with the hint each must get; both are
   tried in every variant.
6. **Counts**: tests that count a chapter's exercises or points read them from
   :data:`REGISTRY`, never as a literal.

Chapters register their exercises in one module each (``servelib.grading.kv`` for the
KV-cache chapter, ...). A reference is a function, not a typed literal, so the answer key
cannot drift from the formulas the book teaches. Its inputs (model, GPU, context length,
prices ...) are keyword arguments whose defaults are the book's values; ``vary`` and
``text`` declare the per-student variants (see :mod:`servelib.grading.variants`).
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import _check

#: What an exercise id looks like: a chapter prefix and a number, e.g. ``kv-3``. The same
#: pattern finds ``check("kv-3", ...)`` calls in notebooks (student versions, grader).
ID_PATTERN = r"[A-Za-z0-9][\w-]*"
#: Names an input may not take: they are ``check``'s own arguments.
_RESERVED = {"exercise_id", "answer"}


@dataclass(frozen=True, eq=False)
class Exercise:
    """One gradable exercise.

    ``id``: e.g. ``'kv-3'``. ``reference``: a function of keyword inputs with defaults (the
    book's values), returning the right answer (a number, a bool or a string); called with
    no argument it answers the book's own variant. ``rtol``: relative tolerance for numbers
    (0 means the answer must be exact, as for a count of sequences or GPUs).
    ``unit``: printed beside numbers. ``points``: marks when correct.
    ``hints``: extra ``(ratio, message)`` pairs: an answer that is ``ratio`` x the reference
    gets ``message`` (the common slips are built in, see :mod:`servelib.grading.check`).
    ``vary``: for each input that may differ between students, the values it may take
    (``None``: no variant declared). ``text``: the statement as the chapter prints it, a
    ``str.format`` template over the inputs.
    """

    id: str
    reference: Callable[..., Any]
    rtol: float = 1e-3
    unit: str = ""
    points: int = 1
    hints: tuple = ()
    vary: dict | None = None
    text: str | None = field(default=None, repr=False)

    @property
    def tolerance(self) -> str:
        """The tolerance in words, as the learner sees it: ``'exact'`` or ``'within 0.1%'``."""
        return "exact" if self.rtol == 0 else f"within {self.rtol * 100:g}%"

    @property
    def defaults(self) -> dict:
        """The reference's keyword inputs and their defaults: the book's own variant."""
        return {name: p.default for name, p in inspect.signature(self.reference).parameters.items()
                if p.default is not inspect.Parameter.empty}


REGISTRY: dict[str, Exercise] = {}


def _check_vary(exercise_id: str, fn, vary, text) -> dict | None:
    """``vary`` as ``{input: tuple of values}``, checked against ``fn``'s keyword defaults."""
    if vary is None:
        return None
    if not isinstance(vary, dict):
        raise TypeError(f"vary must be a dict of input name -> allowed values, got {type(vary).__name__}")
    params = inspect.signature(fn).parameters
    checked = {}
    for name, values in vary.items():
        p = params.get(name)
        if name in _RESERVED or p is None or p.default is inspect.Parameter.empty:
            raise ValueError(f"{exercise_id}: vary names {name!r}, which is not a keyword input with a "
                             f"default of its reference (inputs: {', '.join(params) or 'none'})")
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{exercise_id}: vary[{name!r}] must be a sequence of values, got {values!r}")
        values = tuple(values)
        if p.default not in values:
            raise ValueError(f"{exercise_id}: vary[{name!r}] must include the default {p.default!r}")
        checked[name] = values
    if checked and not text:
        raise ValueError(f"{exercise_id}: an exercise whose inputs vary needs its statement as text=")
    return checked


def exercise(exercise_id: str, *, rtol: float = 1e-3, unit: str = "", points: int = 1,
             hints: tuple = (), vary: dict | None = None, text: str | None = None):
    """Decorator: register the decorated function as ``exercise_id``'s reference.

    The function's inputs are keyword arguments whose defaults are the book's values.
    ``vary={"context_len": (8192, 16_384, 32_768)}`` lets an input take other values in
    per-student variants (the default must be one of them); ``text`` is then the statement
    as the chapter prints it, with ``{context_len:,}`` where the input appears (see
    :mod:`servelib.grading.variants`).

    Raises ValueError if the id is already registered, is not a word such as ``kv-3``
    (letters, digits, ``_`` and ``-``), the tolerance is outside [0, 1), ``points`` is not
    an integer >= 1, a hint is not a ``(positive ratio, message)`` pair, ``vary`` names an
    input the reference does not take with a default or leaves its default out, or an
    exercise that varies has no ``text``.
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
        REGISTRY[exercise_id] = Exercise(exercise_id, fn, rtol, unit, points, tuple(hints),
                                         _check_vary(exercise_id, fn, vary, text), text)
        return fn

    return register
