"""Prefill and decode on the same GPUs or on separate pools: step times, KV transfer, pool sizes, cost.

A serving step processes every running sequence's next token and, in the same pass, any
prompt tokens the scheduler admitted. Prompt tokens are compute-bound, decode tokens
memory-bound, so a step that carries a prompt takes as long as the prompt's FLOPs, and every
running sequence waits that long for its next token (:func:`mixed_step_time_s`). Chunked
prefill caps the prompt tokens per step, which bounds that wait but leaves the prompt's work
on the same GPUs (:func:`chunked_prefill`). Disaggregation runs prompts on one pool and
decodes on another, moving each prompt's KV cache between them
(:func:`kv_transfer_bytes`, :func:`transfer_time_s`).

Pools are sized for a latency target (:class:`SLO`) at an arrival rate and request size
(:class:`Workload`): step times from the roofline (:mod:`servelib.roofline`), batches capped
by KV memory (:mod:`servelib.memory`), waiting from :mod:`servelib.queueing`
(prefill as an M/D/1 queue, decode occupancy as a Poisson count), money from
:mod:`servelib.economics`. Every time is a roofline lower bound: communication between
tensor-parallel devices, kernel efficiency and the attention FLOPs are left out (``2P``
FLOPs a token, as in the simulator's step time, :func:`servelib.sim.roofline_step_time`;
:func:`servelib.roofline.predict_tpot_s` adds a decode token's attention, which changes
nothing while a step is memory-bound). Introduced in the chapter "Disaggregated prefill
and decode".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import _check
from .economics import H100_USD_PER_GPU_HOUR, HOURS_PER_MONTH, SECONDS_PER_MONTH, self_hosted_unit_cost
from .hardware import as_gpu
from .memory import (capacity, check_tp_degree, kv_bytes_per_sequence, kv_bytes_per_token, valid_tp_degrees,
                     weight_bytes)
from .models import ModelSpec
from .queueing import max_mean_occupancy, md1_max_utilization, md1_wait_s
from .roofline import prefill_flops, serial_step_time_s, step_time_s


class InfeasibleSLO(ValueError):
    """No pool size meets the latency target: the reason names the step or prefill that is
    already too slow on one instance, or the model that does not fit one (raise its TP
    degree, or relax the target)."""


def _largest_int(ok, guess: float, lo: int = 0, hi: int | None = None) -> int:
    """The largest integer n in [lo, hi] with ``ok(n)`` (``ok`` true up to some n, false after),
    found from a closed-form ``guess`` and corrected step by step against float rounding;
    ``lo - 1`` if ``ok(lo)`` is false."""
    top = math.inf if hi is None else hi
    n = int(min(max(lo, math.floor(guess) if math.isfinite(guess) else lo), top))
    while n >= lo and not ok(n):
        n -= 1
    while n + 1 <= top and ok(n + 1):
        n += 1
    return n


def mixed_step_time_s(model: ModelSpec, gpu, *, decode_batch: int, context_len: int, prefill_tokens: int,
                      dtype: str = "bf16", bytes_per_param: float = 2, bytes_per_elem: float = 2,
                      tp_degree: int = 1, overlap: bool = True) -> float:
    """Roofline time of one step that decodes ``decode_batch`` sequences at ``context_len`` and
    prefills ``prefill_tokens`` prompt tokens in the same pass, in seconds.

    FLOPs ``2 * n_active_params * (decode_batch + prefill_tokens)``; bytes: the weights once,
    every decoding sequence's KV cache, and the KV the prompt tokens write; each of
    ``tp_degree`` devices does its share (communication ignored: a lower bound). The step
    takes the larger of compute and memory time (:func:`servelib.roofline.step_time_s`).
    With ``prefill_tokens=0`` this is :func:`servelib.roofline.predict_tpot_s` while the step
    is memory-bound (that function also counts the decode tokens' attention FLOPs); with
    ``decode_batch=0`` it is :func:`servelib.roofline.predict_ttft_s` of a
    ``prefill_tokens`` prompt. Raises ValueError for negative counts or an empty step.
    """
    _check.instance("model", model, ModelSpec)
    gpu = as_gpu(gpu)
    b = _check.non_negative_int("decode_batch", decode_batch)
    p = _check.non_negative_int("prefill_tokens", prefill_tokens)
    ctx = _check.positive_int("context_len", context_len)
    tp = _check.positive_int("tp_degree", tp_degree)
    if b + p == 0:
        raise ValueError("decode_batch + prefill_tokens must be >= 1: a step processes at least one token")
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp)
    flops = prefill_flops(model.n_active_params, b + p) / tp
    bytes_moved = weight_bytes(model, bytes_per_param) / tp + b * (kv_tok * ctx) + p * kv_tok
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap must be True or False, got {type(overlap).__name__} {overlap!r}")
    bound = step_time_s if overlap else serial_step_time_s
    return bound(flops, bytes_moved, gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps)


def prefill_slack_tokens(model: ModelSpec, gpu, *, decode_batch: int, context_len: int, dtype: str = "bf16",
                         bytes_per_param: float = 2, bytes_per_elem: float = 2, tp_degree: int = 1) -> int:
    """Prompt tokens a decode step can carry and stay memory-bound: the arithmetic it leaves idle.

    A decode step of ``decode_batch`` sequences streams the weights and their KV for few
    FLOPs; prompt tokens added to it use that idle arithmetic until compute time reaches
    memory time. Solving ``2P(B + p) / (tp * peak) <= (W / tp + B * KV + p * kv) / bandwidth``
    for p gives the count; up to it the step lengthens only by the KV the prompt tokens write
    (``p * kv / bandwidth``), beyond it by ``2P / (tp * peak)`` per token. 0 when the decode
    step is already compute-bound. Keyword arguments as :func:`mixed_step_time_s`.
    """
    gpu = as_gpu(gpu)
    kw = dict(decode_batch=decode_batch, context_len=context_len, dtype=dtype,
              bytes_per_param=bytes_per_param, bytes_per_elem=bytes_per_elem, tp_degree=tp_degree)
    mixed_step_time_s(model, gpu, prefill_tokens=1, **kw)          # validates every argument
    tp, b = int(tp_degree), int(decode_batch)
    peak, bw = gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps
    per_token_compute = 2 * model.n_active_params / (tp * peak)
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp)
    decode_bytes = weight_bytes(model, bytes_per_param) / tp + b * (kv_tok * int(context_len))

    if per_token_compute <= kv_tok / bw:
        raise ValueError(f"{model.name} on {gpu.name}: writing a prompt token's KV takes longer than its "
                         "arithmetic, so prompt tokens never make a step compute-bound")

    def memory_bound(p):
        return per_token_compute * (b + p) <= (decode_bytes + p * kv_tok) / bw

    guess = (decode_bytes / bw - per_token_compute * b) / (per_token_compute - kv_tok / bw)
    return max(0, _largest_int(memory_bound, guess))


def max_prefill_tokens(model: ModelSpec, gpu, *, decode_batch: int, context_len: int, step_target_s: float,
                       dtype: str = "bf16", bytes_per_param: float = 2, bytes_per_elem: float = 2,
                       tp_degree: int = 1, overlap: bool = True) -> int:
    """The most prompt tokens one step can carry beside ``decode_batch`` decodes and still
    finish within ``step_target_s`` (a TPOT target): the chunk size that target allows.

    The largest p with :func:`mixed_step_time_s` ``<= step_target_s``, from the closed form
    of the binding limit (compute, or memory with the KV the prompt writes) corrected
    against rounding. 0 when the decode step alone already takes ``step_target_s`` or more
    (then no chunk fits). Raises ValueError for a target that is not > 0.
    """
    gpu = as_gpu(gpu)
    target = _check.positive("step_target_s", step_target_s)
    kw = dict(decode_batch=decode_batch, context_len=context_len, dtype=dtype, bytes_per_param=bytes_per_param,
              bytes_per_elem=bytes_per_elem, tp_degree=tp_degree, overlap=overlap)
    mixed_step_time_s(model, gpu, prefill_tokens=1, **kw)          # validates every argument
    b, tp = int(decode_batch), int(tp_degree)
    per_token = 2 * model.n_active_params / (tp * gpu.peak_flops(dtype))
    bw = gpu.hbm_bandwidth_Bps
    kv_tok = kv_bytes_per_token(model, bytes_per_elem, tp)
    decode_bytes = weight_bytes(model, bytes_per_param) / tp + b * (kv_tok * int(context_len))
    if overlap:
        guess = min(target / per_token - b, (target * bw - decode_bytes) / kv_tok)
    else:
        guess = (target - per_token * b - decode_bytes / bw) / (per_token + kv_tok / bw)
    return max(0, _largest_int(lambda p: mixed_step_time_s(model, gpu, prefill_tokens=p, **kw) <= target, guess))


@dataclass(frozen=True)
class ChunkedPrefill:
    """One prompt prefilled beside a running decode batch, whole or in chunks (times in s).

    ``n_steps``: steps the prompt spans. ``decode_step_s``: a step with no prompt tokens
    (0 when nothing decodes). ``step_s``: a step carrying a full chunk, the longest gap
    between two tokens that the decoding sequences see. ``stall_s``: ``step_s -
    decode_step_s``. ``ttft_s``: the prompt's prefill time, the sum of its steps (no
    queueing). ``total_stall_s``: the extra time the decoding sequences wait over those
    steps, ``ttft_s - n_steps * decode_step_s``: the prompt's work, which chunking spreads
    but does not remove.
    """

    prompt_len: int
    decode_batch: int
    max_batched_tokens: int | None
    n_steps: int
    decode_step_s: float
    step_s: float
    stall_s: float
    ttft_s: float
    total_stall_s: float


def chunked_prefill(model: ModelSpec, gpu, *, prompt_len: int, decode_batch: int, context_len: int,
                    max_batched_tokens: int | None = None, **kwargs) -> ChunkedPrefill:
    """A ``prompt_len``-token prompt prefilled beside ``decode_batch`` sequences decoding at
    ``context_len``: whole in one step (``max_batched_tokens=None``) or in chunks.

    With a token budget C per step, decode tokens go first (one per running sequence) and
    the prompt takes the rest, ``C - decode_batch`` tokens a step, as vLLM's chunked prefill
    and :func:`servelib.sim.simulate` do; its last chunk may be shorter. Step times from
    :func:`mixed_step_time_s` (``kwargs``: its precision and ``tp_degree`` arguments).
    Raises ValueError when ``max_batched_tokens`` leaves no room for prompt tokens.
    """
    s = _check.positive_int("prompt_len", prompt_len)
    b = _check.non_negative_int("decode_batch", decode_batch)
    if max_batched_tokens is None:
        per = s
    else:
        c = _check.positive_int("max_batched_tokens", max_batched_tokens)
        if c <= b:
            raise ValueError(f"max_batched_tokens ({c}) must exceed decode_batch ({b}): decode tokens "
                             "go first and the prompt needs room for at least one token a step")
        per = min(c - b, s)

    def step(p):
        return mixed_step_time_s(model, gpu, decode_batch=b, context_len=context_len, prefill_tokens=p, **kwargs)

    n = -(-s // per)
    full, last = step(per), step(s - (n - 1) * per)
    decode = step(0) if b else 0.0
    ttft = (n - 1) * full + last
    return ChunkedPrefill(s, b, max_batched_tokens, n, decode, full, full - decode, ttft, ttft - n * decode)


def kv_transfer_bytes(model: ModelSpec, prompt_len: int, *, bytes_per_elem: float = 2, tp_degree: int = 1) -> float:
    """Bytes of KV cache one device of the prefill instance sends per request: the prompt's
    cache, per tensor-parallel shard (:func:`servelib.memory.kv_bytes_per_sequence`).

    Every one of the ``tp_degree`` devices holds ``n_kv_heads / tp_degree`` heads of the
    prompt's keys and values and sends them to its decode-side peer. Example: a
    2,048-token prompt of Llama-3-70B in fp16 is 640 MiB in all, 80 MiB per shard at TP=8.
    """
    return kv_bytes_per_sequence(model, prompt_len, bytes_per_elem, tp_degree)


def transfer_time_s(n_bytes: float, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Time to move ``n_bytes`` over a link of ``bandwidth_Bps`` bytes/s after a fixed
    ``latency_s``: ``latency_s + n_bytes / bandwidth_Bps`` (s).

    For a KV cache under tensor parallelism pass one shard's bytes and one device's link:
    the shards move in parallel. If they share one link, pass its bandwidth divided by the
    number of shards. Raises ValueError for negative sizes or latency, or a bandwidth that
    is not > 0.
    """
    return (_check.non_negative("latency_s", latency_s)
            + _check.non_negative("n_bytes", n_bytes) / _check.positive("bandwidth_Bps", bandwidth_Bps))


