"""``check(exercise_id, answer)``: immediate feedback for a learner, a record for the grader."""
from __future__ import annotations

import json
import math
import os

import numpy as np

from .registry import REGISTRY, Exercise

#: Environment variable naming a JSON-lines file where each check appends its result
#: (set by the autograder; unset when a learner runs a notebook).
RESULTS_ENV = "SERVELIB_GRADING_RESULTS"

#: The statuses a check records; the grader adds "error", "timeout" and "unreadable".
PASSED, WRONG, NOT_ATTEMPTED, ERROR = "passed", "wrong", "not attempted", "error"

# (ratio answer/reference, message): the slips the book warns about. The ratios are far
# enough apart (> 2%) that an answer matches at most one of them.
COMMON_SLIPS = (
    (2**30 / 10**9, "1.074x too large: GB (10^9 bytes) where GiB (2^30 bytes) was asked?"),
    (10**9 / 2**30, "1.074x too small: GiB (2^30 bytes) where GB (10^9 bytes) was asked?"),
    (2**20 / 10**6, "1.049x too large: MB (10^6 bytes) where MiB (2^20 bytes) was asked?"),
    (10**6 / 2**20, "1.049x too small: MiB (2^20 bytes) where MB (10^6 bytes) was asked?"),
    (2**40 / 10**12, "1.100x too large: TB (10^12 bytes) where TiB (2^40 bytes) was asked?"),
    (10**12 / 2**40, "1.100x too small: TiB (2^40 bytes) where TB (10^12 bytes) was asked?"),
    (8.0, "8x too large: bits where bytes were asked, or every attention (query) head counted "
          "where only the KV heads are cached (a GQA group of 8)?"),
    (1 / 8, "8x too small: bytes where bits were asked, or KV heads where attention heads were asked?"),
    (4.0, "4x too large: attention heads counted where only the KV heads are cached (a GQA group "
          "of 4), or 4-byte fp32 elements where 1-byte fp8 was asked?"),
    (1 / 4, "4x too small: KV heads where attention heads were asked (a GQA group of 4)?"),
    (2.0, "2x too large: K and V counted twice, or 2-byte fp16 where 1-byte fp8 was asked?"),
    (0.5, "2x too small: did you forget that the cache holds both K and V, or use 1 byte "
          "per element where fp16 takes 2?"),
    (1000.0, "1000x too large: a price per 1M tokens where per 1k was asked (or ms where s was asked)?"),
    (1 / 1000, "1000x too small: a price per 1k tokens where per 1M was asked (or s where ms was asked)?"),
    (10.0**6, "10^6x too large: a price per 1M tokens where a price per token was asked?"),
    (10.0**-6, "10^6x too small: a price per token where a price per 1M tokens was asked?"),
    (100.0, "100x too large: a percentage where a fraction in [0, 1] was asked?"),
    (1 / 100, "100x too small: a fraction where a percentage was asked?"),
    (3600.0, "3600x too large: per hour where per second was asked?"),
    (1 / 3600, "3600x too small: per second where per hour was asked?"),
    (-1.0, "the sign is wrong: check which quantity is subtracted from which."),
)


def _record(exercise_id: str, status: str) -> None:
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps({"exercise": exercise_id, "status": status}) + "\n")
    except OSError as err:  # feedback still reaches the learner; the grader will see no record
        print(f"[check] could not record the result in {path}: {err}")


def hint_for(ratio: float, extra: tuple = ()) -> str:
    """The message for a wrong answer that is ``ratio`` x the reference ('' if none fits).

    ``extra`` (an exercise's own ``(ratio, message)`` pairs) is tried before the common
    slips. A ratio matches within 1%, so a slip still shows through a rounded answer.
    """
    for r, msg in tuple(extra) + COMMON_SLIPS:
        if math.isfinite(ratio) and abs(ratio / r - 1) < 0.01:
            return f"Hint: {msg}"
    return ""


def _as_number(answer):
    """``answer`` as a float, or None if it is not a single real number.

    Accepts Python and numpy numbers, 0-d arrays and one-element tensors (what ``float()``
    converts), but not bools or strings: ``"4 GiB"`` is not a number.
    """
    if isinstance(answer, (bool, np.bool_, str, bytes, complex)):
        return None
    try:
        return float(answer)
    except Exception:  # TypeError, OverflowError, or whatever a learner's own class raises
        return None


def _short(obj) -> str:
    """``repr(obj)``, cut to a readable length (a learner may pass a huge object)."""
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _fmt(x: float, unit: str) -> str:
    return f"{x:.6g}{' ' + unit if unit else ''}"


