"""Self-hosting: tokens per GPU-second from the serving model, a TCO with every line shown,
and the volume at which it crosses pay-as-you-go.

The throughput is not an assumption typed in: it comes from the roofline model of the
chosen model on the chosen GPU (:mod:`servelib.roofline`) at a stated batch and context,
with the batch capped at the concurrency the KV-cache memory allows (:mod:`servelib.memory`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import _check
from ..hardware import GPUSpec, as_gpu
from ..memory import capacity
from ..models import ModelSpec
from ..roofline import decode_tokens_per_s, predict_ttft_s
from .prices import HOURS_PER_MONTH, SECONDS_PER_MONTH


def self_hosted_unit_cost(fixed_monthly_usd: float, monthly_tokens: float) -> float:
    """USD per 1k tokens of a deployment whose monthly cost is fixed: ``fixed / tokens * 1000``.

    Every self-hosted cost is fixed per month (GPUs rented or owned, people), so the unit
    cost falls as 1/volume: a utilisation bet. Raises ValueError for a negative cost, a
    volume that is not > 0, or a cost that overflows a float.
    """
    usd = (_check.non_negative("fixed_monthly_usd", fixed_monthly_usd)
           / _check.positive("monthly_tokens", monthly_tokens) * 1000)
    return _check.finite_result("the unit cost", usd, fixed_monthly_usd=fixed_monthly_usd,
                                monthly_tokens=monthly_tokens)


@dataclass(frozen=True)
class ReplicaThroughput:
    """Predicted throughput of one serving replica (``tp_degree`` GPUs) at a token mix.

    ``batch`` is the batch actually run: the requested one capped at the KV-cache
    concurrency (``max_batch``). ``decode_tokens_per_s``: output tokens/s at that batch;
    ``prefill_tokens_per_s``: prompt tokens/s of a ``context_len`` prompt; ``tokens_per_s``:
    tokens of the mix per second; ``tokens_per_gpu_s``: that divided by the GPUs.
    """

    model: str
    gpu: str
    tp_degree: int
    batch_requested: int
    max_batch: int
    batch: int
    context_len: int
    output_fraction: float
    decode_tokens_per_s: float
    prefill_tokens_per_s: float
    tokens_per_s: float
    tokens_per_gpu_s: float


def replica_throughput(model: ModelSpec, gpu: GPUSpec | str, *, batch: int, context_len: int,
                       output_fraction: float, tp_degree: int = 1, dtype: str = "bf16",
                       bytes_per_param: float = 2, bytes_per_elem: float = 2) -> ReplicaThroughput:
    """Tokens per second (and per GPU-second) of one replica serving a mix, from the roofline.

    Decode: :func:`servelib.roofline.decode_tokens_per_s` at ``min(batch, concurrency)``,
    the concurrency from :func:`servelib.memory.capacity` for ``context_len`` tokens per
    sequence. Prefill: ``context_len / predict_ttft_s`` (compute-bound for long prompts).
    The replica time-shares the two, so a token of a mix with output fraction f takes
    ``f / decode + (1 - f) / prefill`` seconds. A roofline bound: real engines reach some
    fraction of it (communication, scheduling and kernels are ignored).
    Raises ValueError if one sequence of ``context_len`` does not fit the replica, TypeError
    if ``model`` is not a ModelSpec (a preset name is not accepted, as elsewhere in servelib).
    """
    _check.instance("model", model, ModelSpec, "a ModelSpec (servelib.models.get_model(name) gives a preset)")
    gpu = as_gpu(gpu)
    f = _check.fraction("output_fraction", output_fraction)
    want = _check.positive_int("batch", batch)
    tp = _check.positive_int("tp_degree", tp_degree)
    cap = capacity(model, gpu, n_gpus=tp, context_len=context_len, tp_degree=tp,
                   bytes_per_param=bytes_per_param, bytes_per_elem=bytes_per_elem)
    if cap.concurrency < 1:
        raise ValueError(f"{model.name} at context_len={context_len} does not fit tp_degree={tp} "
                         f"x {gpu.name}; raise tp_degree")
    b = min(want, cap.concurrency)
    kw = dict(dtype=dtype, bytes_per_param=bytes_per_param, tp_degree=tp)
    decode = decode_tokens_per_s(model, gpu, b, context_len, bytes_per_elem=bytes_per_elem, **kw)
    prefill = context_len / predict_ttft_s(model, gpu, context_len, **kw)
    mixed = 1 / (f / decode + (1 - f) / prefill)
    return ReplicaThroughput(model.name, gpu.name, tp, want, cap.concurrency, b, context_len, f,
                             decode, prefill, mixed, mixed / tp)


@dataclass(frozen=True)
class SelfHostedTCO:
    """A month of a self-hosted deployment, every line itemised (USD, tokens).

    ``gpu_usd`` = GPUs x hours x price, of which ``idle_usd`` pays for capacity left unused
    at the achieved ``utilization``; ``engineering_usd`` = engineers on inference
    operations (on-call included) x loaded cost / 12. ``unit_cost_usd_per_1k`` is the whole
    bill per 1k tokens served; ``gpu_only_usd_per_1k`` what a GPU-hours-only case claims.
    """

    monthly_tokens: float
    n_replicas: int
    n_gpus: int
    capacity_tokens: float
    utilization: float
    gpu_usd: float
    idle_usd: float
    engineering_usd: float
    total_usd: float
    unit_cost_usd_per_1k: float
    gpu_only_usd_per_1k: float


def self_hosted_tco(monthly_tokens: float, tokens_per_gpu_s: float, usd_per_gpu_hour: float, *,
                    gpus_per_replica: int = 1, min_replicas: int = 1, max_utilization: float = 0.6,
                    n_engineers: float = 0.0, usd_per_engineer_year: float = 0.0) -> SelfHostedTCO:
    """Monthly TCO of serving ``monthly_tokens`` on rented GPUs.

    Replicas: enough that average load stays at or below ``max_utilization`` of capacity
    (headroom for peaks and latency targets), never fewer than ``min_replicas`` (redundancy).
    Capacity: ``tokens_per_gpu_s`` x GPUs x 730 h x 3600 s. Raises ValueError for negative
    volumes, prices or head-counts, a ``max_utilization`` outside (0, 1], or inputs whose
    bill is too large for a float (over about 1.8e308 USD).
    """
    v = _check.non_negative("monthly_tokens", monthly_tokens)
    rate = _check.positive("tokens_per_gpu_s", tokens_per_gpu_s)
    price = _check.non_negative("usd_per_gpu_hour", usd_per_gpu_hour)
    g = _check.positive_int("gpus_per_replica", gpus_per_replica)
    lo = _check.positive_int("min_replicas", min_replicas)
    u_max = _check.fraction("max_utilization", max_utilization)
    if u_max == 0:
        raise ValueError("max_utilization must lie in (0, 1], got 0")
    eng = (_check.non_negative("n_engineers", n_engineers)
           * _check.non_negative("usd_per_engineer_year", usd_per_engineer_year) / 12)
    replica_tokens = rate * g * SECONDS_PER_MONTH
    need = v / (replica_tokens * u_max)
    if not math.isfinite(need):
        raise ValueError(f"monthly_tokens ({v:g}) over tokens_per_gpu_s ({rate:g}) needs more replicas "
                         "than can be counted")
    replicas = max(lo, math.ceil(need - 1e-12))
    # In floats: a replica count past 1e308 makes Python's int-to-float conversion raise
    # OverflowError, where a bill that large is a ValueError on the inputs.
    cap = float(replicas) * replica_tokens
    gpu_usd = float(replicas) * g * HOURS_PER_MONTH * price
    if not math.isfinite(gpu_usd + eng):
        raise ValueError(f"the monthly bill overflows a float: monthly_tokens ({v:g}), usd_per_gpu_hour "
                         f"({price:g}), n_engineers x usd_per_engineer_year ({n_engineers:g} x "
                         f"{usd_per_engineer_year:g}) must give a total below 1.8e308 USD")
    util = v / cap
    per_1k = (lambda usd: usd / v * 1000) if v else (lambda usd: math.inf)
    return SelfHostedTCO(v, replicas, replicas * g, cap, util, gpu_usd, gpu_usd * (1 - util), eng,
                         gpu_usd + eng, per_1k(gpu_usd + eng), per_1k(gpu_usd))


def crossover_tokens_per_month(blended_usd_per_1k: float, tokens_per_gpu_s: float,
                               usd_per_gpu_hour: float, **tco_kwargs) -> float:
    """The smallest monthly volume at which self-hosting costs no more than PAYG.

    PAYG costs ``volume x blended``; self-hosting is a staircase (one step per replica) plus
    the engineering line. For each replica count the step's cost is compared with PAYG over
    the volumes that count serves. Returns ``math.inf`` when a replica costs more than the
    PAYG value of the load it may carry (then self-hosting never wins on cost).
    ``tco_kwargs`` are those of :func:`self_hosted_tco`; ``math.inf`` too when the volume is
    beyond what a float holds (about 1.8e308 tokens).
    """
    price = _check.positive("blended_usd_per_1k", blended_usd_per_1k)
    first = self_hosted_tco(0, tokens_per_gpu_s, usd_per_gpu_hour, **tco_kwargs)
    step_usd = first.gpu_usd / first.n_replicas
    step_tokens = first.capacity_tokens / first.n_replicas * tco_kwargs.get("max_utilization", 0.6)
    if step_usd >= step_tokens / 1000 * price:
        return math.inf
    k0, eng = first.n_replicas, first.engineering_usd

    def meets(k):                       # step k's break-even lies within the volumes it serves
        return (k * step_usd + eng) / price * 1000 <= k * step_tokens

    # Closed form rather than a walk up the steps (a thin margin would mean billions of them):
    # k s + E <= k T p  <=>  k >= E / (T p - s). The two loops only absorb rounding at the edge.
    k = eng / (step_tokens / 1000 * price - step_usd)
    if not math.isfinite(k):                 # so is the volume: beyond what a float holds
        return math.inf
    if k < 2**53:                            # above it every float is a whole number already
        k = max(k0, math.ceil(k))
        while k > k0 and meets(k - 1):
            k -= 1
        while not meets(k):
            k += 1
    breakeven = (k * step_usd + eng) / price * 1000
    return max(breakeven, (k - 1) * step_tokens if k > k0 else 0.0)


def lasting_crossover_tokens_per_month(blended_usd_per_1k: float, tokens_per_gpu_s: float,
                                       usd_per_gpu_hour: float, **tco_kwargs) -> float:
    """The monthly volume above which self-hosting never costs more than PAYG again.

    :func:`crossover_tokens_per_month` gives the first volume at which the staircase meets
    the PAYG line; but each replica added is a step up, and just past a step the staircase
    may stand above the line again. With ``s`` USD per replica, ``T`` tokens a replica
    carries (at ``max_utilization``), ``E`` the engineering line and ``p`` the PAYG price
    per token, replica ``k`` (beyond the minimum ``k0``) serves ``((k - 1) T, k T]`` at a
    cost of ``k s + E``, which is above PAYG from the start of its step up to
    ``(k s + E) / p``. That stretch shrinks by ``T - s / p`` a replica, so the last replica
    with one is the largest ``k < (T + E / p) / (T - s / p)``, and self-hosting stays
    cheaper from ``(k s + E) / p`` on (``k0``'s own break-even when no later step has one).
    Equal to :func:`crossover_tokens_per_month` when no step crosses back. Returns
    ``math.inf`` where that one does (a replica costs more than the PAYG value of its load).
    ``tco_kwargs`` are those of :func:`self_hosted_tco`; raises ValueError as it does.
    Returns ``math.inf`` too when the volume is beyond what a float holds.
    """
    price = _check.positive("blended_usd_per_1k", blended_usd_per_1k) / 1000      # USD per token
    first = self_hosted_tco(0, tokens_per_gpu_s, usd_per_gpu_hour, **tco_kwargs)
    step_usd = first.gpu_usd / first.n_replicas
    step_tokens = first.capacity_tokens / first.n_replicas * tco_kwargs.get("max_utilization", 0.6)
    margin = step_tokens - step_usd / price           # tokens a step gains on PAYG
    if margin <= 0:
        return math.inf
    # Closed form rather than a walk up the steps: a thin margin would mean millions of them.
    steps = (step_tokens + first.engineering_usd / price) / margin
    if not math.isfinite(steps):                 # so is the volume: beyond what a float holds
        return math.inf
    last = max(first.n_replicas, math.ceil(steps) - 1)
    return (last * step_usd + first.engineering_usd) / price
