"""Weight-only int8 against 16-bit weights: a decode matrix-vector product, timed on this device.

Decode multiplies one activation row per sequence by every weight matrix of the model. Here
a stack of square matrices, together far larger than any cache, stands in for the model's
layers; one "token" passes through all of them. The 16-bit stack and its int8 copy (one
scale per output row, symmetric) are timed in turn, and each time is set beside the
roofline's prediction for a memory-bound pass: its bytes over the measured copy bandwidth.

Kernels: the int8 product is PyTorch's own fused weight-only kernel,
``torch.ops.aten._weight_int8pack_mm`` (CPU since torch 2.3; the kernel gpt-fast's int8 mode
lowers to), which reads int8 weights and rescales on the fly. Where the device has no such
kernel it falls back to dequantize-then-multiply (``(q * scale) @ x``), which writes and
rereads a 16-bit copy of each matrix and so moves more bytes than the 16-bit product
itself. On a CPU the 16-bit matrices are pre-packed for oneDNN, as
:class:`~servelib.measure.ToyDecoder` packs its own.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from .. import _check
from ..units import MiB
from .ceilings import copy_bandwidth_Bps, torch_dtype
from .device import DeviceInfo, pick_device
from .timer import time_interleaved


@dataclass(frozen=True)
class GemvTiming:
    """One timed pass of a batch of activation rows through the whole stack of matrices.

    ``weights``: 'bf16'/'fp16'/'fp32' (the device's dtype) or 'int8'. ``kernel``: which
    PyTorch kernel ran. ``weight_bytes``: bytes of the stack, scales included.
    ``step_s``/``iqr_s``: median and interquartile range of the pass, in seconds.
    ``bytes_per_s``: ``weight_bytes / step_s``; ``tokens_per_s``: ``batch / step_s``.
    ``predicted_step_s``: ``weight_bytes`` over the measured copy bandwidth (a memory-bound
    pass at the bandwidth a plain copy reaches).
    """

    weights: str
    kernel: str
    batch: int
    weight_bytes: float
    step_s: float
    iqr_s: float
    bytes_per_s: float
    tokens_per_s: float
    predicted_step_s: float

    @property
    def predicted_tokens_per_s(self) -> float:
        """``batch / predicted_step_s``."""
        return self.batch / self.predicted_step_s


@dataclass(frozen=True)
class GemvComparison:
    """16-bit and int8 weights timed on the same stack: ``device`` (a printable line),
    ``n_matrices`` square matrices of side ``size``, the measured ``copy_bandwidth_Bps``,
    and the two :class:`GemvTiming` records ``wide`` (16-bit) and ``int8``."""

    device: str
    n_matrices: int
    size: int
    copy_bandwidth_Bps: float
    wide: GemvTiming
    int8: GemvTiming

    @property
    def byte_ratio(self) -> float:
        """Bytes of the 16-bit stack over the int8 one: the speed-up a memory-bound pass promises."""
        return self.wide.weight_bytes / self.int8.weight_bytes

    @property
    def speedup(self) -> float:
        """Measured: the 16-bit pass's time over the int8 one's."""
        return self.wide.step_s / self.int8.step_s

    @property
    def bandwidth_ratio(self) -> float:
        """Measured: bytes/s the int8 kernel achieves over bytes/s the 16-bit one achieves."""
        return self.int8.bytes_per_s / self.wide.bytes_per_s

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8: ``(q, scale)`` with ``weight ~= q * scale[:, None]``.

    ``q`` is int8 in [-127, 127] with the shape of ``weight`` ``(rows, cols)``; ``scale``
    ``(rows,)`` is in ``weight``'s dtype (the row's largest magnitude over 127). Raises
    ValueError for a tensor that is not two-dimensional.
    """
    if weight.dim() != 2:
        raise ValueError(f"weight must be a matrix (rows, cols), got shape {tuple(weight.shape)}")
    w = weight.float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.to(weight.dtype)


def _pack(weight: torch.Tensor, device: DeviceInfo) -> tuple[torch.Tensor, bool]:
    # oneDNN pre-packing on a CPU, as ToyDecoder does (unpacked, every call re-packs the
    # matrix and the 16-bit baseline would look slower than it is).
    if device.kind == "cpu" and torch.backends.mkldnn.is_available():
        try:
            return torch.ops.mkldnn._reorder_linear_weight(weight, None), True
        except (AttributeError, RuntimeError):
            pass
    return weight, False


def _int8_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor):
    """The fused kernel if it runs here, else None."""
    op = getattr(torch.ops.aten, "_weight_int8pack_mm", None)
    if op is None:
        return None
    try:
        return op(x, q, scale)
    except (RuntimeError, NotImplementedError):
        return None


