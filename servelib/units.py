"""Byte units and formatting.

The field mixes two systems. Datasheets and price pages count in powers of ten
(1 GB = 10**9 bytes, bandwidth in GB/s); PyTorch, vLLM and ``nvidia-smi`` print powers of
two (1 GiB = 2**30 bytes). servelib keeps bytes as bytes and converts only when printing.
"""
from __future__ import annotations

import math

from ._check import _real, positive_int

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_BINARY = (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))
_DECIMAL = (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB))


def fmt_bytes(n, *, binary: bool = True, digits: int = 3) -> str:
    """Format a byte count with the largest unit that keeps it >= 1.

    ``binary=True`` uses KiB/MiB/GiB/TiB (powers of two, as torch and vLLM print);
    ``binary=False`` uses KB/MB/GB/TB (powers of ten, as datasheets print).
    ``digits`` is the number of significant digits. Trailing zeros are dropped:
    ``fmt_bytes(327680) == '320 KiB'``, ``fmt_bytes(2.5 * GiB) == '2.5 GiB'``.

    Raises TypeError for a non-number and ValueError for NaN, infinity or a negative count, and
    for ``digits`` that is not an integer >= 1.
    """
    v = _real("n", n)
    if not 0 <= v < math.inf:
        raise ValueError(f"n must be >= 0 bytes and finite, got {n!r}")
    digits = positive_int("digits", digits)
    for name, size in (_BINARY if binary else _DECIMAL):
        if v >= size:
            return f"{v / size:.{digits}g} {name}"
    return f"{v:.{digits}g} B"