@dataclass(frozen=True)
class Workload:
    """Requests arriving at random (Poisson) at ``arrival_rate_per_s``, each a ``prompt_len``-token
    prompt and ``output_len`` output tokens (>= 2: the first comes from the prefill, the rest
    from decode steps). Raises ValueError/TypeError naming the field."""

    arrival_rate_per_s: float
    prompt_len: int
    output_len: int

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "arrival_rate_per_s", _check.positive("arrival_rate_per_s", self.arrival_rate_per_s))
        set_(self, "prompt_len", _check.positive_int("prompt_len", self.prompt_len))
        set_(self, "output_len", _check.positive_int("output_len", self.output_len))
        if self.output_len < 2:
            raise ValueError(f"output_len must be >= 2 (one token has no decode phase), got {self.output_len}")

    @property
    def decode_tokens(self) -> int:
        """Tokens each request gets from decode steps: ``output_len - 1``."""
        return self.output_len - 1

    @property
    def final_len(self) -> int:
        """KV tokens a request holds at its end: ``prompt_len + output_len``."""
        return self.prompt_len + self.output_len

    @property
    def mean_decode_context(self) -> int:
        """The average context of a decoding sequence, ``prompt_len + output_len // 2``: in a
        steady stream the sequences in a batch are spread evenly over their decode."""
        return self.prompt_len + self.output_len // 2

    @property
    def tokens_per_s(self) -> float:
        """Tokens (prompt and output) served per second: ``arrival_rate_per_s * final_len``."""
        return self.arrival_rate_per_s * self.final_len


