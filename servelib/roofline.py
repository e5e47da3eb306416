"""FLOPs, bytes and time of the two phases of inference.

Conventions: a matrix-vector or matrix-matrix product with P weights costs 2P FLOPs per
token (one multiply, one add); the attention term (scores and weighted sum over the
context) is a separate function, small until contexts are long. The decode intensity and
its ceiling count it by default, because at long contexts it sets the ceiling. Tensor
parallelism adds two all-reduces per layer to every step (:func:`tp_comm_time_s`);
:func:`decode_step` puts a deployment's step together and says whether its batch fits.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check
from .models import ModelSpec


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
    Raises TypeError unless ``kv_cache`` is a bool.
    """
    p = _check.positive("n_params", n_params)
    s = _check.positive_int("prompt_len", prompt_len)
    n = _check.positive_int("n_new_tokens", n_new_tokens)
    if _check.boolean("kv_cache", kv_cache):
        return 2 * p * (s + n - 1)
    return 2 * p * (n * s + n * (n - 1) / 2)


def decode_bytes_per_step(weights_bytes: float, kv_bytes_per_seq: float, batch: int = 1) -> float:
    """Bytes one decode step reads: all weights once, plus every sequence's KV cache: ``W + B * KV``.

    The weight read is shared by the whole batch (it amortizes); each sequence's KV read is
    its own (it does not). Activations are negligible and left out.
    """
    return (_check.positive("weights_bytes", weights_bytes)
            + _check.positive_int("batch", batch) * _check.non_negative("kv_bytes_per_seq", kv_bytes_per_seq))


def expected_experts_touched(n_experts: int, top_k: int, n_tokens: int) -> float:
    """Expected number of distinct experts that ``n_tokens`` tokens route to, per MoE layer.

    Each token picks ``top_k`` of ``n_experts`` experts; under uniform, independent routing
    an expert is missed by one token with probability ``1 - k/E``, so by all of them with
    ``(1 - k/E)^n``: ``E * (1 - (1 - k/E)^n)``. One token touches exactly ``k``; a large
    batch touches all ``E``. Real routers are not uniform (popular experts), which touches
    fewer: this is the expectation the load-balancing loss aims at.
    Raises ValueError for non-positive counts or ``top_k > n_experts``.
    """
    e = _check.positive_int("n_experts", n_experts)
    k = _check.positive_int("top_k", top_k)
    n = _check.positive_int("n_tokens", n_tokens)
    if k > e:
        raise ValueError(f"top_k ({k}) must be <= n_experts ({e})")
    return e * (1.0 - (1.0 - k / e) ** n)


def params_touched(model, n_tokens: int = 1) -> float:
    """Parameters a forward pass over ``n_tokens`` tokens reads: every dense weight, and of the
    routed experts only those the tokens route to.

    ``n_active_params`` (attention, dense layers, shared experts, one token's ``k`` routed
    experts, embeddings) plus, in each of the ``n_moe_layers`` MoE layers, one expert's
    parameters for every further distinct expert touched
    (:func:`expected_experts_touched`). Equal to ``n_params`` for a dense model; tends to
    it as the batch grows. Example: Mixtral-8x7B reads 12.9e9 parameters at batch 1, not 46.7e9.
    """
    _check.instance("model", model, ModelSpec)
    n = _check.positive_int("n_tokens", n_tokens)
    if not model.is_moe:
        return model.n_params
    extra = expected_experts_touched(model.n_experts, model.n_experts_per_token, n) - model.n_experts_per_token
    return min(model.n_params, model.n_active_params + model.n_moe_layers * model.expert_params * extra)


