"""``check(exercise_id, answer)``: immediate feedback for a learner, an answer for the grader.

In a learner's kernel ``check`` compares the answer with the reference and prints the
verdict. Under the autograder it also appends the *answer* (never a verdict) to the file
named by ``$SERVELIB_GRADING_RESULTS``; the grader compares those answers with references it
computes in its own process (:mod:`servelib.grading.grade`), so nothing a submission does
to ``check`` or to that file can make a wrong answer pass.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from .registry import REGISTRY, Exercise
from .variants import inputs_for

#: Environment variable naming a JSON-lines file where each check appends the answer it was
#: given (set by the autograder; unset when a learner runs a notebook).
RESULTS_ENV = "SERVELIB_GRADING_RESULTS"

#: The verdicts of a check; the grader adds "timeout" and "unreadable".
PASSED, WRONG, NOT_ATTEMPTED, ERROR = "passed", "wrong", "not attempted", "error"
#: Longest string answer kept (a learner's answer is a number, a bool or a short word).
MAX_STRING = 200

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


def encode_answer(answer) -> dict:
    """``answer`` as JSON-ready data: what crosses from a learner's kernel to the grader.

    ``{"kind": "none"}`` for ``...``/None, ``"bool"``, ``"str"`` (cut to :data:`MAX_STRING`
    characters), ``"number"`` (its ``repr`` as a float, so NaN and infinity survive JSON),
    or ``"other"`` with the type's name and a short repr. Never raises.
    """
    if answer is ... or answer is None:
        return {"kind": "none"}
    if isinstance(answer, (bool, np.bool_)):
        return {"kind": "bool", "value": bool(answer)}
    if isinstance(answer, str):
        return {"kind": "str", "value": answer[:MAX_STRING]}
    value = _as_number(answer)
    if value is not None:
        return {"kind": "number", "value": repr(value)}
    return {"kind": "other", "type": type(answer).__name__[:60], "repr": _short(answer)}


class Unusable:
    """An answer that is not a number, a bool or a string, as the grader receives it."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = str(type_name)[:60], str(text)[:60]

    def __repr__(self) -> str:
        return self.text


def decode_answer(data):
    """The answer :func:`encode_answer` wrote (``...`` for none); an :class:`Unusable` for
    anything else, including data a submission forged. Never raises."""
    kind = data.get("kind") if isinstance(data, dict) else None
    value = data.get("value") if isinstance(data, dict) else None
    if kind == "none":
        return ...
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "str" and isinstance(value, str):
        return value[:MAX_STRING]
    if kind == "number" and isinstance(value, str) and len(value) < 40:
        try:
            return float(value)
        except ValueError:
            pass
    if kind == "other" and isinstance(data.get("type"), str) and isinstance(data.get("repr"), str):
        return Unusable(data["type"], data["repr"])
    return Unusable("invalid record", _short(data))


def _record(exercise_id: str, answer, inputs: dict) -> None:
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = json.dumps({"exercise": exercise_id, "answer": encode_answer(answer),
                       "inputs": {str(k)[:60]: v for k, v in list(inputs.items())[:20]}}, default=_short)
    try:
        with open(path, "a") as fh:
            fh.write(line[:4000] + "\n")
    except OSError as err:  # feedback still reaches the learner; the grader will see no answer
        print(f"[check] could not record the answer in {path}: {err}")


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


def _what(answer) -> str:
    """``'list [1, 2]'``: the type and a short repr of an unusable answer."""
    name = answer.type_name if isinstance(answer, Unusable) else type(answer).__name__
    return f"{name} {_short(answer)}"


