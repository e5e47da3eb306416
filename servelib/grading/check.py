"""``check(exercise_id, answer)``: immediate feedback for a learner, a record for the grader."""
from __future__ import annotations

import json
import math
import os
from numbers import Real

from .registry import REGISTRY

#: Environment variable naming a JSON-lines file where each check appends its result
#: (set by the autograder; unset when a learner runs a notebook).
RESULTS_ENV = "SERVELIB_GRADING_RESULTS"

# (ratio answer/reference, message): the slips the book warns about.
COMMON_SLIPS = (
    (2**30 / 10**9, "your answer is 1.074x too large: GB (10^9) where GiB (2^30) was asked?"),
    (10**9 / 2**30, "your answer is 1.074x too small: GiB (2^30) where GB (10^9) was asked?"),
    (8.0, "your answer is 8x too large: bits instead of bytes, or attention heads instead of KV heads?"),
    (1 / 8, "your answer is 8x too small: bytes where bits were asked, or KV heads counted once per group?"),
    (1000.0, "your answer is 1000x too large: a price per 1M tokens where per 1k was asked?"),
    (1 / 1000, "your answer is 1000x too small: a price per 1k tokens where per 1M was asked?"),
    (100.0, "your answer is 100x too large: a percentage where a fraction in [0, 1] was asked?"),
    (1 / 100, "your answer is 100x too small: a fraction where a percentage was asked?"),
    (2.0, "your answer is 2x too large: K and V counted twice, or 2 bytes where 1 was asked?"),
    (0.5, "your answer is 2x too small: did you forget that the cache holds both K and V?"),
)


def _record(exercise_id: str, status: str) -> None:
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"exercise": exercise_id, "status": status}) + "\n")


def _hint(ratio: float, extra: tuple) -> str:
    for r, msg in tuple(extra) + COMMON_SLIPS:
        if abs(ratio / r - 1) < 0.02:
            return msg
    return ""


def check(exercise_id: str, answer) -> bool:
    """Compare ``answer`` with the servelib reference for ``exercise_id``; print and record.

    Numbers pass within the exercise's relative tolerance; bools and strings must match
    (strings case-insensitively). A wrong number gets a hint when it matches a common slip
    (GB vs GiB, bits vs bytes, heads vs KV heads, per-1k vs per-1M, percentage vs fraction).
    Never raises for a learner's input: an unknown id, ``...`` (not attempted) or a wrong
    type prints a clear message and returns False. Returns True when correct.
    """
    ex = REGISTRY.get(exercise_id) if isinstance(exercise_id, str) else None
    if ex is None:
        known = ", ".join(sorted(REGISTRY)) or "none loaded"
        print(f"[check] unknown exercise id {exercise_id!r}; known ids: {known}")
        return False
    if answer is ... or answer is None:
        print(f"[check] {exercise_id}: not attempted yet (replace ... with your answer)")
        _record(exercise_id, "not attempted")
        return False
    ref = ex.reference()
    if isinstance(ref, bool) or isinstance(ref, str):
        ok = (str(answer).strip().lower() == ref.strip().lower()) if isinstance(ref, str) \
            else (isinstance(answer, bool) and answer == ref)
        shown = repr(ref)
        ratio = None
    else:
        if isinstance(answer, bool) or not isinstance(answer, Real) or math.isnan(float(answer)):
            print(f"[check] {exercise_id}: expected a number{' in ' + ex.unit if ex.unit else ''}, "
                  f"got {type(answer).__name__} {answer!r}")
            _record(exercise_id, "wrong")
            return False
        ok = math.isclose(float(answer), float(ref), rel_tol=ex.rtol, abs_tol=1e-12)
        shown = f"{ref:.6g}{' ' + ex.unit if ex.unit else ''}"
        ratio = float(answer) / float(ref) if ref else None
    if ok:
        print(f"[check] {exercise_id}: correct")
    else:
        hint = _hint(ratio, ex.hints) if ratio else ""
        print(f"[check] {exercise_id}: not yet: {answer!r} is not within {ex.rtol:.1%} of the "
              f"reference. {hint}".rstrip())
    _record(exercise_id, "passed" if ok else "wrong")
    return ok
