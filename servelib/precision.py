"""Number formats for weights and the KV cache: bytes per element, scales included.

A quantized tensor stores each element in a few bits and, for every group of elements,
the numbers that map those bits back to values (a scale, often a zero point). Their bytes
count too: 4-bit weights with a 16-bit scale and a 16-bit zero point per group of 32 take
0.5 + 4/32 = 0.625 bytes per parameter, not 0.5. This module turns a format's name into
the plain ``bytes_per_param`` / ``bytes_per_elem`` numbers that :mod:`servelib.memory` and
:mod:`servelib.roofline` take. What a format buys in speed, concurrency and cost is
:mod:`servelib.quantization`.

Formats (sources of the layouts):

* ``bf16``, ``fp16``: 2 bytes, the unquantized baseline.
* ``fp8``: 1 byte (E4M3, Micikevicius et al. 2022, arXiv:2209.05433); one scale per tensor,
  negligible and not counted. Used for weights on GPUs with fp8 tensor cores and for the
  KV cache (vLLM ``kv_cache_dtype="fp8"``).
* ``int8``: 1 byte; one 16-bit scale per output channel (a row of thousands of weights:
  under 0.05% more, not counted): gpt-fast's int8 weight-only layout.
* ``int4-g32``: 4 bits plus a 16-bit scale and a 16-bit zero point per group of 32
  (gpt-fast's ``int4`` mode, ``--groupsize 32``): 0.625 bytes.
* ``int4-g128``: 4 bits plus a 16-bit scale and a 4-bit zero point per group of 128 (the
  AWQ and GPTQ checkpoint layout): 0.5195 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check
from .models import ModelSpec


@dataclass(frozen=True)
class Precision:
    """A storage format: ``bits`` per element, plus ``group_bytes`` of scale (and zero point)
    per ``group_size`` elements (``group_size`` None: no per-group overhead counted).

    ``bytes_per_elem`` (property) is what one element costs in memory, overhead included.
    ``quantized``: True when values are mapped through a scale (anything below 16 bits).
    Raises ValueError for non-positive bits, a group size below 1, or negative group bytes.
    """

    name: str
    bits: int
    group_size: int | None = None
    group_bytes: float = 0.0
    description: str = ""

    def __post_init__(self):
        _check.positive_int("bits", self.bits)
        if self.group_size is not None:
            _check.positive_int("group_size", self.group_size)
        _check.non_negative("group_bytes", self.group_bytes)
        if self.group_bytes and self.group_size is None:
            raise ValueError("group_bytes needs a group_size")

    @property
    def bytes_per_elem(self) -> float:
        """Bytes one element occupies: ``bits / 8 + group_bytes / group_size``."""
        overhead = self.group_bytes / self.group_size if self.group_size else 0.0
        return self.bits / 8 + overhead

    @property
    def quantized(self) -> bool:
        """True for formats narrower than 16 bits (their values go through a scale)."""
        return self.bits < 16


_PRECISIONS = {p.name: p for p in (
    Precision("bf16", 16, description="bfloat16, the unquantized baseline"),
    Precision("fp16", 16, description="IEEE half precision"),
    Precision("fp8", 8, description="fp8 E4M3, one scale per tensor (not counted)"),
    Precision("int8", 8, description="int8, one 16-bit scale per output channel (not counted)"),
    Precision("int4-g32", 4, 32, 4.0, "int4, 16-bit scale and 16-bit zero point per 32 (gpt-fast)"),
    Precision("int4-g128", 4, 128, 2.5, "int4, 16-bit scale and 4-bit zero point per 128 (AWQ, GPTQ)"),
)}


def list_precisions() -> list[str]:
    """Names of the preset formats, narrowest last: bf16, fp16, fp8, int8, int4-g32, int4-g128."""
    return list(_PRECISIONS)


def get_precision(precision: str | Precision) -> Precision:
    """The :class:`Precision` called ``precision`` (case-insensitive), or ``precision`` itself.

    Raises TypeError for anything but a string or a Precision, KeyError listing the known
    names for an unknown one.
    """
    if isinstance(precision, Precision):
        return precision
    if not isinstance(precision, str):
        raise TypeError(f"precision must be a format name or a Precision, got {type(precision).__name__}")
    key = precision.strip().lower()
    if key not in _PRECISIONS:
        raise KeyError(f"unknown precision {precision!r}; known: {', '.join(_PRECISIONS)}")
    return _PRECISIONS[key]


def bytes_per_param(weights: str | Precision) -> float:
    """Bytes per weight in format ``weights``, scales included: the ``bytes_per_param`` of
    :func:`servelib.memory.weight_bytes`. Example: ``int4-g32`` is 0.625."""
    return get_precision(weights).bytes_per_elem


def bytes_per_elem(kv: str | Precision) -> float:
    """Bytes per KV-cache element in format ``kv``: the ``bytes_per_elem`` of
    :func:`servelib.memory.kv_bytes_per_token`. Example: ``fp8`` is 1, half of ``bf16``."""
    return get_precision(kv).bytes_per_elem


def quantized_weight_bytes(model: ModelSpec, weights: str | Precision = "bf16", *,
                           embedding: str | Precision = "bf16") -> float:
    """Bytes of a model whose linear layers are stored in ``weights`` and whose input
    embedding table (``vocab_size x hidden_size``) stays in ``embedding``.

    Quantization tools replace the linear layers (the LM head included) and leave the
    embedding table, a lookup rather than a matrix product, in 16 bits; gpt-fast does so,
    and its published bandwidth column is reproduced this way. With both formats equal it
    is :func:`servelib.memory.weight_bytes`. Raises TypeError/KeyError as
    :func:`get_precision`.
    """
    _check.instance("model", model, ModelSpec)
    table = model.vocab_size * model.hidden_size
    return ((model.n_params - table) * bytes_per_param(weights)
            + table * bytes_per_param(embedding))


def effective_bytes_per_param(model: ModelSpec, weights: str | Precision = "bf16", *,
                              embedding: str | Precision = "bf16") -> float:
    """:func:`quantized_weight_bytes` per parameter: the single ``bytes_per_param`` that gives
    the model's real weight bytes to :mod:`servelib.memory` and :mod:`servelib.roofline`.

    Example: Llama-2-7B with int4-g32 linear layers and a bf16 embedding table averages
    0.652 bytes per parameter (0.625 for the layers alone).
    """
    return quantized_weight_bytes(model, weights, embedding=embedding) / model.n_params