@dataclass(frozen=True)
class SLO:
    """A latency target: ``ttft_s`` for the time to first token and ``tpot_s`` for every gap
    between two output tokens (the step time), in seconds. ``percentile`` (0-100) is the
    share of requests the TTFT target holds for, and of time a decode instance has a free
    slot; None sizes on means. Raises ValueError naming the field."""

    ttft_s: float
    tpot_s: float
    percentile: float | None = 90.0

    def __post_init__(self):
        _check.positive("ttft_s", self.ttft_s)
        _check.positive("tpot_s", self.tpot_s)
        if self.percentile is not None:
            p = _check._real("percentile", self.percentile)
            if not 0 < p < 100:
                raise ValueError(f"percentile must lie in (0, 100) or be None, got {self.percentile!r}")


@dataclass(frozen=True)
class Pool:
    """Instances of ``tp_degree`` GPUs doing one job, sized for an :class:`SLO` (times in s).

    ``role``: ``"prefill"``, ``"decode"`` or ``"mixed"`` (both, with chunked prefill).
    ``batch``: most sequences decoding on an instance (0 for prefill). ``max_batched_tokens``:
    a mixed instance's token budget per step (None otherwise). ``step_s``: the longest
    decode step, at the full batch (with a full chunk when mixed; NaN for prefill).
    ``prefill_s``: one prompt's prefill on one instance (NaN for decode).
    ``rate_per_instance``: the most requests/s one instance carries within the SLO.
    ``mean_batch``: sequences decoding on an instance on average at the workload's rate.
    ``prefill_busy``: share of time an instance has a prompt in progress. ``ttft_s``: the
    predicted TTFT at the SLO's percentile (NaN for decode).
    """

    role: str
    tp_degree: int
    n_instances: int
    batch: int
    max_batched_tokens: int | None
    step_s: float
    prefill_s: float
    rate_per_instance: float
    mean_batch: float
    prefill_busy: float
    ttft_s: float

    @property
    def n_gpus(self) -> int:
        """GPUs of the pool: instances x TP degree."""
        return self.n_instances * self.tp_degree


