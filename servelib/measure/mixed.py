"""A mixed step, measured: prompt tokens joining decode tokens in one weight-bound matrix product.

In a serving step every token of the step, decode or prompt, goes through each weight
matrix together: one ``(tokens x d) @ (d x d)`` product per matrix. With few tokens the
product is bound by reading the weights, and more tokens ride along almost free; past the
ridge point it is bound by arithmetic and each token adds its own time. Where the knee
falls, and whether the measured time follows the roofline's ``max`` (compute and memory
traffic overlapped) or its sum (not overlapped), is what a mixed batch gets from the
hardware at hand. Introduced in the chapter "Disaggregated prefill and decode".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .. import _check
from ..roofline import serial_step_time_s, step_time_s
from .ceilings import Ceilings, torch_dtype
from .device import DeviceInfo, pick_device
from .timer import time_call


@dataclass(frozen=True)
class TokenPoint:
    """One timed product of ``tokens`` rows with a ``d_model x d_model`` weight matrix.

    ``step_s``: median seconds. ``flops``: ``2 * tokens * d_model**2``. ``bytes_moved``: the
    weights once plus the activations read and written,
    ``(d_model**2 + 2 * tokens * d_model) * bytes_per_elem``. ``predicted_step_s`` and
    ``predicted_serial_s``: :func:`servelib.roofline.step_time_s` and
    :func:`servelib.roofline.serial_step_time_s` with the measured ceilings (None without).
    """

    tokens: int
    d_model: int
    dtype: str
    step_s: float
    flops: float
    bytes_moved: float
    predicted_step_s: float | None
    predicted_serial_s: float | None

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def default_d_model(device: DeviceInfo) -> int:
    """Side of the weight matrix: 4096 on a CPU (64 MiB in fp32), 8192 on a GPU (128 MiB in
    16 bits); three are rotated, so together they exceed any last-level cache."""
    return 4096 if device.kind == "cpu" else 8192


def token_sweep(tokens, *, d_model: int | None = None, device: DeviceInfo | None = None, dtype: str | None = None,
                ceilings: Ceilings | None = None, min_run_time: float = 0.2) -> tuple[TokenPoint, ...]:
    """Time a linear layer applied to each count of token rows in ``tokens`` (increasing).

    Three ``d_model x d_model`` weight matrices are rotated so that no call finds its weights
    in cache, as a serving step streams each layer's weights from memory. ``dtype`` defaults
    to the device's measurement dtype; ``ceilings`` (:func:`servelib.measure.measure_ceilings`)
    give the two predictions. Raises ValueError if ``tokens`` is empty or not increasing, or
    for a non-positive ``d_model``.
    """
    if not hasattr(tokens, "__iter__"):
        raise TypeError(f"tokens must be a sequence of token counts, got {type(tokens).__name__} {tokens!r}")
    counts = [_check.positive_int("tokens", n) for n in tokens]
    if not counts or any(a >= b for a, b in zip(counts, counts[1:])):
        raise ValueError(f"tokens must be a non-empty increasing sequence, got {tokens!r}")
    dev = device or pick_device()
    dtype = dtype or dev.dtype
    dt = torch_dtype(dtype)
    d = _check.positive_int("d_model", default_d_model(dev) if d_model is None else d_model)
    elem = torch.empty((), dtype=dt).element_size()
    g = torch.Generator(device=dev.kind).manual_seed(0)
    weights = [torch.randn(d, d, generator=g, device=dev.kind).to(dt) for _ in range(3)]
    points = []
    for n in counts:
        x = torch.randn(n, d, generator=g, device=dev.kind).to(dt)
        state = {"i": 0}

        def product():
            w = weights[state["i"] % 3]
            state["i"] += 1
            return x @ w

        t = time_call(product, dev, min_run_time=min_run_time).median_s
        flops, moved = 2.0 * n * d * d, float(d * d + 2 * n * d) * elem
        ceil = (flops, moved, ceilings.matmul_flops, ceilings.copy_bandwidth_Bps) if ceilings else None
        points.append(TokenPoint(n, d, dtype, t, flops, moved, step_time_s(*ceil) if ceil else None,
                                 serial_step_time_s(*ceil) if ceil else None))
    return tuple(points)
