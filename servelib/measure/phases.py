"""Prefill and decode timed on the toy decoder, and the batching sweep, with roofline predictions."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .. import _check
from ..roofline import serial_step_time_s, step_time_s
from .ceilings import Ceilings
from .timer import time_call
from .toy import ToyDecoder


@dataclass(frozen=True)
class PhaseTiming:
    """One timed forward pass of the toy decoder, and what the roofline predicts for it.

    ``phase``: 'prefill' (``new_tokens`` prompt tokens per sequence, cache empty) or
    'decode' (one new token per sequence over ``context_len`` cached ones). ``step_s``:
    median seconds of the pass; ``s_per_token``: ``step_s / (batch * new_tokens)``.
    ``flops`` and ``bytes_moved``: the pass's work (weights read once, KV read or written);
    ``achieved_flops`` and ``achieved_Bps`` are those divided by ``step_s``.
    ``predicted_step_s``: :func:`servelib.roofline.step_time_s` with the measured ceilings
    (None when no ceilings were given), the roofline's lower bound; ``predicted_serial_s``:
    :func:`servelib.roofline.serial_step_time_s`, the bound if compute and memory traffic
    did not overlap at all.
    """

    phase: str
    batch: int
    new_tokens: int
    context_len: int
    step_s: float
    s_per_token: float
    flops: float
    bytes_moved: float
    achieved_flops: float
    achieved_Bps: float
    predicted_step_s: float | None
    predicted_serial_s: float | None

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def _timed(model: ToyDecoder, phase, batch, new_tokens, context_len, flops, bytes_moved, fn,
           ceilings, min_run_time) -> PhaseTiming:
    t = time_call(fn, model.device, min_run_time=min_run_time).median_s
    ceil = (flops, bytes_moved, ceilings.matmul_flops, ceilings.copy_bandwidth_Bps) if ceilings else None
    return PhaseTiming(phase, batch, new_tokens, context_len, t, t / (batch * new_tokens), flops,
                       bytes_moved, flops / t, bytes_moved / t, step_time_s(*ceil) if ceil else None,
                       serial_step_time_s(*ceil) if ceil else None)


def time_prefill(model: ToyDecoder, prompt_len: int, batch: int = 1, ceilings: Ceilings | None = None,
                 *, min_run_time: float = 0.3) -> PhaseTiming:
    """Time the prefill of ``batch`` prompts of ``prompt_len`` tokens (one parallel pass).

    Bytes: the weights once plus the KV cache written. Raises ValueError for bad sizes.
    """
    prompt_len = _check.positive_int("prompt_len", prompt_len)
    batch = _check.positive_int("batch", batch)
    cache, toks = model.new_cache(batch, prompt_len), model.tokens(batch, prompt_len)
    return _timed(model, "prefill", batch, prompt_len, 0, model.prefill_flops(batch, prompt_len),
                  model.weights_read_bytes + batch * model.kv_bytes_per_sequence(prompt_len),
                  lambda: model.forward(toks, cache, 0), ceilings, min_run_time)


def time_decode(model: ToyDecoder, context_len: int, batch: int = 1, ceilings: Ceilings | None = None,
                *, min_run_time: float = 0.3) -> PhaseTiming:
    """Time one decode step: ``batch`` sequences, each adding a token after ``context_len`` cached ones.

    Bytes: the weights once plus each sequence's KV cache (``W + B * KV``). The cache is
    filled with random values rather than by a prefill: a decode step's cost does not
    depend on what the cache holds. Raises ValueError for bad sizes.
    """
    context_len = _check.positive_int("context_len", context_len)
    batch = _check.positive_int("batch", batch)
    cache, tok = model.new_cache(batch, context_len + 1), model.tokens(batch, 1)
    cache.normal_()
    return _timed(model, "decode", batch, 1, context_len, model.decode_flops(batch, context_len),
                  model.weights_read_bytes + batch * model.kv_bytes_per_sequence(context_len + 1),
                  lambda: model.forward(tok, cache, context_len), ceilings, min_run_time)


def is_out_of_memory(err: BaseException) -> bool:
    """True for an allocation failure: ``torch.OutOfMemoryError`` (CUDA, MPS) or the CPU allocator's."""
    # torch.OutOfMemoryError is the name since torch 2.5; older releases have the CUDA one only.
    if isinstance(err, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)):
        return True
    msg = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


@dataclass(frozen=True)
class SweepPoint:
    """One batch size of the sweep: decode ``step_s``, ``tokens_per_s`` = batch / step_s, the
    two predictions (see :class:`PhaseTiming`), and the step's ``flops`` and ``bytes_moved``."""

    batch: int
    step_s: float
    tokens_per_s: float
    predicted_step_s: float | None
    predicted_serial_s: float | None
    flops: float
    bytes_moved: float


@dataclass(frozen=True)
class Sweep:
    """A batching sweep: ``points`` in increasing batch; ``stopped_at`` the batch that ran out of
    memory (None if every batch ran) and ``stop_reason`` the error message."""

    context_len: int
    points: tuple
    stopped_at: int | None = None
    stop_reason: str | None = None

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def batching_sweep(model: ToyDecoder, batches, context_len: int, ceilings: Ceilings | None = None, *,
                   min_run_time: float = 0.2, progress=None) -> Sweep:
    """Decode step time and tokens/s at each batch size in ``batches`` (increasing).

    Stops cleanly at the first batch that runs out of device memory (see
    :func:`is_out_of_memory`), keeping the points measured so far and recording where it
    stopped; any other error propagates. ``progress``, if given, is called with a line of
    text after each batch. Raises ValueError if ``batches`` is empty or not increasing.
    """
    if not hasattr(batches, "__iter__"):
        raise TypeError(f"batches must be a sequence of batch sizes, got {type(batches).__name__} {batches!r}")
    batches = [_check.positive_int("batch", b) for b in batches]
    if not batches or any(a >= b for a, b in zip(batches, batches[1:])):
        raise ValueError(f"batches must be a non-empty increasing sequence, got {batches!r}")
    points = []
    for b in batches:
        try:
            t = time_decode(model, context_len, b, ceilings, min_run_time=min_run_time)
        except Exception as err:  # noqa: BLE001  (only out-of-memory is handled; others re-raise)
            if not is_out_of_memory(err):
                raise
            if model.device.kind == "cuda":
                torch.cuda.empty_cache()
            if progress:
                progress(f"batch {b}: out of memory, sweep stopped")
            return Sweep(context_len, tuple(points), b, str(err).splitlines()[0] if str(err) else type(err).__name__)
        points.append(SweepPoint(b, t.step_s, b / t.step_s, t.predicted_step_s, t.predicted_serial_s, t.flops,
                                  t.bytes_moved))
        if progress:
            pred = f", predicted {t.predicted_step_s * 1e3:.2f} ms" if t.predicted_step_s else ""
            progress(f"batch {b}: {t.step_s * 1e3:.2f} ms/step{pred}, {b / t.step_s:,.0f} tokens/s")
    return Sweep(context_len, tuple(points))