def _instances(rate, per_instance):
    return max(1, math.ceil(rate / per_instance * (1 - 1e-12)))


def _precision(dtype, bytes_per_param, bytes_per_elem, tp_degree, overlap=True):
    return dict(dtype=dtype, bytes_per_param=bytes_per_param, bytes_per_elem=bytes_per_elem, tp_degree=tp_degree,
                overlap=overlap)


def _check_sizing(model, gpu, workload, slo):
    _check.instance("model", model, ModelSpec)
    _check.instance("workload", workload, Workload)
    _check.instance("slo", slo, SLO)
    return as_gpu(gpu)


def _memory_batch(model, gpu, context_len, tp, bytes_per_param, bytes_per_elem, reserve_fraction):
    """Sequences of ``context_len`` one instance holds in KV memory; ValueError if none."""
    cap = capacity(model, gpu, n_gpus=tp, context_len=context_len, tp_degree=tp, bytes_per_param=bytes_per_param,
                   bytes_per_elem=bytes_per_elem, reserve_fraction=reserve_fraction)
    if cap.sequences_per_replica < 1:
        raise InfeasibleSLO(f"{model.name} with one {context_len}-token sequence does not fit tp_degree={tp} "
                         f"x {gpu.name}; raise tp_degree")
    return cap.sequences_per_replica


