"""Argument checks shared by every servelib function.

Each check returns the value (as a float or int) or raises an error that names the
argument and the range it must lie in, so a bad input never becomes a quiet wrong number.
"""
from __future__ import annotations

import math
from numbers import Integral, Real


def _real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a number, got NaN")
    return value


def positive(name: str, value) -> float:
    """Return ``value`` as a float; raise unless it is finite and > 0."""
    v = _real(name, value)
    if not (0 < v < math.inf):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def non_negative(name: str, value) -> float:
    """Return ``value`` as a float; raise unless it is finite and >= 0."""
    v = _real(name, value)
    if not (0 <= v < math.inf):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return v


def fraction(name: str, value, *, open_right: bool = False) -> float:
    """Return ``value`` as a float; raise unless it lies in [0, 1] (or [0, 1) if ``open_right``)."""
    v = _real(name, value)
    hi_ok = v < 1 if open_right else v <= 1
    if not (0 <= v and hi_ok):
        rng = "[0, 1)" if open_right else "[0, 1]"
        hint = " (a fraction, not a percentage)" if v > 1 else ""
        raise ValueError(f"{name} must lie in {rng}{hint}, got {value!r}")
    return v


# Above 2**53 a float no longer holds every integer: 1e308 is not a count anyone meant.
_EXACT_FLOAT_INT = 2**53


def _integral_float(value) -> bool:
    return (isinstance(value, Real) and not isinstance(value, bool) and float(value).is_integer()
            and abs(float(value)) <= _EXACT_FLOAT_INT)


def positive_int(name: str, value) -> int:
    """Return ``value`` as an int; raise unless it is an integer >= 1.

    A float is accepted when it is a whole number no larger than 2**53 (``8192.0``), not
    ``8192.5`` nor ``1e308``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        if _integral_float(value):
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer >= 1, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def non_negative_int(name: str, value) -> int:
    """Return ``value`` as an int; raise unless it is an integer >= 0."""
    if isinstance(value, bool) or not (isinstance(value, Integral) or _integral_float(value)):
        raise TypeError(f"{name} must be an integer >= 0, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def finite_result(what: str, value: float, **inputs) -> float:
    """Return ``value``; raise ValueError naming ``inputs`` when it overflowed to inf or NaN.

    Each input may lie in its range while their combination leaves a float's range (a
    commitment of 1e308 USD at 1e-300 USD per token): that is bad input, not a volume of inf.
    """
    if not math.isfinite(value):
        given = ", ".join(f"{k}={v!r}" for k, v in inputs.items())
        raise ValueError(f"{what} overflows a float for {given}: these inputs are too large or too "
                         "small together")
    return value


def boolean(name: str, value) -> bool:
    """Return ``value``; raise TypeError unless it is a real bool (a string such as "no" is truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}"[:300])
    return value


def choice(name: str, value, allowed) -> str:
    """Return ``value``; raise unless it is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)!r}, got {value!r}")
    return value


def instance(name: str, value, cls, what: str | None = None):
    """Return ``value``; raise TypeError naming ``name`` unless it is an instance of ``cls``."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {what or 'a ' + cls.__name__}, got {type(value).__name__} {value!r}"[:300])
    return value
