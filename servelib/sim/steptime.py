"""Step times for the simulator from the roofline model of a model on a GPU, and the
cost of swapping KV to host memory over PCIe."""
from __future__ import annotations

from .. import _check
from ..hardware import as_gpu
from ..memory import kv_bytes_per_token, weight_bytes
from ..roofline import decode_bytes_per_step, prefill_flops, step_time_s


#: Host link of a current datacentre GPU, bytes/s in one direction: PCIe 5.0 x16 (32 GT/s per
#: lane, 16 lanes, 128b/130b encoding: 63 GB/s; the H100 datasheet lists "PCIe Gen5: 128 GB/s"
#: for both directions together). Real copies from pinned host memory reach somewhat less.
PCIE_GEN5_X16_Bps = 64e9


def swap_s_per_token(model, *, link_Bps: float = PCIE_GEN5_X16_Bps, bytes_per_elem: float = 2,
                     tp_degree: int = 1) -> float:
    """Seconds to copy one token's KV cache across the host link, one way.

    ``kv_bytes_per_token(model) / link_Bps``: a sequence swapped out and back in pays it twice
    per token (the simulator counts both copies). ``link_Bps``: the link's bandwidth in bytes/s
    (default :data:`PCIE_GEN5_X16_Bps`); under tensor parallelism each device copies its own
    heads over its own link. Raises ValueError for a non-positive bandwidth.
    """
    link = _check.positive("link_Bps", link_Bps)
    tp = _check.positive_int("tp_degree", tp_degree)
    return kv_bytes_per_token(model, bytes_per_elem, tp_degree=tp) / link


def roofline_step_time(model, gpu, *, dtype: str = "bf16", bytes_per_param: float = 2,
                       bytes_per_elem: float = 2, tp_degree: int = 1, link_Bps: float = PCIE_GEN5_X16_Bps):
    """Return ``f(batch, tokens, kv_tokens) -> seconds``, the roofline time of one step.

    A step processing ``tokens`` tokens (decode tokens plus prefill tokens) for ``batch``
    sequences does ``2 * n_active_params * tokens`` FLOPs (:func:`servelib.roofline.prefill_flops`) and reads the weights once plus
    the ``kv_tokens`` tokens of KV in the cache
    (:func:`servelib.roofline.decode_bytes_per_step`); it takes the larger of compute time
    and memory time (:func:`servelib.roofline.step_time_s`). Under tensor parallelism each
    of ``tp_degree`` devices does its share; communication is ignored, so this is a lower
    bound. ``gpu`` is a GPUSpec or a preset name.

    The callable's attribute ``swap_s_per_token`` is :func:`swap_s_per_token` for the same model
    over ``link_Bps``: :func:`servelib.sim.simulate` charges it for swap preemption unless told
    otherwise. Raises like the functions it calls.
    """
    gpu = as_gpu(gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    w = weight_bytes(model, bytes_per_param) / tp
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp_degree=tp)
    params = model.n_active_params / tp
    peak, bw = gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps

    def step_time(batch: int, tokens: int, kv_tokens: int) -> float:
        b = _check.positive_int("batch", batch)
        kv_per_seq = _check.non_negative("kv_tokens", kv_tokens) * kv_tok / b
        return step_time_s(prefill_flops(params, tokens), decode_bytes_per_step(w, kv_per_seq, b), peak, bw)

    step_time.swap_s_per_token = swap_s_per_token(model, link_Bps=link_Bps, bytes_per_elem=bytes_per_elem,
                                                  tp_degree=tp)
    return step_time