def size_prefill_pool(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, tp_degree: int,
                      transfer_s: float = 0.0, dtype: str = "bf16", bytes_per_param: float = 2,
                      bytes_per_elem: float = 2, reserve_fraction: float = 0.10, overlap: bool = True) -> Pool:
    """The prefill instances that meet ``slo.ttft_s`` at ``workload``'s arrival rate.

    An instance prefills one prompt at a time in ``t_p`` = :func:`mixed_step_time_s` with no
    decode (the roofline TTFT): compute-bound, so batching prompts would not shorten it.
    Arrivals split at random over n instances make each an M/D/1 queue, so
    ``TTFT = wait + t_p + transfer_s`` (``transfer_s``: the KV transfer, charged to the first
    token). The wait budget ``ttft_s - t_p - transfer_s`` caps each instance's utilisation
    (:func:`servelib.queueing.md1_max_utilization` at ``slo.percentile``), and n is the
    fewest instances that keep every one under that cap. Raises :class:`InfeasibleSLO` when
    ``t_p + transfer_s`` alone exceeds the TTFT target or one prompt does not fit an
    instance.
    """
    gpu = _check_sizing(model, gpu, workload, slo)
    tp = _check.positive_int("tp_degree", tp_degree)
    transfer = _check.non_negative("transfer_s", transfer_s)
    _memory_batch(model, gpu, workload.prompt_len, tp, bytes_per_param, bytes_per_elem, reserve_fraction)
    t_p = mixed_step_time_s(model, gpu, decode_batch=0, context_len=workload.prompt_len,
                            prefill_tokens=workload.prompt_len,
                            **_precision(dtype, bytes_per_param, bytes_per_elem, tp, overlap))
    budget = slo.ttft_s - t_p - transfer
    rho = md1_max_utilization(t_p, max(budget, 0.0), slo.percentile)
    if budget < 0 or rho == 0:
        raise InfeasibleSLO(f"one {workload.prompt_len}-token prefill takes {t_p * 1e3:.1f} ms at TP={tp} "
                            f"(plus {transfer * 1e3:.1f} ms of KV transfer), leaving no wait within the "
                            f"{slo.ttft_s * 1e3:.0f} ms TTFT target")
    rate = rho / t_p
    n = _instances(workload.arrival_rate_per_s, rate)
    lam = workload.arrival_rate_per_s / n
    ttft = md1_wait_s(lam, t_p, slo.percentile) + t_p + transfer
    return Pool("prefill", tp, n, 0, None, math.nan, t_p, rate, 0.0, lam * t_p, ttft)