def time_weight_only_gemv(device: DeviceInfo | None = None, *, size: int | None = None,
                          n_matrices: int | None = None, batch: int = 1, dtype: str | None = None,
                          repeats: int = 3, min_run_time: float = 0.2, copy_bandwidth: float | None = None,
                          seed: int = 0) -> GemvComparison:
    """Time a decode pass through ``n_matrices`` matrices ``(size, size)`` in 16 bits and in int8.

    Defaults: ``size`` 4096 on a CPU (256 MiB of 16-bit weights over 8 matrices, far above
    a CPU's last-level cache), 8192 on a GPU (16 matrices, 2 GiB); ``dtype`` the device's
    measurement dtype; ``batch`` activation rows (1: one sequence decoding). The two passes
    are timed in turn, ``repeats`` times (:func:`servelib.measure.timer.time_interleaved`:
    warm-up, medians). ``copy_bandwidth`` (bytes/s)
    defaults to :func:`servelib.measure.copy_bandwidth_Bps` measured now. Raises ValueError
    for non-positive sizes.
    """
    dev = device or pick_device()
    dt = torch_dtype(dtype or dev.dtype)
    n = _check.positive_int("size", size if size is not None else (4096 if dev.kind == "cpu" else 8192))
    wide_total = (256 if dev.kind == "cpu" else 2048) * MiB
    count = _check.positive_int("n_matrices", n_matrices if n_matrices is not None
                                else max(1, wide_total // (n * n * dt.itemsize)))
    b = _check.positive_int("batch", batch)
    bw = (copy_bandwidth_Bps(dev) if copy_bandwidth is None
          else _check.positive("copy_bandwidth", copy_bandwidth))
    g = torch.Generator(device="cpu").manual_seed(_check.non_negative_int("seed", seed))
    x = torch.randn(b, n, generator=g).to(dt).to(dev.kind)
    wide, quant = [], []
    for _ in range(count):
        w = (torch.randn(n, n, generator=g) / n ** 0.5).to(dt).to(dev.kind)
        quant.append(quantize_int8(w))
        wide.append(_pack(w, dev))
        del w
    packed = wide[0][1]

    fused = _int8_linear(x, *quant[0]) is not None

    def run_wide():
        for w, is_packed in wide:
            if is_packed:
                torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
            else:
                F.linear(x, w)

    def run_int8():
        for q, s in quant:
            if fused:
                torch.ops.aten._weight_int8pack_mm(x, q, s)
            else:
                F.linear(x, q.to(dt) * s[:, None])

    def record(weights, kernel, t, nbytes):
        return GemvTiming(weights, kernel, b, nbytes, t.median_s, t.iqr_s, nbytes / t.median_s,
                          b / t.median_s, nbytes / bw)

    t_wide, t_int8 = time_interleaved((run_wide, run_int8), dev, repeats=repeats, min_run_time=min_run_time)
    wide_bytes = count * n * n * dt.itemsize
    int8_bytes = count * (n * n + n * dt.itemsize)
    wide_t = record(dtype or dev.dtype, "oneDNN packed linear" if packed else "F.linear", t_wide, wide_bytes)
    int8_t = record("int8", "aten._weight_int8pack_mm" if fused else "dequantize then F.linear",
                    t_int8, int8_bytes)
    return GemvComparison(str(dev), count, n, bw, wide_t, int8_t)
