"""FLOPs, bytes and time of the two phases of inference.

Conventions: a matrix-vector or matrix-matrix product with P weights costs 2P FLOPs per
token (one multiply, one add); the attention term (scores and weighted sum over the
context) is separate and small until contexts are long.
"""
from __future__ import annotations

from . import _check


def prefill_flops(n_params: float, n_tokens: int) -> float:
    """FLOPs to process a prompt of ``n_tokens`` through ``n_params`` weights: ``2 * P * N``.

    The attention term is left out (see the roofline chapter). Raises ValueError for
    non-positive inputs.
    """
    return 2 * _check.positive("n_params", n_params) * _check.positive_int("n_tokens", n_tokens)


def decode_flops_per_step(n_params: float, batch: int = 1) -> float:
    """FLOPs of one decode step for ``batch`` sequences: ``2 * P * B`` (attention left out)."""
    return 2 * _check.positive("n_params", n_params) * _check.positive_int("batch", batch)


def generation_flops(n_params: float, prompt_len: int, n_new_tokens: int, *, kv_cache: bool = True) -> float:
    """FLOPs (weights only) to read a prompt and generate ``n_new_tokens`` tokens.

    The prefill pass over the prompt yields the first new token; each later token is one
    more forward pass. With a KV cache a pass handles only the newest token:
    ``2P(prompt + n - 1)``, linear in ``n``. Without one, pass t re-runs all
    ``prompt + t - 1`` tokens so far: ``2P(n * prompt + n(n - 1)/2)``, quadratic in ``n``.
    """
    p = _check.positive("n_params", n_params)
    s = _check.positive_int("prompt_len", prompt_len)
    n = _check.positive_int("n_new_tokens", n_new_tokens)
    if kv_cache:
        return 2 * p * (s + n - 1)
    return 2 * p * (n * s + n * (n - 1) / 2)


def decode_bytes_per_step(weights_bytes: float, kv_bytes_per_seq: float, batch: int = 1) -> float:
    """Bytes one decode step reads: all weights once, plus every sequence's KV cache: ``W + B * KV``.

    The weight read is shared by the whole batch (it amortizes); each sequence's KV read is
    its own (it does not). Activations are negligible and left out.
    """
    return (_check.positive("weights_bytes", weights_bytes)
            + _check.positive_int("batch", batch) * _check.non_negative("kv_bytes_per_seq", kv_bytes_per_seq))


def step_time_s(flops: float, bytes_moved: float, peak_flops: float, bandwidth_Bps: float) -> float:
    """Roofline time of a step: the larger of compute time and memory time, in seconds.

    ``max(flops / peak_flops, bytes_moved / bandwidth_Bps)``: a step cannot finish before its
    arithmetic is done nor before its bytes have streamed through memory.
    """
    return max(_check.non_negative("flops", flops) / _check.positive("peak_flops", peak_flops),
               _check.non_negative("bytes_moved", bytes_moved) / _check.positive("bandwidth_Bps", bandwidth_Bps))


def _device_share(model, gpu, tp_degree, bytes_per_param):
    from .hardware import get_gpu
    from .memory import weight_bytes
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    tp = _check.positive_int("tp_degree", tp_degree)
    return gpu, tp, weight_bytes(model, bytes_per_param) / tp


def predict_ttft_s(model, gpu, prompt_len: int, *, dtype: str = "bf16", bytes_per_param: float = 2,
                   tp_degree: int = 1) -> float:
    """Roofline time to first token of one request with an empty queue: its prefill, in seconds.

    FLOPs ``2 * n_active_params * prompt_len`` (attention term left out) and one read of the
    weights, split over ``tp_degree`` devices; communication between them is ignored, so this
    is a lower bound. ``gpu`` is a GPUSpec or a preset name.
    """
    from .memory import kv_bytes_per_sequence
    gpu, tp, w = _device_share(model, gpu, tp_degree, bytes_per_param)
    flops = prefill_flops(model.n_active_params, prompt_len) / tp
    kv_write = kv_bytes_per_sequence(model, prompt_len, tp_degree=tp)
    return step_time_s(flops, w + kv_write, gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps)


def predict_tpot_s(model, gpu, batch: int, context_len: int, *, dtype: str = "bf16",
                   bytes_per_param: float = 2, bytes_per_elem: float = 2, tp_degree: int = 1) -> float:
    """Roofline time per output token (one decode step) for ``batch`` sequences at ``context_len``.

    FLOPs ``2 * n_active_params * batch``; bytes ``W + batch * KV(context_len)`` (per device
    under TP, see :func:`servelib.memory.kv_bytes_per_token`); the step takes the larger of the
    two times. Communication is ignored (a lower bound). Every sequence in the batch gets one
    token per step, so this is also the inter-token latency each one sees.
    """
    from .memory import kv_bytes_per_sequence
    gpu, tp, w = _device_share(model, gpu, tp_degree, bytes_per_param)
    flops = decode_flops_per_step(model.n_active_params, batch) / tp
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem, tp_degree=tp)
    return step_time_s(flops, decode_bytes_per_step(w, kv, batch), gpu.peak_flops(dtype),
                       gpu.hbm_bandwidth_Bps)


def decode_tokens_per_s(model, gpu, batch: int, context_len: int, **kwargs) -> float:
    """Predicted decode throughput of one replica: ``batch / predict_tpot_s(...)`` tokens/s.

    Keyword arguments are those of :func:`predict_tpot_s`.
    """
    return _check.positive_int("batch", batch) / predict_tpot_s(model, gpu, batch, context_len, **kwargs)
