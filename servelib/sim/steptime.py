"""Step times for the simulator from the roofline model of a model on a GPU."""
from __future__ import annotations

from .. import _check
from ..hardware import as_gpu
from ..memory import _kv_bytes_at, kv_bytes_per_token, weight_bytes
from ..roofline import decode_bytes_per_step, decode_weight_bytes, prefill_flops, step_time_s


def roofline_step_time(model, gpu, *, dtype: str = "bf16", bytes_per_param: float = 2,
                       bytes_per_elem: float = 2, tp_degree: int = 1):
    """Return ``f(batch, tokens, kv_tokens) -> seconds``, the roofline time of one step.

    A step processing ``tokens`` tokens (decode tokens plus prefill tokens) for ``batch``
    sequences does ``2 * n_active_params * tokens`` FLOPs (:func:`servelib.roofline.prefill_flops`) and reads the weights once plus
    the ``kv_tokens`` tokens of KV in the cache
    (:func:`servelib.roofline.decode_bytes_per_step`); it takes the larger of compute time
    and memory time (:func:`servelib.roofline.step_time_s`). Under tensor parallelism each
    of ``tp_degree`` devices does its share; communication is ignored, so this is a lower
    bound. ``gpu`` is a GPUSpec or a preset name. Raises like the functions it calls.

    For a mixture of experts the weights read are those the step's tokens route to
    (:func:`servelib.roofline.decode_weight_bytes`); for a model whose layers do not all
    cache alike the KV read is layer by layer, at the batch's mean context
    (:func:`servelib.memory.kv_bytes_per_sequence`).
    """
    gpu = as_gpu(gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    w = weight_bytes(model, bytes_per_param) / tp
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp_degree=tp)
    params = model.n_active_params / tp
    peak, bw = gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps

    def step_time(batch: int, tokens: int, kv_tokens: int) -> float:
        b = _check.positive_int("batch", batch)
        kv = _check.non_negative("kv_tokens", kv_tokens)
        kv_per_seq = (kv * kv_tok / b if not model.layers
                      else _kv_bytes_at(model, kv / b, bytes_per_elem, tp))
        w_step = decode_weight_bytes(model, tokens, bytes_per_param) / tp if model.is_moe else w
        return step_time_s(prefill_flops(params, tokens), decode_bytes_per_step(w_step, kv_per_seq, b), peak, bw)

    return step_time