def compare(ex: Exercise, ref, answer) -> tuple[bool, str]:
    """(correct?, message for a wrong or unusable answer) for ``answer`` against ``ref``.

    The message gives the answer, the tolerance and the hint for a common slip; never the
    reference. The grader calls this in its own process with the references it computed.
    """
    if isinstance(ref, (bool, np.bool_)):
        if not isinstance(answer, (bool, np.bool_)):
            return False, f"expected True or False, got {_what(answer)}"
        return bool(answer) == bool(ref), "not yet: the other one."
    if isinstance(ref, str):
        if not isinstance(answer, str):
            return False, f"expected a string, got {_what(answer)}"
        return answer.strip().lower() == ref.strip().lower(), f"not yet: {_short(answer)} is not it."
    value = _as_number(answer)
    unit = f" in {ex.unit}" if ex.unit else ""
    if value is None:
        what = " (write the number only, without quotes or units)" if isinstance(answer, str) else ""
        return False, f"expected a number{unit}, got {_what(answer)}{what}"
    if not math.isfinite(value):
        return False, f"expected a finite number{unit}, got {_short(answer)}"
    ref = float(ref)
    if math.isclose(value, ref, rel_tol=ex.rtol, abs_tol=1e-12):
        return True, ""
    msg = (f"not yet: {_fmt(value, ex.unit)} is not the answer (it must be exact)." if ex.rtol == 0
           else f"not yet: {_fmt(value, ex.unit)} is not {ex.tolerance} of the answer.")
    off_by_one = ref.is_integer() and abs(value - ref) == 1
    # For a count, off by one comes first: 11 for 10 sequences is no TB-for-TiB slip.
    hint = "" if off_by_one and ex.rtol == 0 else hint_for(value / ref, ex.hints) if ref else ""
    if not hint and off_by_one:
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


def check(exercise_id: str, answer=..., **inputs) -> Checked:
    """Compare ``answer`` with the servelib reference for ``exercise_id``; print the verdict.

    ``inputs`` name a per-student variant (``check("kv-2", answer, context_len=16_384)``);
    without them the book's own values are used. Numbers pass within the exercise's stated
    relative tolerance (``Exercise.rtol``; 0 means exact); bools must match; strings match
    case-insensitively. A wrong number gets a hint when it matches a common slip (GB vs GiB,
    bits vs bytes, attention heads vs KV heads, per-1k vs per-1M prices, a percentage for a
    fraction, off by one).

    Never raises for a learner's input: an unknown id or input, ``...`` or ``None`` (not
    attempted), a wrong type, NaN or infinity prints a clear message and returns False.
    Under the autograder (``$SERVELIB_GRADING_RESULTS`` set) the answer and the inputs are
    appended to that file as a JSON line; the grader, not this function, decides the grade.
    Returns a :class:`Checked`, truthy when correct. The feedback on a correct answer does
    not repeat the reference value, so a rendered page does not give answers away.
    """
    ex = REGISTRY.get(exercise_id) if isinstance(exercise_id, str) else None
    if ex is None:
        known = ", ".join(sorted(REGISTRY)) or "none loaded"
        print(f"[check] unknown exercise id {exercise_id!r}; known ids: {known}")
        return Checked(False)
    _record(exercise_id, answer, inputs)
    status, message = verdict(ex, answer, inputs)
    print(f"[check] {exercise_id}: {message}")
    return Checked(status == PASSED)


def verdict(ex: Exercise, answer, inputs: dict | None = None) -> tuple[str, str]:
    """(status, message) for ``answer`` to the variant ``inputs`` of ``ex`` (see :func:`check`).

    The status is ``passed``, ``wrong``, ``not attempted`` or ``error`` (the reference itself
    could not be computed: a defect of the book, which the message asks to report).
    """
    if answer is ... or answer is None:
        return NOT_ATTEMPTED, "not attempted yet (replace ... with your answer)"
    try:
        given = inputs_for(ex, inputs)
    except ValueError as err:
        return WRONG, f"{err}; keep the inputs your notebook gave you."
    try:
        ok, message = compare(ex, ex.reference(**given), answer)
    except Exception as err:  # a defect of the book (the learner's input is guarded): say so
        return ERROR, (f"the reference answer could not be computed or compared "
                       f"({type(err).__name__}: {err}); please report this.")
    return (PASSED, "correct") if ok else (WRONG, message)