def _compare(ex: Exercise, ref, answer) -> tuple[bool, str]:
    """(correct?, message for a wrong or unusable answer)."""
    if isinstance(ref, (bool, np.bool_)):
        if not isinstance(answer, (bool, np.bool_)):
            return False, f"expected True or False, got {type(answer).__name__} {_short(answer)}"
        return bool(answer) == bool(ref), "not yet: the other one."
    if isinstance(ref, str):
        if not isinstance(answer, str):
            return False, f"expected a string, got {type(answer).__name__} {_short(answer)}"
        return answer.strip().lower() == ref.strip().lower(), f"not yet: {_short(answer)} is not it."
    value = _as_number(answer)
    unit = f" in {ex.unit}" if ex.unit else ""
    if value is None:
        what = " (write the number only, without quotes or units)" if isinstance(answer, str) else ""
        return False, f"expected a number{unit}, got {type(answer).__name__} {_short(answer)}{what}"
    if not math.isfinite(value):
        return False, f"expected a finite number{unit}, got {_short(answer)}"
    ref = float(ref)
    if math.isclose(value, ref, rel_tol=ex.rtol, abs_tol=1e-12):
        return True, ""
    msg = (f"not yet: {_fmt(value, ex.unit)} is not the answer (it must be exact)." if ex.rtol == 0
           else f"not yet: {_fmt(value, ex.unit)} is not {ex.tolerance} of the answer.")
    hint = hint_for(value / ref, ex.hints) if ref else ""
    if not hint and ref.is_integer() and abs(value - ref) == 1:
        hint = ("Hint: off by one: a count must be rounded down (a sequence or a batch that "
                "does not fit whole does not fit), or a minimum rounded up?")
    return False, f"{msg} {hint}".rstrip()


class Checked:
    """What :func:`check` returns: truthy when the answer passed.

    It compares equal to True or False, and shows nothing when it is a notebook cell's last
    value (the printed feedback is enough; a bare ``True`` under every exercise is noise).
    """

    __slots__ = ("passed",)

    def __init__(self, passed: bool):
        self.passed = bool(passed)

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other) -> bool:
        return self.passed == other

    def __hash__(self) -> int:
        return hash(self.passed)

    def __repr__(self) -> str:
        return repr(self.passed)

    def _ipython_display_(self) -> None:
        """Display nothing in IPython/Jupyter."""


def check(exercise_id: str, answer=...) -> Checked:
    """Compare ``answer`` with the servelib reference for ``exercise_id``; print and record.

    Numbers pass within the exercise's stated relative tolerance (``Exercise.rtol``; 0
    means exact); bools must match; strings match case-insensitively. A wrong number gets a
    hint when it matches a common slip (GB vs GiB, bits vs bytes, attention heads vs KV
    heads, per-1k vs per-1M prices, a percentage for a fraction, off by one).

    Never raises for a learner's input: an unknown id, ``...`` or ``None`` (not attempted),
    a wrong type, NaN or infinity prints a clear message and returns False. The result
    (``passed``, ``wrong``, ``not attempted``, or ``error`` if the reference itself fails)
    is appended as a JSON line to the file named by ``$SERVELIB_GRADING_RESULTS`` when set.
    Returns a :class:`Checked`, truthy when correct. The feedback on a correct answer does
    not repeat the reference value, so a rendered page does not give answers away.
    """
    return Checked(_check(exercise_id, answer))


def _check(exercise_id, answer) -> bool:
    ex = REGISTRY.get(exercise_id) if isinstance(exercise_id, str) else None
    if ex is None:
        known = ", ".join(sorted(REGISTRY)) or "none loaded"
        print(f"[check] unknown exercise id {exercise_id!r}; known ids: {known}")
        return False
    if answer is ... or answer is None:
        print(f"[check] {exercise_id}: not attempted yet (replace ... with your answer)")
        _record(exercise_id, NOT_ATTEMPTED)
        return False
    try:
        ref = ex.reference()
        ok, message = _compare(ex, ref, answer)
    except Exception as err:  # a defect of the book (the learner's input is guarded): say so
        print(f"[check] {exercise_id}: the reference answer could not be computed or compared "
              f"({type(err).__name__}: {err}); please report this.")
        _record(exercise_id, ERROR)
        return False
    if ok:
        print(f"[check] {exercise_id}: correct")
    else:
        print(f"[check] {exercise_id}: {message}")
    _record(exercise_id, PASSED if ok else WRONG)
    return ok