def size_decode_pool(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, tp_degree: int,
                     dtype: str = "bf16", bytes_per_param: float = 2, bytes_per_elem: float = 2,
                     reserve_fraction: float = 0.10, overlap: bool = True) -> Pool:
    """The decode instances that keep every step within ``slo.tpot_s`` at ``workload``'s rate.

    The batch B of an instance is the largest whose step time at the mean decode context
    (:attr:`Workload.mean_decode_context`) is within the TPOT target and whose sequences fit
    in KV memory at their final length (:func:`servelib.memory.capacity`). Each request
    decodes for ``(output_len - 1) * step`` seconds, so an instance carrying r requests/s
    holds a Poisson number of them with mean ``r (output_len - 1) step``; r is capped so
    that this count exceeds B at most ``100 - percentile`` percent of the time
    (:func:`servelib.queueing.max_mean_occupancy`). Raises :class:`InfeasibleSLO` when even
    a batch of one is slower than the target or one sequence does not fit an instance.
    """
    gpu = _check_sizing(model, gpu, workload, slo)
    tp = _check.positive_int("tp_degree", tp_degree)
    kw = _precision(dtype, bytes_per_param, bytes_per_elem, tp, overlap)
    ctx = workload.mean_decode_context
    mem = _memory_batch(model, gpu, workload.final_len, tp, bytes_per_param, bytes_per_elem, reserve_fraction)

    def step(b):
        return mixed_step_time_s(model, gpu, decode_batch=b, context_len=ctx, prefill_tokens=0, **kw)

    b = _largest_int(lambda k: step(k) <= slo.tpot_s, mem, lo=1, hi=mem)
    if b < 1:
        raise InfeasibleSLO(f"a decode step of one sequence takes {step(1) * 1e3:.2f} ms at TP={tp}, "
                            f"above the {slo.tpot_s * 1e3:.1f} ms TPOT target")
    t = step(b)
    rate = max_mean_occupancy(b, slo.percentile) / (workload.decode_tokens * t)
    n = _instances(workload.arrival_rate_per_s, rate)
    mean_batch = workload.arrival_rate_per_s / n * workload.decode_tokens * t
    return Pool("decode", tp, n, b, None, t, math.nan, rate, mean_batch, 0.0, math.nan)