def decode_weight_bytes(model, batch: int = 1, bytes_per_param: float = 2) -> float:
    """Bytes of weights one decode step of ``batch`` sequences reads (whole model, all devices).

    ``params_touched(model, batch) * bytes_per_param``: all weights for a dense model (the
    same as :func:`servelib.memory.weight_bytes`), for a mixture of experts only the experts
    the batch routes to. Divide by the TP degree for one device's share.
    Raises TypeError unless ``model`` is a ModelSpec (a bare parameter count does not say
    which weights are experts: :func:`servelib.memory.weight_bytes` takes one), ValueError
    for a batch below 1.
    """
    from .memory import weight_bytes
    _check.instance("model", model, ModelSpec,
                    "a ModelSpec (for a bare parameter count use servelib.memory.weight_bytes)")
    b = _check.positive_int("batch", batch)
    if not model.is_moe:
        return weight_bytes(model, bytes_per_param)
    return params_touched(model, b) * _check.positive("bytes_per_param", bytes_per_param)


def step_time_s(flops: float, bytes_moved: float, peak_flops: float, bandwidth_Bps: float) -> float:
    """Roofline time of a step: the larger of compute time and memory time, in seconds.

    ``max(flops / peak_flops, bytes_moved / bandwidth_Bps)``: a step cannot finish before its
    arithmetic is done nor before its bytes have streamed through memory.
    """
    return max(_check.non_negative("flops", flops) / _check.positive("peak_flops", peak_flops),
               _check.non_negative("bytes_moved", bytes_moved) / _check.positive("bandwidth_Bps", bandwidth_Bps))


def serial_step_time_s(flops: float, bytes_moved: float, peak_flops: float, bandwidth_Bps: float) -> float:
    """Time of a step whose arithmetic and memory traffic do not overlap at all, in seconds.

    ``flops / peak_flops + bytes_moved / bandwidth_Bps``. :func:`step_time_s` (the larger of
    the two) assumes perfect overlap and is a lower bound; this sum is the upper bound built
    from the same two ceilings. They differ by at most 2x, at the ridge point, where compute
    and memory time are equal; far from the ridge one term dominates and they agree.
    """
    return (_check.non_negative("flops", flops) / _check.positive("peak_flops", peak_flops)
            + _check.non_negative("bytes_moved", bytes_moved) / _check.positive("bandwidth_Bps", bandwidth_Bps))


def _device_share(model, gpu, tp_degree, bytes_per_param):
    from .hardware import as_gpu
    from .memory import check_tp_degree, weight_bytes
    _check.instance("model", model, ModelSpec)
    gpu = as_gpu(gpu)
    tp = check_tp_degree(model, tp_degree)
    return gpu, tp, weight_bytes(model, bytes_per_param) / tp


def predict_ttft_s(model, gpu, prompt_len: int, *, dtype: str = "bf16", bytes_per_param: float = 2,
                   tp_degree: int = 1) -> float:
    """Roofline time to first token of one request with an empty queue: its prefill, in seconds.

    FLOPs ``2 * n_active_params * prompt_len`` (attention term left out) and one read of the
    weights the prompt touches (for a mixture of experts, :func:`decode_weight_bytes` at
    ``prompt_len`` tokens), split over ``tp_degree`` devices; communication between them is ignored, so this
    is a lower bound. ``gpu`` is a GPUSpec or a preset name. Raises ValueError for a
    ``prompt_len`` below 1 or a TP degree the model cannot be split over
    (:func:`servelib.memory.check_tp_degree`).
    """
    from .memory import kv_bytes_per_sequence
    prompt_len = _check.positive_int("prompt_len", prompt_len)
    gpu, tp, w = _device_share(model, gpu, tp_degree, bytes_per_param)
    if model.is_moe:
        w = decode_weight_bytes(model, prompt_len, bytes_per_param) / tp   # the experts the prompt routes to
    flops = prefill_flops(model.n_active_params, prompt_len) / tp
    kv_write = kv_bytes_per_sequence(model, prompt_len, tp_degree=tp)
    return step_time_s(flops, w + kv_write, gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps)


