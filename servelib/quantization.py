"""What a quantized format buys: decode speed, concurrency and cost per token, and what
others measured.

The formats and their bytes are :mod:`servelib.precision`. Here they meet the rest of the
book: the roofline (:mod:`servelib.roofline`) of a weight-only quantized decode, in which
the kernel reads fewer bytes but streams them at a lower achieved bandwidth (it unpacks
and rescales every weight on the fly); the memory arithmetic (:mod:`servelib.memory`), in
which smaller weights can drop a tensor-parallel degree and smaller KV elements double
concurrency; and the self-hosting cost per token (:mod:`servelib.economics`).

Published figures (labelled so, never "measured here"): gpt-fast's A100 decode
(:data:`servelib.published.GPT_FAST`) for the achieved bandwidth of int8 and int4 kernels,
and AWQ's Table 4 for quality (:data:`PUBLISHED_PERPLEXITY`).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check
from .hardware import GPUSpec
from .models import ModelSpec
from .precision import Precision, effective_bytes_per_param, get_precision
from .published import GPT_FAST, PublishedDecode

def _gpt_fast_7b(weights: str) -> PublishedDecode | None:
    rows = [r for r in GPT_FAST if r.model == "llama-2-7b" and r.tp_degree == 1
            and r.gpu_preset == "a100-80gb" and r.weights == weights]
    return rows[0] if rows else None


def published_bandwidth_ratio(weights: str | Precision) -> float:
    """Achieved memory bandwidth of a weight-only quantized decode over the bf16 one: published.

    From gpt-fast's Llama-2-7B batch-1 decode on one A100 (:data:`servelib.published.GPT_FAST`):
    int8 reached 1069 GB/s and int4-g32 863 GB/s against bf16's 1397 GB/s, ratios 0.77 and
    0.62. The kernels unpack and rescale every weight on the fly, so they stream bytes less
    efficiently. 1.0 for ``bf16``/``fp16`` themselves. Raises ValueError for a format with
    no published figure (say which ratio you assume instead).
    """
    p = get_precision(weights)
    if not p.quantized:
        return 1.0
    row, base = _gpt_fast_7b(p.name), _gpt_fast_7b("bf16")
    if row is None:
        raise ValueError(f"no published bandwidth for {p.name} weights (gpt-fast published int8 "
                         "and int4-g32); pass the ratio you assume")
    return row.bandwidth_GBps / base.bandwidth_GBps


def published_decode_speedup(weights: str | Precision) -> float:
    """gpt-fast's published batch-1 tokens/s of Llama-2-7B in ``weights`` over bf16 (one A100).

    int8: 155.58 / 104.9 = 1.48; int4-g32: 196.80 / 104.9 = 1.88. Raises ValueError where
    nothing was published (see :func:`published_bandwidth_ratio`).
    """
    p = get_precision(weights)
    row = _gpt_fast_7b(p.name) if p.quantized else _gpt_fast_7b("bf16")
    if row is None:
        raise ValueError(f"no published decode figure for {p.name} weights; gpt-fast published "
                         "int8 and int4-g32")
    return row.tokens_per_s / _gpt_fast_7b("bf16").tokens_per_s


def assumed_bandwidth_ratio(weights: str | Precision) -> float:
    """The achieved-bandwidth ratio the book assumes for a weight format's decode kernel.

    :func:`published_bandwidth_ratio` where gpt-fast published one (int8, int4-g32); for
    int4-g128 the int4-g32 figure (the same unpacking work per weight); 1.0 for 16-bit
    weights and for fp8, which GPUs with fp8 tensor cores multiply without unpacking.
    """
    p = get_precision(weights)
    if p.name == "fp8" or not p.quantized:
        return 1.0
    if p.name == "int4-g128":
        return published_bandwidth_ratio("int4-g32")
    return published_bandwidth_ratio(p)


def quantized_tpot_s(model: ModelSpec, gpu: GPUSpec | str, weights: str | Precision = "bf16", *,
                     batch: int = 1, context_len: int, bytes_per_elem: float = 2,
                     bandwidth_ratio: float | None = None, tp_degree: int = 1, dtype: str = "bf16") -> float:
    """Roofline time per output token (s) with the linear layers stored in ``weights``.

    :func:`servelib.roofline.predict_tpot_s` with the weights'
    :func:`~servelib.precision.effective_bytes_per_param` (layers in ``weights``, embedding
    table in bf16), streamed at ``bandwidth_ratio`` of the bandwidth (default
    :func:`assumed_bandwidth_ratio`; 1.0 is the ideal kernel): ``predict_tpot_s``'s
    ``weight_bandwidth_ratio``. A kernel that reaches a fraction ``r`` of the bandwidth
    takes as long as one reading ``1/r`` times the bytes; the KV reads (another kernel) and the FLOPs
    (weight-only formats multiply in 16 bits after unpacking, in ``dtype``) are unchanged.
    Raises ValueError for a ratio outside (0, 1] and as :func:`~servelib.roofline.predict_tpot_s`.
    """
    from .roofline import predict_tpot_s
    r = assumed_bandwidth_ratio(weights) if bandwidth_ratio is None else _check.fraction(
        "bandwidth_ratio", bandwidth_ratio)
    if r == 0:
        raise ValueError("bandwidth_ratio must lie in (0, 1], got 0")
    return predict_tpot_s(model, gpu, batch, context_len, dtype=dtype, tp_degree=tp_degree,
                          bytes_per_elem=bytes_per_elem, bytes_per_param=effective_bytes_per_param(model, weights),
                          weight_bandwidth_ratio=r)


def quantized_decode_speedup(model: ModelSpec, gpu: GPUSpec | str, weights: str | Precision, *,
                             batch: int = 1, context_len: int, bytes_per_elem: float = 2,
                             bandwidth_ratio: float | None = None, tp_degree: int = 1,
                             dtype: str = "bf16") -> float:
    """Predicted decode speed-up of weight-only quantization: bf16 TPOT over :func:`quantized_tpot_s`.

    At batch 1 it is about the byte ratio times the bandwidth ratio; as the batch grows the
    KV reads (unchanged) and then the arithmetic (unchanged) take over and it falls towards
    1 (below 1 only for a kernel so slow that its bandwidth ratio is under the ratio of the
    quantized to the 16-bit bytes). With ``bandwidth_ratio=1.0`` it is the ceiling no
    weight-only kernel can beat. Arguments as :func:`quantized_tpot_s`.
    """
    kw = dict(batch=batch, context_len=context_len, bytes_per_elem=bytes_per_elem, tp_degree=tp_degree,
              dtype=dtype)
    return (quantized_tpot_s(model, gpu, "bf16", **kw)
            / quantized_tpot_s(model, gpu, weights, bandwidth_ratio=bandwidth_ratio, **kw))


@dataclass(frozen=True)
class QuantizedReplica:
    """One serving replica of a model in a weight and KV format, and what its tokens cost.

    ``tp_degree``: GPUs per replica (the smallest that holds weights plus one sequence,
    unless given). ``bytes_per_param``: :func:`~servelib.precision.effective_bytes_per_param`.
    ``weights_bytes_per_gpu``; ``concurrency``: sequences of ``context_len`` tokens the
    replica's KV budget holds; ``batch``: the requested batch capped at that;
    ``bandwidth_ratio``: assumed for the weights' kernel; ``tpot_s``:
    :func:`quantized_tpot_s` at that batch; ``tokens_per_gpu_s``: output tokens per
    GPU-second, ``batch / tpot_s / tp_degree``; ``usd_per_1m_tokens``: GPU-hours only, the
    replica fully used (:func:`servelib.economics.self_hosted_unit_cost`), per million
    output tokens.
    """

    weights: str
    kv: str
    tp_degree: int
    bytes_per_param: float
    weights_bytes_per_gpu: float
    concurrency: int
    batch: int
    bandwidth_ratio: float
    tpot_s: float
    tokens_per_gpu_s: float
    usd_per_1m_tokens: float


def quantized_replica(model: ModelSpec, gpu: GPUSpec | str, weights: str | Precision = "bf16",
                      kv: str | Precision = "bf16", *, context_len: int, batch: int,
                      usd_per_gpu_hour: float, tp_degree: int | None = None,
                      bandwidth_ratio: float | None = None, reserve_fraction: float = 0.10,
                      dtype: str = "bf16") -> QuantizedReplica:
    """A decode replica of ``model`` on ``gpu``, weights in ``weights``, KV cache in ``kv``.

    Memory: :func:`servelib.memory.capacity` with the formats' real bytes, at the TP degree
    given or else :func:`servelib.memory.min_tp_degree`. Speed: :func:`quantized_tpot_s` at
    ``min(batch, concurrency)``. Cost: :func:`servelib.economics.self_hosted_unit_cost` of
    a month of the replica's GPU-hours over the output tokens it decodes in that month.
    Raises ValueError when not one sequence fits at that TP degree, and as the functions it
    calls.
    """
    from .economics import HOURS_PER_MONTH, SECONDS_PER_MONTH, self_hosted_unit_cost
    from .memory import capacity, min_tp_degree
    w, k = get_precision(weights), get_precision(kv)
    bpp, bpe = effective_bytes_per_param(model, w), k.bytes_per_elem
    price = _check.non_negative("usd_per_gpu_hour", usd_per_gpu_hour)
    tp = (min_tp_degree(model, gpu, bpp, context_len=context_len, bytes_per_elem=bpe,
                        reserve_fraction=reserve_fraction)
          if tp_degree is None else _check.positive_int("tp_degree", tp_degree))
    cap = capacity(model, gpu, n_gpus=tp, context_len=context_len, tp_degree=tp, bytes_per_param=bpp,
                   bytes_per_elem=bpe, reserve_fraction=reserve_fraction)
    if cap.concurrency < 1:
        raise ValueError(f"{model.name} with {w.name} weights and a {k.name} KV cache does not fit "
                         f"tp_degree={tp} at context_len={context_len}; raise tp_degree")
    b = min(_check.positive_int("batch", batch), cap.concurrency)
    r = assumed_bandwidth_ratio(w) if bandwidth_ratio is None else bandwidth_ratio
    tpot = quantized_tpot_s(model, gpu, w, batch=b, context_len=context_len, bytes_per_elem=bpe,
                            bandwidth_ratio=r, tp_degree=tp, dtype=dtype)
    per_gpu = b / tpot / tp
    usd = self_hosted_unit_cost(price * HOURS_PER_MONTH, per_gpu * SECONDS_PER_MONTH) * 1000
    return QuantizedReplica(w.name, k.name, tp, bpp, cap.weights_bytes_per_device, cap.concurrency, b, r,
                            tpot, per_gpu, usd)


#: Published WikiText-2 perplexity of Llama-2 (lower is better) in 16 bits and with 4-bit
#: weights in groups of 128: round-to-nearest, GPTQ and AWQ. Source:
#: :data:`PUBLISHED_PERPLEXITY_SOURCE`.
PUBLISHED_PERPLEXITY = {
    "llama-2-7b": {"fp16": 5.47, "int4-g128 rtn": 5.73, "int4-g128 gptq": 5.69, "int4-g128 awq": 5.60},
    "llama-2-70b": {"fp16": 3.32, "int4-g128 rtn": 3.46, "int4-g128 gptq": 3.42, "int4-g128 awq": 3.41},
}
PUBLISHED_PERPLEXITY_SOURCE = ("Lin et al., AWQ: Activation-aware Weight Quantization for On-Device LLM "
                               "Compression and Acceleration (MLSys 2024), Table 4 (https://arxiv.org/abs/2306.00978)")