def size_mixed_pool(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, tp_degree: int,
                    dtype: str = "bf16", bytes_per_param: float = 2, bytes_per_elem: float = 2,
                    reserve_fraction: float = 0.10, overlap: bool = True) -> Pool:
    """The instances that prefill and decode together, with chunked prefill, within ``slo``.

    For each batch B that fits in memory, the chunk is the most prompt tokens a step can
    carry beside B decodes and stay within the TPOT target (:func:`max_prefill_tokens`, at
    most one prompt per step);
    a prompt then takes ``t_s`` = :func:`chunked_prefill` of it, and the prompts of an
    instance queue for that one chunk slot as an M/D/1 queue whose wait must fit in
    ``ttft_s - t_s``. Decode steps last ``T_f`` while a prompt is in progress (a share
    ``rho = r t_s`` of the time) and ``T_d`` otherwise, so a request's decode lasts
    ``(output_len - 1) / (rho / T_f + (1 - rho) / T_d)``; its Poisson occupancy must stay
    within B as for :func:`size_decode_pool`. An instance carries the smaller of the two
    rates, the best B is kept, and n is the fewest instances that carry the workload.
    Raises :class:`InfeasibleSLO` when no batch meets both targets or one sequence does
    not fit an instance.
    """
    gpu = _check_sizing(model, gpu, workload, slo)
    tp = _check.positive_int("tp_degree", tp_degree)
    kw = _precision(dtype, bytes_per_param, bytes_per_elem, tp, overlap)
    ctx, s = workload.mean_decode_context, workload.prompt_len
    mem = _memory_batch(model, gpu, workload.final_len, tp, bytes_per_param, bytes_per_elem, reserve_fraction)
    best = None
    for b in range(1, mem + 1):
        t_d = mixed_step_time_s(model, gpu, decode_batch=b, context_len=ctx, prefill_tokens=0, **kw)
        if t_d > slo.tpot_s:
            break
        chunk = min(s, max_prefill_tokens(model, gpu, decode_batch=b, context_len=ctx, step_target_s=slo.tpot_s,
                                          **kw))
        if chunk < 1:
            continue
        cp = chunked_prefill(model, gpu, prompt_len=s, decode_batch=b, context_len=ctx,
                             max_batched_tokens=b + chunk, **kw)
        if cp.ttft_s > slo.ttft_s:
            continue
        rate_p = md1_max_utilization(cp.ttft_s, slo.ttft_s - cp.ttft_s, slo.percentile) / cp.ttft_s
        m = max_mean_occupancy(b, slo.percentile)
        # r (out - 1) = m (rho / T_f + (1 - rho) / T_d) with rho = r t_s, solved for r.
        rate_d = (m / t_d) / (workload.decode_tokens + m * cp.ttft_s * (1 / t_d - 1 / cp.step_s))
        rate = min(rate_p, rate_d)
        if rate > 0 and (best is None or rate > best[0]):
            best = (rate, b, chunk, cp)
    if best is None:
        raise InfeasibleSLO(f"no batch at TP={tp} meets both a {slo.tpot_s * 1e3:.1f} ms step and a "
                            f"{slo.ttft_s * 1e3:.0f} ms TTFT for {s}-token prompts")
    rate, b, chunk, cp = best
    n = _instances(workload.arrival_rate_per_s, rate)
    lam = workload.arrival_rate_per_s / n
    rho = lam * cp.ttft_s
    t_mean = 1 / (rho / cp.step_s + (1 - rho) / cp.decode_step_s)
    ttft = md1_wait_s(lam, cp.ttft_s, slo.percentile) + cp.ttft_s
    return Pool("mixed", tp, n, b, b + chunk, cp.step_s, cp.ttft_s, rate, lam * workload.decode_tokens * t_mean,
                rho, ttft)


@dataclass(frozen=True)
class Disaggregated:
    """A prefill pool and a decode pool with the KV of every prompt moved between them.

    ``kv_bytes_per_shard``: what each prefill device sends per request
    (:func:`kv_transfer_bytes`); ``transfer_s``: its time over the link, charged to TTFT.
    """

    prefill: Pool
    decode: Pool
    kv_bytes_per_shard: float
    transfer_s: float

    @property
    def n_gpus(self) -> int:
        """GPUs of both pools together."""
        return self.prefill.n_gpus + self.decode.n_gpus


def size_disaggregated(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, prefill_tp: int, decode_tp: int,
                       link_Bps: float, link_latency_s: float = 0.0, dtype: str = "bf16",
                       bytes_per_param: float = 2, bytes_per_elem: float = 2,
                       reserve_fraction: float = 0.10, overlap: bool = True) -> Disaggregated:
    """Separate prefill and decode pools for ``slo`` at ``workload``'s rate.

    Each prefill device sends its shard of the prompt's KV (:func:`kv_transfer_bytes` at
    ``prefill_tp``) over its own link of ``link_Bps`` bytes/s after ``link_latency_s``
    (:func:`transfer_time_s`); the prefill pool is sized with that time inside the TTFT
    target (:func:`size_prefill_pool`), the decode pool for the TPOT target
    (:func:`size_decode_pool`). Raises as those functions do.
    """
    kv = kv_transfer_bytes(model, workload.prompt_len, bytes_per_elem=bytes_per_elem, tp_degree=prefill_tp)
    transfer = transfer_time_s(kv, link_Bps, link_latency_s)
    common = dict(dtype=dtype, bytes_per_param=bytes_per_param, bytes_per_elem=bytes_per_elem,
                  reserve_fraction=reserve_fraction, overlap=overlap)
    prefill = size_prefill_pool(model, gpu, workload, slo, tp_degree=prefill_tp, transfer_s=transfer, **common)
    decode = size_decode_pool(model, gpu, workload, slo, tp_degree=decode_tp, **common)
    return Disaggregated(prefill, decode, kv, transfer)