def predict_tpot_s(model, gpu, batch: int, context_len: int, *, dtype: str = "bf16",
                   bytes_per_param: float = 2, bytes_per_elem: float = 2, tp_degree: int = 1,
                   weight_bandwidth_ratio: float = 1.0) -> float:
    """Roofline time per output token (one decode step) for ``batch`` sequences at ``context_len``.

    FLOPs ``2 * n_active_params * batch`` plus attention over the context
    (:func:`decode_attention_flops_per_step`); bytes ``W + batch * KV(context_len)`` per
    device under TP, where ``W`` is the weights the step reads (all of them for a dense
    model, only the experts the batch routes to for a mixture of experts:
    :func:`decode_weight_bytes`) and ``KV`` one sequence's cache, layer by layer
    (:func:`servelib.memory.kv_bytes_per_sequence`); the step takes the larger of the two
    times. Example: Mixtral-8x7B, batch 1, TP=2 on A100-80GB: 6.3 ms (it reads 2 of 8
    experts). Communication is ignored (a lower bound; :func:`decode_step` adds it). Every
    sequence in the batch gets one token per step, so this is also the inter-token latency
    each one sees. ``weight_bandwidth_ratio`` (in (0, 1], default 1): the share of the
    bandwidth the kernel reading the weights reaches (a weight-only quantized kernel that
    unpacks as it reads streams more slowly); the weights then take as long to read as
    ``W / ratio`` bytes would, while the KV reads keep the full bandwidth. Raises
    ValueError for a TP degree the model cannot be split over
    (:func:`servelib.memory.check_tp_degree`).
    """
    from .memory import kv_bytes_per_sequence
    ratio = _check.fraction("weight_bandwidth_ratio", weight_bandwidth_ratio)
    if ratio == 0:
        raise ValueError("weight_bandwidth_ratio must lie in (0, 1], got 0")
    gpu, tp, w = _device_share(model, gpu, tp_degree, bytes_per_param)
    if model.is_moe:
        w = decode_weight_bytes(model, batch, bytes_per_param) / tp
    flops = (decode_flops_per_step(model.n_active_params, batch)
             + decode_attention_flops_per_step(model, context_len, batch)) / tp
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem, tp_degree=tp)
    return step_time_s(flops, decode_bytes_per_step(w / ratio, kv, batch), gpu.peak_flops(dtype),
                       gpu.hbm_bandwidth_Bps)


def decode_tokens_per_s(model, gpu, batch: int, context_len: int, **kwargs) -> float:
    """Predicted decode throughput of one replica: ``batch / predict_tpot_s(...)`` tokens/s.

    Keyword arguments are those of :func:`predict_tpot_s`.
    """
    return _check.positive_int("batch", batch) / predict_tpot_s(model, gpu, batch, context_len, **kwargs)


def _attended_keys(model, context_len: int, prefill: bool) -> float:
    """Keys a query attends to, summed over layers: at one decode position ``context_len``,
    or over every position of a prompt of ``context_len`` tokens (``prefill``).

    A full-attention or MLA layer attends to every earlier token, a sliding-window layer to
    the last ``window`` only, and a linear-attention or Mamba layer to none (its cost per
    token is in its weights, whatever the context).
    """
    def one(n):          # positions 1..S attend to 1..min(t, n) keys (decode: the last only)
        s = context_len
        if not prefill:
            return min(s, n)
        return s * (s + 1) / 2 if s <= n else n * (n + 1) / 2 + (s - n) * n
    total = 0.0
    for x in model.layer_specs:
        if x.kind in ("full", "mla"):
            total += one(context_len)
        elif x.kind == "sliding":
            total += one(x.window)
    return total


def prefill_attention_flops(model, n_tokens: int, batch: int = 1) -> float:
    """FLOPs of causal self-attention over a prompt, the term :func:`prefill_flops` leaves out.

    Token ``t`` (1-based) scores itself against ``t`` keys and takes the weighted sum of
    ``t`` values: ``2 * n_heads * head_dim * t`` FLOPs each, per layer. Summed over a prompt
    of ``S`` tokens: ``2 * L * n_heads * head_dim * S * (S + 1)`` per sequence, times
    ``batch``. Quadratic in ``S``: a correction of a few percent at short prompts that grows
    with the prompt (for Llama-3-70B it reaches 10% of ``2PS`` near 11k tokens). Layer by
    layer: a sliding-window layer attends to at most ``window`` keys, a fixed-state layer
    to none (an MLA layer is counted with ``head_dim``, an approximation).
    Raises ValueError for non-positive sizes.
    """
    _check.instance("model", model, ModelSpec)
    s = _check.positive_int("n_tokens", n_tokens)
    b = _check.positive_int("batch", batch)
    return 4.0 * model.n_heads * model.head_dim * _attended_keys(model, s, prefill=True) * b


