"""The two ceilings of the roofline, measured: memory bandwidth and matmul FLOP/s."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .. import _check
from ..units import MiB
from .device import DeviceInfo, pick_device
from .timer import time_call

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype for a name in ('bf16', 'fp16', 'fp32'); ValueError otherwise."""
    return _DTYPES[_check.choice("dtype", dtype, _DTYPES)]


def default_copy_bytes(device: DeviceInfo) -> int:
    """Bytes per copy buffer: far above any last-level cache (CPU L3: tens of MiB; GPU L2: up to ~100 MiB)."""
    return 256 * MiB if device.kind == "cpu" else 1024 * MiB


def copy_bandwidth_Bps(device: DeviceInfo | None = None, n_bytes: int | None = None, *,
                       n_buffers: int = 2, min_run_time: float = 0.5) -> float:
    """Memory bandwidth from a large device-to-device copy, in bytes/s.

    Each call copies one ``n_bytes`` buffer into another, cycling through ``n_buffers``
    pairs so that no call finds its data in cache; it counts ``2 * n_bytes`` (read and
    write), the convention of the STREAM "copy" benchmark and of GPU datasheets' peak.
    Raises ValueError for sizes below one float32 element (4 bytes) or ``n_buffers`` < 1.
    """
    dev = device or pick_device()
    # ``is None``, not ``or``: an explicit 0 is an error, not the default size.
    n = _check.positive_int("n_bytes", default_copy_bytes(dev) if n_bytes is None else n_bytes)
    if n < 4:
        raise ValueError(f"n_bytes must be >= 4 (one float32 element), got {n_bytes!r}")
    k = _check.positive_int("n_buffers", n_buffers)
    pairs = [(torch.ones(n // 4, device=dev.kind), torch.empty(n // 4, device=dev.kind))
             for _ in range(k)]
    state = {"i": 0}

    def copy():
        src, dst = pairs[state["i"] % k]
        state["i"] += 1
        dst.copy_(src)

    t = time_call(copy, dev, min_run_time=min_run_time)
    return 2 * (n // 4) * 4 / t.median_s


def default_matmul_size(device: DeviceInfo) -> int:
    """Side of the square matmul that fills the device: 2048 on a CPU, 8192 on a GPU."""
    return 2048 if device.kind == "cpu" else 8192


def matmul_flops(device: DeviceInfo | None = None, dtype: str | None = None, n: int | None = None,
                 *, min_run_time: float = 0.5) -> float:
    """Achieved FLOP/s of an ``n x n`` by ``n x n`` matrix product in ``dtype`` (2n^3 FLOPs).

    ``dtype`` defaults to the device's measurement dtype. Operands rotate over three pairs
    so that caches hold none of them from the previous call. This is the compute ceiling
    the book's predictions use: what a large, well-shaped product reaches here, usually
    below the datasheet peak. Raises ValueError for an unknown dtype or non-positive ``n``.
    """
    dev = device or pick_device()
    dt = torch_dtype(dtype or dev.dtype)
    n = _check.positive_int("n", default_matmul_size(dev) if n is None else n)
    g = torch.Generator(device=dev.kind).manual_seed(0)
    ops = [(torch.randn(n, n, generator=g, device=dev.kind).to(dt),
            torch.randn(n, n, generator=g, device=dev.kind).to(dt)) for _ in range(3)]
    state = {"i": 0}

    def mm():
        a, b = ops[state["i"] % 3]
        state["i"] += 1
        return a @ b

    t = time_call(mm, dev, min_run_time=min_run_time)
    return 2.0 * n ** 3 / t.median_s


@dataclass(frozen=True)
class Ceilings:
    """The measured roofline of one device: copy bandwidth (bytes/s), matmul FLOP/s in ``dtype``.

    ``ridge`` (property) is their ratio in FLOP/byte, the measured counterpart of
    :func:`servelib.hardware.ridge_point`.
    """

    copy_bandwidth_Bps: float
    matmul_flops: float
    dtype: str

    @property
    def ridge(self) -> float:
        """Measured ridge point: ``matmul_flops / copy_bandwidth_Bps`` (FLOP/byte)."""
        return self.matmul_flops / self.copy_bandwidth_Bps

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def measure_ceilings(device: DeviceInfo | None = None, dtype: str | None = None, *,
                     min_run_time: float = 0.5) -> Ceilings:
    """Measure both ceilings on ``device`` (dtype: the device's measurement dtype by default)."""
    dev = device or pick_device()
    dtype = dtype or dev.dtype
    return Ceilings(copy_bandwidth_Bps(dev, min_run_time=min_run_time),
                    matmul_flops(dev, dtype, min_run_time=min_run_time), dtype)
