"""Memory arithmetic of serving: weights, the KV cache, the budget it gets, and concurrency.

Sources: the KV formula follows from attention itself (each layer stores one key and one
value vector per KV head per token); the budget conventions are the syllabus's
(total - weights, less a working reserve) and vLLM's (``gpu_memory_utilization`` x total,
less weights, activation peak and non-torch memory; vLLM ``Worker.determine_num_available_blocks``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import _check
from .hardware import GPUSpec, as_gpu
from .models import ModelSpec


def _n_params(model) -> float:
    if isinstance(model, ModelSpec):
        return model.n_params
    return _check.positive("model (a ModelSpec or a parameter count)", model)


def weight_bytes(model, bytes_per_param: float = 2) -> float:
    """Bytes of weights: parameters x bytes per parameter.

    ``model`` is a ModelSpec (its total parameters: every MoE expert must be resident) or a
    parameter count. ``bytes_per_param``: 2 for fp16/bf16, 1 for fp8/int8, 0.5 for 4-bit.
    Example: 70e9 parameters in fp16 are 140e9 bytes = 130.4 GiB.
    Raises ValueError/TypeError for a non-positive or non-numeric input.
    """
    return _n_params(model) * _check.positive("bytes_per_param", bytes_per_param)


def _splits(model: ModelSpec, tp: int) -> bool:
    # Attention heads split evenly; KV heads split evenly, or are replicated when fewer than tp.
    return model.n_heads % tp == 0 and (model.n_kv_heads % tp == 0 or tp % model.n_kv_heads == 0)


def valid_tp_degrees(model: ModelSpec, max_tp: int | None = None) -> list[int]:
    """The tensor-parallel degrees ``model`` can be split over, up to ``max_tp`` (default ``n_heads``).

    A degree must divide ``n_heads`` (each device runs whole attention heads), and divide
    ``n_kv_heads`` or be a multiple of it (fewer KV heads than devices are replicated, one
    per device). Example: Llama-3-70B (64 heads, 8 KV heads): 1, 2, 4, 8, 16, 32, 64.
    """
    _check.instance("model", model, ModelSpec)
    top = model.n_heads if max_tp is None else _check.positive_int("max_tp", max_tp)
    return [tp for tp in range(1, min(top, model.n_heads) + 1) if _splits(model, tp)]


def check_tp_degree(model: ModelSpec, tp_degree) -> int:
    """``tp_degree`` as an int, if ``model`` can be split over that many devices; else ValueError.

    The one rule every TP-aware function applies (see :func:`valid_tp_degrees`); the error
    lists the valid degrees. Raises TypeError for a non-integer degree.
    """
    _check.instance("model", model, ModelSpec)
    tp = _check.positive_int("tp_degree", tp_degree)
    if not _splits(model, tp):
        raise ValueError(
            f"tp_degree ({tp}) must split {model.name}'s {model.n_heads} attention heads evenly, and its "
            f"{model.n_kv_heads} KV heads evenly or into whole replicas; valid degrees: "
            f"{', '.join(map(str, valid_tp_degrees(model)))}")
    return tp


def kv_heads_per_device(model: ModelSpec, tp_degree: int = 1) -> int:
    """KV heads each device holds under tensor parallelism of degree ``tp_degree``.

    Heads are split evenly; when there are fewer KV heads than devices each device keeps a
    replica of one (so an MQA model's single head is stored on every device).
    Raises ValueError for a degree the model cannot be split over (:func:`check_tp_degree`).
    """
    tp = check_tp_degree(model, tp_degree)
    return max(1, model.n_kv_heads // tp)


def kv_bytes_per_token(model: ModelSpec, bytes_per_elem: float = 2, tp_degree: int = 1) -> float:
    """KV-cache bytes one more token adds at long context (per device under TP).

    For a model whose layers are all full attention this is the familiar
    ``2 * n_layers * n_kv_heads * head_dim * bytes_per_elem`` (the 2 counts K and V), and
    every token costs it. With mixed layers it is the *marginal* cost of one more token
    once the context is longer than every sliding window: full-attention layers add
    ``2 * n_kv_heads * head_dim`` elements, MLA layers their latent (``kv_lora_rank +
    qk_rope_head_dim``, replicated on every device under TP), sliding-window and
    fixed-state layers nothing. A sequence's bytes are therefore not this times its length:
    use :func:`kv_bytes_per_sequence`, which sums layer by layer.
    ``bytes_per_elem`` is 2 for an fp16/bf16 cache, 1 for fp8. With ``tp_degree`` > 1 the
    KV heads are split (see :func:`kv_heads_per_device`). Example: Llama-3-70B (L=80,
    H_kv=8, d=128) in fp16 is 327,680 B = 320 KiB; gpt-oss-20b (12 of its 24 layers
    full attention) 24 KiB.
    """
    _check.instance("model", model, ModelSpec)
    b = _check.positive("bytes_per_elem", bytes_per_elem)
    tp = check_tp_degree(model, tp_degree)
    if not model.layers:
        return 2 * model.n_layers * kv_heads_per_device(model, tp) * model.head_dim * b
    full = model.count_layers("full")
    heads = kv_heads_per_device(model, tp) if full else 0
    latent = sum(x.latent_dim for x in model.layer_specs if x.kind == "mla")
    return (2 * full * heads * model.head_dim + latent) * b


def _layer_elems(model: ModelSpec, layer, context: float, tp: int, heads: int) -> float:
    """Cache elements one layer keeps for a sequence of ``context`` tokens, on one device."""
    if layer.kind == "full":
        return 2 * heads * model.head_dim * context
    if layer.kind == "sliding":
        return 2 * heads * model.head_dim * min(context, layer.window)
    if layer.kind == "mla":
        return layer.latent_dim * context                  # one latent, replicated under TP
    return layer.state_elems / min(tp, layer.state_heads)  # heads of the state split over devices


def kv_bytes_per_sequence(model: ModelSpec, context_len: int, bytes_per_elem: float = 2,
                          tp_degree: int = 1) -> float:
    """KV-cache bytes of one sequence of ``context_len`` tokens (per device under TP), layer by layer.

    A full-attention layer keeps K and V of every token; a sliding-window layer of the last
    ``window`` tokens only (engines round up to a block more); an MLA layer one latent per
    token, replicated on every device; a linear-attention or Mamba layer a fixed state
    whatever the length, its heads split over devices. For a model whose layers are all
    full attention this is ``kv_bytes_per_token * context_len``. Examples: Llama-3-70B at
    8,192 tokens in fp16 is 2.5 GiB; gpt-oss-20b at 131,072 tokens 3,075 MiB (3,072 MiB
    for its 12 full layers, 3 MiB for the 12 windows of 128 tokens).
    Raises ValueError/TypeError for a non-positive length or element size, or a TP
    degree the KV heads cannot be split over.
    """
    ctx = _check.positive_int("context_len", context_len)
    if not getattr(model, "layers", ()):
        return kv_bytes_per_token(model, bytes_per_elem, tp_degree) * ctx
    return _kv_bytes_at(model, ctx, bytes_per_elem, tp_degree)


def _kv_bytes_at(model: ModelSpec, context: float, bytes_per_elem: float = 2, tp_degree: int = 1) -> float:
    """:func:`kv_bytes_per_sequence` for a context that may be fractional or 0 (an average)."""
    _check.instance("model", model, ModelSpec)
    b = _check.positive("bytes_per_elem", bytes_per_elem)
    tp = check_tp_degree(model, tp_degree)
    if not model.layers:
        return kv_bytes_per_token(model, b, tp) * context
    heads = kv_heads_per_device(model, tp) if model.count_layers("full") + model.count_layers("sliding") else 0
    return b * sum(_layer_elems(model, x, context, tp, heads) for x in model.layer_specs)


def longest_sequence_tokens(model: ModelSpec, budget_bytes: float, bytes_per_elem: float = 2,
                            tp_degree: int = 1) -> float:
    """The longest sequence whose cache fits in ``budget_bytes`` (per device), in tokens.

    ``math.inf`` when no length is too long (every layer windowed or fixed-state, and the
    fixed part fits); 0 when not even one token fits. Layer by layer, so windows and
    fixed states are counted as they are held.
    """
    budget = _check.non_negative("budget_bytes", budget_bytes)
    if _kv_bytes_at(model, 1, bytes_per_elem, tp_degree) > budget:
        return 0
    per_token = kv_bytes_per_token(model, bytes_per_elem, tp_degree)
    # Beyond the longest window the cache grows by exactly per_token a token.
    longest_window = max([x.window for x in model.layer_specs if x.kind == "sliding"] or [1])
    base = _kv_bytes_at(model, longest_window, bytes_per_elem, tp_degree)
    if base <= budget:
        if per_token == 0:
            return math.inf
        return math.floor(longest_window + (budget - base) / per_token * (1 + 1e-12))
    lo, hi = 1, longest_window                 # the answer lies inside the window: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _kv_bytes_at(model, mid, bytes_per_elem, tp_degree) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def kv_budget_bytes(total_bytes: float, weights_bytes: float, reserve_fraction: float = 0.10) -> float:
    """Bytes left for the KV cache: ``(total - weights) * (1 - reserve_fraction)``.

    The reserve is working space for activations, temporary buffers and fragmentation.
    Returns 0 (never a negative budget) when the weights do not fit; check
    ``weights_bytes <= total_bytes`` to tell that case apart.
    Raises ValueError for negative sizes or a reserve outside [0, 1).
    """
    total = _check.positive("total_bytes", total_bytes)
    weights = _check.non_negative("weights_bytes", weights_bytes)
    reserve = _check.fraction("reserve_fraction", reserve_fraction, open_right=True)
    return max(0.0, (total - weights) * (1 - reserve))


def vllm_kv_budget_bytes(total_bytes: float, weights_bytes: float, gpu_memory_utilization: float = 0.9,
                         activation_bytes: float = 0, non_torch_bytes: float = 0) -> float:
    """Bytes vLLM gives the KV cache: ``total * utilization - weights - activations - non_torch``.

    vLLM caps its own use at ``gpu_memory_utilization`` of the whole card, then subtracts what
    a profiling run measured (weights, the activation peak, non-torch allocations such as
    NCCL buffers and CUDA graphs). The reserve is taken from the *total*, not from what is
    left after the weights, so it is larger than the syllabus's convention. Returns 0 when
    nothing is left. Raises ValueError for negative sizes or a utilization outside (0, 1].
    """
    total = _check.positive("total_bytes", total_bytes)
    u = _check.fraction("gpu_memory_utilization", gpu_memory_utilization)
    if u == 0:
        raise ValueError("gpu_memory_utilization must lie in (0, 1], got 0")
    used = sum(_check.non_negative(n, v) for n, v in (("weights_bytes", weights_bytes),
                                                      ("activation_bytes", activation_bytes),
                                                      ("non_torch_bytes", non_torch_bytes)))
    return max(0.0, total * u - used)


def _whole(count: float) -> int:
    """``floor(count)``, except that a count a hair below the next integer (float rounding of an
    exact fit, budget == k * per_seq) is that integer. The slack is relative (1e-12) but never
    more than a millionth of a sequence, so a huge count is not rounded up by a whole one."""
    n = math.floor(count)
    return n + 1 if n + 1 - count <= min(1e-12 * count, 1e-6) else n


def max_concurrency(kv_budget_bytes: float, kv_bytes_per_token: float, context_len: int) -> int:
    """Whole sequences of ``context_len`` tokens that fit in the budget: floor(budget / (kv x len)).

    0 when not even one fits (never negative). Every argument is validated; a budget of 0
    is allowed. Raises ValueError when the count is not finite (a ``kv_bytes_per_token``
    too small to divide by). Example: 458.6 GiB / 2.5 GiB per 8k sequence = 183.
    """
    budget = _check.non_negative("kv_budget_bytes", kv_budget_bytes)
    per_token = _check.positive("kv_bytes_per_token", kv_bytes_per_token)
    per_seq = per_token * _check.positive_int("context_len", context_len)
    n = budget / per_seq
    if not math.isfinite(n):
        raise ValueError(f"kv_bytes_per_token ({kv_bytes_per_token!r}) is too small: "
                         f"{budget:.4g} bytes / ({kv_bytes_per_token!r} x {context_len}) is not a finite count")
    return _whole(n)


@dataclass(frozen=True)
class Capacity:
    """Concurrency of a deployment, with the figures it was derived from (bytes per device).

    ``replicas`` is ``n_gpus // tp_degree``; ``concurrency`` is the total over replicas.
    """

    tp_degree: int
    replicas: int
    weights_bytes_per_device: float
    kv_bytes_per_token_per_device: float
    kv_bytes_per_sequence_per_device: float
    kv_budget_bytes_per_device: float
    sequences_per_replica: int
    concurrency: int
    fits: bool


def capacity(model: ModelSpec, gpu: GPUSpec | str, *, n_gpus: int, context_len: int,
             tp_degree: int | None = None, bytes_per_param: float = 2, bytes_per_elem: float = 2,
             reserve_fraction: float = 0.10) -> Capacity:
    """Concurrent sequences of ``context_len`` tokens on ``n_gpus`` devices, per device.

    Each replica spans ``tp_degree`` devices (default: all ``n_gpus``): every device holds
    ``1/tp`` of the weights and its share of the KV heads (at least one, so KV heads are
    replicated when ``tp_degree > n_kv_heads``; an MLA latent is replicated whole).
    Concurrency per replica is one device's budget over one sequence's cache on that
    device (:func:`kv_bytes_per_sequence`, layer by layer), floored; replicas add up. For a
    model whose layers are all full attention this is :func:`max_concurrency`.
    ``kv_bytes_per_token_per_device`` is the marginal figure of :func:`kv_bytes_per_token`.
    ``fits`` is False when a device cannot hold its weights plus one full sequence.
    Raises ValueError if ``tp_degree`` does not divide ``n_gpus`` or cannot split the model
    (:func:`check_tp_degree`; e.g. the default TP of all 128 devices for a 64-head model).
    """
    gpu = as_gpu(gpu)
    n_gpus = _check.positive_int("n_gpus", n_gpus)
    tp = n_gpus if tp_degree is None else _check.positive_int("tp_degree", tp_degree)
    if n_gpus % tp:
        raise ValueError(f"tp_degree ({tp}) must divide n_gpus ({n_gpus})")
    check_tp_degree(model, tp)
    w = weight_bytes(model, bytes_per_param) / tp
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp)
    kv_seq = kv_bytes_per_sequence(model, context_len, bytes_per_elem, tp)
    budget = kv_budget_bytes(gpu.memory_bytes, w, reserve_fraction)
    # Whole sequences, layer by layer (windows and fixed states counted as held), rounded as
    # max_concurrency rounds them.
    per_replica = _whole(budget / kv_seq)
    return Capacity(tp, n_gpus // tp, w, kv_tok, kv_seq, budget, per_replica,
                    per_replica * (n_gpus // tp), per_replica >= 1)


def min_tp_degree(model: ModelSpec, gpu: GPUSpec | str, bytes_per_param: float = 2, *,
                  context_len: int, bytes_per_elem: float = 2, reserve_fraction: float = 0.10,
                  max_tp: int = 8) -> int:
    """The smallest tensor-parallel degree at which each device holds its share of the
    weights plus at least one full ``context_len`` sequence of KV, after the reserve.

    Candidates are :func:`valid_tp_degrees` up to ``max_tp``, tried in increasing order. Raises ValueError naming the largest degree tried if
    none fits. Example: 70B fp16 at 8k on 80 GiB cards needs TP=2 (TP=1 cannot hold 130 GiB).
    """
    _check.instance("model", model, ModelSpec)
    max_tp = _check.positive_int("max_tp", max_tp)
    gpu = as_gpu(gpu)
    for tp in valid_tp_degrees(model, max_tp):
        c = capacity(model, gpu, n_gpus=tp, context_len=context_len, tp_degree=tp,
                     bytes_per_param=bytes_per_param, bytes_per_elem=bytes_per_elem,
                     reserve_fraction=reserve_fraction)
        if c.fits:
            return tp
    raise ValueError(f"{model.name} does not fit on up to max_tp={max_tp} x {gpu.name} "
                     f"at context_len={context_len}")