def decode_attention_flops_per_step(model, context_len: int, batch: int = 1) -> float:
    """FLOPs of attention in one decode step: ``4 * L * n_heads * head_dim * context * batch``.

    The new token scores ``context_len`` cached keys and sums as many values (2 FLOPs per
    multiply-add each). Left out of :func:`decode_flops_per_step`; it matters only when the
    context is long compared with ``P / (2 * L * n_heads * head_dim)`` tokens. Layer by
    layer: a sliding-window layer attends to at most ``window`` keys, a fixed-state layer
    to none (an MLA layer is counted with ``head_dim``, an approximation).
    """
    _check.instance("model", model, ModelSpec)
    c = _check.positive_int("context_len", context_len)
    b = _check.positive_int("batch", batch)
    return 4.0 * model.n_heads * model.head_dim * _attended_keys(model, c, prefill=False) * b


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved from memory: ``flops / bytes_moved`` (FLOP/byte).

    Compare it with :func:`servelib.hardware.ridge_point`: below the ridge the work is
    memory-bound, above it compute-bound. Raises ValueError if ``bytes_moved`` is not > 0.
    """
    return _check.non_negative("flops", flops) / _check.positive("bytes_moved", bytes_moved)


def _decode_flops_per_sequence(model, context_len: int, attention: bool) -> float:
    """FLOPs one sequence adds to a decode step: ``2P``, plus its attention when ``attention``."""
    flops = decode_flops_per_step(model.n_active_params, 1)
    if _check.boolean("attention", attention):
        flops += decode_attention_flops_per_step(model, context_len)
    return flops


def decode_intensity(model, batch: int = 1, context_len: int = 1, bytes_per_param: float = 2,
                     bytes_per_elem: float = 2, *, attention: bool = True) -> float:
    """Arithmetic intensity of one decode step (FLOP/byte): ``B (2P + A) / (W + B * KV)``.

    ``P`` is ``model.n_active_params``, ``W`` the bytes of the weights the step reads (all
    of them for a dense model, the routed-to experts for a mixture of experts:
    :func:`decode_weight_bytes`), ``KV`` one sequence's cache at ``context_len`` tokens and
    ``A`` its attention FLOPs (:func:`decode_attention_flops_per_step`; ``attention=False``
    leaves it out, counting the weights' ``2P`` only). With fp16 weights and a short context
    this is about ``B``: one FLOP per byte at batch 1. As ``B`` grows it tends to
    ``(2P + A) / KV`` (:func:`decode_intensity_limit`): the KV read does not amortize, so
    long contexts cap it.
    """
    from .memory import kv_bytes_per_sequence
    _check.instance("model", model, ModelSpec)
    b = _check.positive_int("batch", batch)
    flops = b * _decode_flops_per_sequence(model, context_len, attention)
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem)
    return arithmetic_intensity(flops, decode_bytes_per_step(decode_weight_bytes(model, b, bytes_per_param), kv, b))


def decode_intensity_limit(model, context_len: int, bytes_per_elem: float = 2, *,
                           attention: bool = True) -> float:
    """The intensity decode tends to as the batch grows without bound: ``(2P + A) / KV`` (FLOP/byte).

    Once the KV reads dominate the weight read, each extra sequence brings ``2P`` FLOPs of
    weights, ``A = 4 * L * n_heads * head_dim * context_len`` FLOPs of attention over its
    own cache, and ``KV(context_len)`` bytes, so no batch size can push decode above this.
    The attention part alone is ``A / KV = 2 * (n_heads / n_kv_heads) / bytes_per_elem``
    whatever the context: 8 FLOP/byte for an fp16 GQA model with groups of 8, 1 for MHA.
    So at long contexts the limit falls toward that floor, not toward 0; leaving the
    attention out (``attention=False``, ``2P / KV``) understates it most there. When the
    limit lies below a device's ridge point, decode at that context never becomes
    compute-bound.
    """
    from .memory import kv_bytes_per_sequence
    _check.instance("model", model, ModelSpec)
    return (_decode_flops_per_sequence(model, context_len, attention)
            / kv_bytes_per_sequence(model, context_len, bytes_per_elem))


def compute_utilization(intensity: float, ridge: float) -> float:
    """Fraction of peak FLOP/s a kernel of ``intensity`` can use on a device with ``ridge``.

    Roofline: attainable FLOP/s = ``min(peak, intensity * bandwidth)``, so the fraction of
    peak is ``min(1, intensity / ridge)``. Batch-1 decode (about 1 FLOP/byte) on an H100 SXM
    in bf16 (ridge 295) uses 1/295 = 0.34% of its arithmetic.
    """
    return min(1.0, _check.non_negative("intensity", intensity) / _check.positive("ridge", ridge))


def attainable_flops(intensity: float, peak_flops: float, bandwidth_Bps: float) -> float:
    """The roofline: ``min(peak_flops, intensity * bandwidth_Bps)`` in FLOP/s."""
    return min(_check.positive("peak_flops", peak_flops),
               _check.non_negative("intensity", intensity) * _check.positive("bandwidth_Bps", bandwidth_Bps))


def critical_batch(model, ridge: float, context_len: int = 1, bytes_per_param: float = 2,
                   bytes_per_elem: float = 2, *, attention: bool = True) -> int | None:
    """The smallest batch at which decode's intensity reaches ``ridge``: where it turns compute-bound.

    Solving ``B (2P + A) / (W + B * KV) >= ridge`` gives ``B >= ridge * W / (2P + A - ridge * KV)``
    (``A``: one sequence's attention FLOPs, see :func:`decode_intensity`; ``attention=False``
    leaves it out). Returns None when ``(2P + A) / KV <= ridge``
    (:func:`decode_intensity_limit`): at that context no batch is large enough, decode stays
    memory-bound. Example: a 70B fp16 model at short context on an H100 SXM (ridge 295)
    needs a batch of about 295. For a mixture of experts ``W`` is what the batch reads
    (:func:`decode_weight_bytes`), found by bisection.
    """
    import math

    from .memory import kv_bytes_per_sequence, weight_bytes
    _check.instance("model", model, ModelSpec)
    r = _check.positive("ridge", ridge)
    w = weight_bytes(model, bytes_per_param)
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem)
    per_seq = _decode_flops_per_sequence(model, context_len, attention)
    if per_seq <= r * kv:
        return None
    b = max(1, math.ceil(r * w / (per_seq - r * kv) * (1 - 1e-12)))
    if model.is_moe:
        # The weights read grow with the batch (more experts touched), so the closed form with
        # all weights is an upper bound; intensity still rises with the batch: bisect below it.
        lo, hi = 1, b
        while lo < hi:
            mid = (lo + hi) // 2
            if decode_intensity(model, mid, context_len, bytes_per_param, bytes_per_elem,
                                attention=attention) >= r:
                hi = mid
            else:
                lo = mid + 1
        return lo
    # Guard the float rounding of the closed form: step to the exact smallest integer.
    args = (context_len, bytes_per_param, bytes_per_elem)
    while b > 1 and decode_intensity(model, b - 1, *args, attention=attention) >= r:
        b -= 1
    while decode_intensity(model, b, *args, attention=attention) < r:
        b += 1
    return b


def tp_allreduce_bytes(model, batch: int = 1, bytes_per_elem: float = 2) -> float:
    """Bytes of one tensor-parallel all-reduce in a decode step: ``batch * hidden_size * bytes_per_elem``.

    Megatron-style TP (Shoeybi et al., 2019) splits attention by heads and the MLP by its
    inner dimension, so each block's output projection leaves every device with a partial
    sum of the block's output, one ``hidden_size`` vector per token, which an all-reduce
    completes. A decode step has one token per sequence. ``bytes_per_elem``: the
    activations' dtype (2 for bf16/fp16). Example: Llama-3-70B (hidden 8,192) at batch 1
    in bf16 sends 16 KiB per all-reduce.
    """
    _check.instance("model", model, ModelSpec)
    return (_check.positive_int("batch", batch) * model.hidden_size
            * _check.positive("bytes_per_elem", bytes_per_elem))


def tp_comm_time_s(model, gpu, batch: int, tp_degree: int, *, bytes_per_elem: float = 2,
                   latency_s: float | None = None, bandwidth_Bps: float | None = None) -> float:
    """Communication time of one tensor-parallel decode step, in seconds: ``2 * L`` all-reduces.

    Two all-reduces per layer (after attention, after the MLP) of
    :func:`tp_allreduce_bytes`, each timed by the alpha-beta model of
    :func:`servelib.interconnect.allreduce_time_s` over the link of ``gpu``
    (:func:`servelib.interconnect.get_link`: datasheet bandwidth, published latency) unless
    ``latency_s`` / ``bandwidth_Bps`` are given. They sit on the critical path: the next
    block needs the sum, so they add to the step rather than overlap it. 0 at
    ``tp_degree`` 1 (every argument is still checked). Raises KeyError for a GPU without a
    link entry and no figures given, ValueError for a TP degree the model cannot be split
    over (:func:`servelib.memory.check_tp_degree`) or a non-positive latency or bandwidth.
    """
    from .hardware import as_gpu
    from .interconnect import allreduce_time_s, get_link
    from .memory import check_tp_degree
    _check.instance("model", model, ModelSpec)
    gpu = as_gpu(gpu)
    tp = check_tp_degree(model, tp_degree)
    msg = tp_allreduce_bytes(model, batch, bytes_per_elem)
    if latency_s is not None:
        _check.positive("latency_s", latency_s)
    if bandwidth_Bps is not None:
        _check.positive("bandwidth_Bps", bandwidth_Bps)
    if tp == 1:
        return 0.0
    if latency_s is None or bandwidth_Bps is None:
        link = get_link(gpu)
        latency_s = link.latency_s if latency_s is None else latency_s
        bandwidth_Bps = link.bandwidth_Bps if bandwidth_Bps is None else bandwidth_Bps
    return 2 * model.n_layers * allreduce_time_s(msg, tp, bandwidth_Bps, latency_s)


def max_decode_batch(model, gpu, context_len: int, *, tp_degree: int = 1, bytes_per_param: float = 2,
                     bytes_per_elem: float = 2, reserve_fraction: float = 0.10) -> int:
    """Sequences of ``context_len`` tokens one replica of ``tp_degree`` devices holds in its KV memory.

    :func:`servelib.memory.capacity` of one replica (per-device budget after the weights
    and a ``reserve_fraction`` working reserve): no decode batch at this context can be
    larger. 0 when not even one sequence fits.
    """
    from .memory import capacity
    tp = _check.positive_int("tp_degree", tp_degree)
    return capacity(model, gpu, n_gpus=tp, context_len=context_len, tp_degree=tp, bytes_per_param=bytes_per_param,
                    bytes_per_elem=bytes_per_elem, reserve_fraction=reserve_fraction).sequences_per_replica


def check_batch_fits(model, gpu, batch: int, context_len: int, **kwargs) -> int:
    """``batch``, if that many sequences of ``context_len`` fit one replica's KV memory; else ValueError.

    The guard for any table, figure or exercise that names a batch on a deployment: a batch
    the memory cannot hold predicts a speed no engine can reach. Keyword arguments are those
    of :func:`max_decode_batch`; the error names the batch, the deployment and what fits.
    """
    b = _check.positive_int("batch", batch)
    fit = max_decode_batch(model, gpu, context_len, **kwargs)
    if b > fit:
        from .hardware import as_gpu
        tp = kwargs.get("tp_degree", 1)
        raise ValueError(f"batch {b} does not fit: one TP={tp} replica of {as_gpu(gpu).name} holds "
                         f"{fit} sequences of {context_len:,} tokens of {model.name} in its KV memory "
                         f"(reserve {kwargs.get('reserve_fraction', 0.10):.0%})")
    return b


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of a deployment, predicted: its parts, its time, and whether it fits.

    Times are seconds per step on each device of a ``tp_degree`` replica. ``compute_s`` and
    ``memory_s``: the roofline's two terms (FLOPs over peak, bytes over bandwidth);
    ``roofline_s`` the larger (:func:`predict_tpot_s`); ``comm_s`` the tensor-parallel
    all-reduces (:func:`tp_comm_time_s`, 0 at TP 1 or when left out); ``tpot_s`` =
    ``roofline_s + comm_s``. ``tokens_per_s``: ``batch / tpot_s`` for the replica;
    ``tokens_per_gpu_s``: that over ``tp_degree``; ``comm_share``: ``comm_s / tpot_s``.
    ``max_batch``: sequences the replica's KV memory holds at ``context_len``
    (:func:`max_decode_batch`); ``fits``: ``batch <= max_batch``. A step that does not fit
    is still computed, so a table can show it marked, never as if it could run.
    """

    batch: int
    context_len: int
    tp_degree: int
    max_batch: int
    fits: bool
    compute_s: float
    memory_s: float
    roofline_s: float
    comm_s: float
    tpot_s: float
    tokens_per_s: float
    tokens_per_gpu_s: float
    comm_share: float


def decode_step(model, gpu, batch: int, context_len: int, *, tp_degree: int = 1, dtype: str = "bf16",
                bytes_per_param: float = 2, bytes_per_elem: float = 2, reserve_fraction: float = 0.10,
                comm: bool = True, latency_s: float | None = None,
                bandwidth_Bps: float | None = None) -> DecodeStep:
    """Predict one decode step of ``batch`` sequences at ``context_len`` on a TP replica (a :class:`DecodeStep`).

    The roofline of :func:`predict_tpot_s` plus, when ``comm`` and ``tp_degree > 1``, the
    all-reduces of :func:`tp_comm_time_s` (``latency_s``/``bandwidth_Bps`` override the
    link's figures); the KV memory check of :func:`max_decode_batch`. A lower bound still:
    kernels reach less than the datasheet's peaks. Raises what those functions raise, and
    TypeError unless ``comm`` is a bool.
    """
    from .memory import kv_bytes_per_sequence
    comm = _check.boolean("comm", comm)
    g, tp, w = _device_share(model, gpu, tp_degree, bytes_per_param)
    b = _check.positive_int("batch", batch)
    flops = (decode_flops_per_step(model.n_active_params, b)
             + decode_attention_flops_per_step(model, context_len, b)) / tp
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem, tp_degree=tp)
    bytes_moved = decode_bytes_per_step(w, kv, b)
    compute, memory = flops / g.peak_flops(dtype), bytes_moved / g.hbm_bandwidth_Bps
    roof = predict_tpot_s(model, g, b, context_len, dtype=dtype, bytes_per_param=bytes_per_param,
                          bytes_per_elem=bytes_per_elem, tp_degree=tp)
    comm_s = tp_comm_time_s(model, g, b, tp, latency_s=latency_s, bandwidth_Bps=bandwidth_Bps) if comm else 0.0
    fit = max_decode_batch(model, g, context_len, tp_degree=tp, bytes_per_param=bytes_per_param,
                           bytes_per_elem=bytes_per_elem, reserve_fraction=reserve_fraction)
    tpot = roof + comm_s
    return DecodeStep(b, context_len, tp, fit, b <= fit, compute, memory, roof, comm_s, tpot, b / tpot,
                      b / tpot / tp, comm_s / tpot)