def usd_per_million_tokens(n_gpus: int, workload: Workload, usd_per_gpu_hour: float = H100_USD_PER_GPU_HOUR) -> float:
    """Cost of ``n_gpus`` rented GPUs per 1M tokens (prompt and output) of ``workload``, in USD.

    The GPUs are paid every hour of the month (:data:`servelib.economics.HOURS_PER_MONTH`)
    and carry ``workload.tokens_per_s`` every second of it:
    :func:`servelib.economics.self_hosted_unit_cost` times 1,000. GPU hours only: add the
    engineers with :func:`servelib.economics.self_hosted_tco`. Raises ValueError for a
    non-positive GPU count or a negative price.
    """
    n = _check.positive_int("n_gpus", n_gpus)
    _check.instance("workload", workload, Workload)
    monthly = n * _check.non_negative("usd_per_gpu_hour", usd_per_gpu_hour) * HOURS_PER_MONTH
    return self_hosted_unit_cost(monthly, workload.tokens_per_s * SECONDS_PER_MONTH) * 1000


def _fewest(candidates):
    best = None
    for size in candidates:
        try:
            found = size()
        except InfeasibleSLO:
            continue
        if best is None or found.n_gpus < best.n_gpus:
            best = found
    return best


def _degrees(model: ModelSpec, tp_degrees) -> list:
    """The degrees to try: those of 1, 2, 4 and 8 that split ``model``
    (:func:`servelib.memory.valid_tp_degrees`) when ``tp_degrees`` is None; else each given
    degree, checked (ValueError names one that does not split the model)."""
    if tp_degrees is None:
        return [tp for tp in (1, 2, 4, 8) if tp in valid_tp_degrees(model, 8)]
    return [check_tp_degree(model, tp) for tp in tp_degrees]


def cheapest_mixed_pool(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, tp_degrees=None,
                        **kwargs) -> Pool | None:
    """The :func:`size_mixed_pool` with the fewest GPUs over ``tp_degrees`` (the first in
    order on a tie; default: 1, 2, 4 and 8, those that split the model), or None when no
    degree meets ``slo``. ``kwargs``: precision, ``reserve_fraction`` and ``overlap``, as
    :func:`size_mixed_pool`. Raises ValueError for a given degree that does not split the model."""
    return _fewest(lambda tp=tp: size_mixed_pool(model, gpu, workload, slo, tp_degree=tp, **kwargs)
                   for tp in _degrees(model, tp_degrees))


def cheapest_disaggregated(model: ModelSpec, gpu, workload: Workload, slo: SLO, *, link_Bps: float,
                           tp_degrees=None, **kwargs) -> Disaggregated | None:
    """The :func:`size_disaggregated` with the fewest GPUs over every pair of prefill and
    decode degrees in ``tp_degrees`` (as :func:`cheapest_mixed_pool`; the first in order on
    a tie), or None when no pair meets ``slo``. ``kwargs``: ``link_latency_s``, precision,
    ``reserve_fraction`` and ``overlap``, as :func:`size_disaggregated`."""
    degrees = _degrees(model, tp_degrees)
    return _fewest(lambda a=a, b=b: size_disaggregated(model, gpu, workload, slo, prefill_tp=a, decode_tp=b,
                                                       link_Bps=link_Bps, **kwargs)
                   for a in degrees for b in degrees)
