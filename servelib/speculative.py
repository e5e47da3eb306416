"""Speculative decoding: a small draft model proposes tokens, the target checks them in one pass.

Each round the draft model decodes ``k`` tokens one at a time; the target then runs one
forward pass over those ``k`` tokens (plus the position after them) for every sequence in
the batch, keeps the longest prefix it agrees with, and adds one token of its own (the
correction at the first disagreement, or a bonus token when all ``k`` were accepted). With
rejection sampling the output has exactly the target's distribution (Leviathan, Kalman and
Matias, ICML 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318).

If each drafted token is accepted with probability ``a``, independently, a round yields
``(1 - a**(k+1)) / (1 - a)`` tokens on average (Leviathan et al., eq. 1). Whether that is a
speed-up depends on what the round costs, which is the roofline's question: at small batch
the target's pass is memory-bound, so checking ``k + 1`` tokens costs about as much as
decoding one; at large batch it is compute-bound, and the pass costs ``k + 1`` times as much,
most of it spent on tokens that get rejected. Step times here are
:func:`servelib.roofline.step_time_s` of the FLOPs ``n (2 P + A) B`` and the bytes
``W + B * KV(context)`` of a pass over ``n`` new tokens per sequence, ``A`` being one
token's attention over the cache, as in :func:`servelib.roofline.predict_tpot_s` (the KV
written by the new tokens is left out, as there).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from . import _check
from .hardware import GPUSpec, as_gpu
from .models import ModelSpec


def _rate_and_len(acceptance_rate, draft_len) -> tuple[float, int]:
    return _check.fraction("acceptance_rate", acceptance_rate), _check.non_negative_int("draft_len", draft_len)


def expected_tokens_per_step(acceptance_rate: float, draft_len: int) -> float:
    """Tokens a speculative round yields on average: ``(1 - a**(k+1)) / (1 - a)``.

    ``acceptance_rate`` ``a`` in [0, 1]: the probability that the target accepts a drafted
    token (independently of the others); ``draft_len`` ``k`` >= 0: tokens drafted per round.
    The round yields the accepted prefix plus one token from the target, so the result lies
    in [1, k + 1]: 1 when nothing is accepted (``a = 0``, or ``k = 0``), ``k + 1`` when
    everything is (``a = 1``, the limit of the formula). Example: ``a = 0.8, k = 4`` gives 3.36.
    Raises ValueError/TypeError for ``a`` outside [0, 1] or ``k`` not an integer >= 0.
    Source: Leviathan et al. (2023), equation 1.
    """
    a, k = _rate_and_len(acceptance_rate, draft_len)
    if a == 1.0:
        return float(k + 1)
    return (1 - a ** (k + 1)) / (1 - a)


def simulate_tokens_per_step(acceptance_rate: float, draft_len: int, n_steps: int, seed: int = 0) -> float:
    """Mean tokens per round over ``n_steps`` simulated rounds (seeded): an independent check
    of :func:`expected_tokens_per_step`.

    Each round accepts drafted tokens one by one, each with probability ``acceptance_rate``,
    stops at the first rejection, and adds the target's own token. Raises as
    :func:`expected_tokens_per_step`, and for ``n_steps`` < 1.
    """
    a, k = _rate_and_len(acceptance_rate, draft_len)
    n = _check.positive_int("n_steps", n_steps)
    rng = random.Random(_check.non_negative_int("seed", seed))
    total = 0
    for _ in range(n):
        accepted = 0
        while accepted < k and rng.random() < a:
            accepted += 1
        total += accepted + 1
    return total / n


def pass_time_s(model: ModelSpec, gpu: GPUSpec | str, *, batch: int, new_tokens: int, context_len: int,
                tp_degree: int = 1, dtype: str = "bf16", bytes_per_param: float = 2,
                bytes_per_elem: float = 2) -> float:
    """Roofline time (s) of one forward pass of ``new_tokens`` tokens for each of ``batch``
    sequences that hold ``context_len`` cached tokens, per device under ``tp_degree``.

    FLOPs ``new_tokens * (2 * n_active_params + A) * batch``, with ``A`` one token's
    attention over ``context_len`` cached keys
    (:func:`servelib.roofline.decode_attention_flops_per_step`; the few keys the new tokens
    add are left out); bytes: the weights once plus every sequence's KV cache,
    ``W + batch * KV(context_len)``. With ``new_tokens=1`` this is
    :func:`servelib.roofline.predict_tpot_s` (dense models); with ``k + 1`` it is a
    verification pass.
    """
    from .memory import kv_bytes_per_sequence, weight_bytes
    from .roofline import (decode_attention_flops_per_step, decode_bytes_per_step, decode_flops_per_step,
                           step_time_s)
    _check.instance("model", model, ModelSpec)
    gpu = as_gpu(gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    b = _check.positive_int("batch", batch)
    n = _check.positive_int("new_tokens", new_tokens)
    flops = n * (decode_flops_per_step(model.n_active_params, b)
                 + decode_attention_flops_per_step(model, context_len, b)) / tp
    kv = kv_bytes_per_sequence(model, context_len, bytes_per_elem, tp_degree=tp)
    moved = decode_bytes_per_step(weight_bytes(model, bytes_per_param) / tp, kv, b)
    return step_time_s(flops, moved, gpu.peak_flops(dtype), gpu.hbm_bandwidth_Bps)


@dataclass(frozen=True)
class SpeculativeEstimate:
    """Roofline estimate of speculative decoding at one batch size (seconds, tokens/s per replica).

    ``tokens_per_step``: :func:`expected_tokens_per_step`. ``target_step_s``: a plain decode
    step of the target; ``draft_step_s``: one draft step; ``verify_step_s``: the target's
    pass over ``draft_len + 1`` tokens per sequence; ``round_s = draft_len * draft_step_s +
    verify_step_s``. ``baseline_tokens_per_s = batch / target_step_s``;
    ``tokens_per_s = batch * tokens_per_step / round_s``; ``speedup`` is their ratio and
    ``pays`` is ``speedup > 1``.
    """

    batch: int
    draft_len: int
    acceptance_rate: float
    tokens_per_step: float
    target_step_s: float
    draft_step_s: float
    verify_step_s: float
    round_s: float
    baseline_tokens_per_s: float
    tokens_per_s: float
    speedup: float

    @property
    def pays(self) -> bool:
        """True when speculation decodes faster than the target alone."""
        return self.speedup > 1


def speculative_estimate(target: ModelSpec, draft: ModelSpec, gpu: GPUSpec | str, *, batch: int,
                         context_len: int, acceptance_rate: float, draft_len: int, tp_degree: int = 1,
                         dtype: str = "bf16", bytes_per_param: float = 2,
                         draft_bytes_per_param: float | None = None,
                         bytes_per_elem: float = 2) -> SpeculativeEstimate:
    """Speculative decoding of ``target`` with ``draft`` on ``gpu``, against the target alone.

    Both models run on the same ``tp_degree`` devices, in ``dtype``, each with its own KV
    cache at ``context_len`` tokens; the draft's weights are ``draft_bytes_per_param``
    (default: the target's ``bytes_per_param``). Memory is not checked: compare ``batch``
    with :func:`servelib.memory.capacity`, counting the draft's weights and cache.
    Raises ValueError/TypeError for bad input (see :func:`expected_tokens_per_step`,
    :func:`pass_time_s`).
    """
    a, k = _rate_and_len(acceptance_rate, draft_len)
    _check.instance("draft", draft, ModelSpec)
    kw = dict(batch=batch, context_len=context_len, tp_degree=tp_degree, dtype=dtype,
              bytes_per_elem=bytes_per_elem)
    d_bpp = bytes_per_param if draft_bytes_per_param is None else draft_bytes_per_param
    t_target = pass_time_s(target, gpu, new_tokens=1, bytes_per_param=bytes_per_param, **kw)
    t_draft = pass_time_s(draft, gpu, new_tokens=1, bytes_per_param=d_bpp, **kw)
    t_verify = pass_time_s(target, gpu, new_tokens=k + 1, bytes_per_param=bytes_per_param, **kw)
    e = expected_tokens_per_step(a, k)
    round_s = k * t_draft + t_verify
    base, spec = batch / t_target, batch * e / round_s
    return SpeculativeEstimate(batch, k, a, e, t_target, t_draft, t_verify, round_s, base, spec, spec / base)


def crossover_batch(target: ModelSpec, draft: ModelSpec, gpu: GPUSpec | str, *, context_len: int,
                    acceptance_rate: float, draft_len: int, max_batch: int = 4096, **kwargs) -> int | None:
    """The smallest batch at which speculative decoding no longer pays (speed-up <= 1).

    Scans batches 1 .. ``max_batch`` with :func:`speculative_estimate` (``kwargs`` are its
    keyword arguments). Returns 1 when it does not pay even for one sequence, None when it
    still pays at ``max_batch``. Whether the batch fits in memory is not checked.
    """
    hi = _check.positive_int("max_batch", max_batch)
    for b in range(1, hi + 1):
        if not speculative_estimate(target, draft, gpu, batch=b, context_len=context_len,
                                    acceptance_rate=acceptance_rate, draft_len=draft_len, **kwargs).pays:
            return b
    return None


def crossover_batch_estimate(critical_batch: float, acceptance_rate: float, draft_len: int,
                             draft_cost_ratio: float) -> float:
    """Closed-form crossover batch: ``B* (E - k c) / (k + 1)``.

    ``critical_batch`` ``B*``: where the target's plain decode turns compute-bound
    (:func:`servelib.roofline.critical_batch`); ``E``: :func:`expected_tokens_per_step`;
    ``draft_cost_ratio`` ``c``: a draft step's time over a target step's. Derivation: past
    ``B*/(k+1)`` the verification pass is compute-bound and costs ``B (k+1) / B*`` target
    steps, the draft ``k c`` of them, the round yields ``E`` tokens per sequence; the
    speed-up ``E / (k c + B (k+1) / B*)`` falls to 1 at this batch. It assumes weights
    dominate the bytes (short contexts) and the draft stays memory-bound. Returns 0.0 when
    ``E - k c <= 1``: then speculation does not pay even at batch 1.
    Raises ValueError for a non-positive ``critical_batch`` or a negative cost ratio.
    """
    bstar = _check.positive("critical_batch", critical_batch)
    c = _check.non_negative("draft_cost_ratio", draft_cost_ratio)
    e = expected_tokens_per_step(acceptance_rate, draft_len)
    k = int(draft_len)
    if e - k * c <= 1:
        return 0.0
    return bstar * (e - k * c) / (k + 1)


def implied_acceptance_rate(speedup: float, draft_len: int, draft_cost_ratio: float) -> float:
    """The acceptance rate that explains a batch-1 ``speedup`` (memory-bound verification).

    At batch 1 the verification pass costs about one target step, so
    ``speedup = E(a, k) / (1 + k c)``; this solves for ``a`` (bisection; ``E`` increases
    with ``a``). ``draft_cost_ratio`` ``c``: a draft step's time over a target step's.
    Example: gpt-fast's 48.4 tokens/s against 25.25 for the target alone, with a draft
    7.8 times faster and ``k = 4``, implies ``a`` of about 0.72.
    Raises ValueError when no rate in [0, 1] gives that speed-up (``E`` must lie in
    [1, k + 1]).
    """
    s = _check.positive("speedup", speedup)
    k = _check.positive_int("draft_len", draft_len)
    c = _check.non_negative("draft_cost_ratio", draft_cost_ratio)
    e = s * (1 + k * c)
    if not 1 <= e <= k + 1:
        raise ValueError(f"a speed-up of {s:g} with draft_len={k} and draft_cost_ratio={c:g} needs "
                         f"{e:.3g} tokens per round, outside [1, {k + 1}]")
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(mid, k) < e else (lo, mid)
    return (lo + hi) / 2


def speculative_concurrency(target: ModelSpec, draft: ModelSpec, gpu: GPUSpec | str, *, context_len: int,
                            tp_degree: int = 1, bytes_per_param: float = 2,
                            draft_bytes_per_param: float | None = None, bytes_per_elem: float = 2,
                            reserve_fraction: float = 0.10) -> int:
    """Sequences of ``context_len`` tokens one replica holds when a draft model shares its GPUs.

    Each device holds its share of both models' weights, and every sequence keeps a KV cache
    in both models: :func:`servelib.memory.max_concurrency` of the budget left after the two
    sets of weights (:func:`servelib.memory.kv_budget_bytes`), over the two caches' bytes per
    token (per device, :func:`servelib.memory.kv_bytes_per_token`). 0 when nothing fits.
    """
    from .memory import kv_budget_bytes, kv_bytes_per_token, max_concurrency, weight_bytes
    gpu = as_gpu(gpu)
    tp = _check.positive_int("tp_degree", tp_degree)
    d_bpp = bytes_per_param if draft_bytes_per_param is None else draft_bytes_per_param
    weights = (weight_bytes(target, bytes_per_param) + weight_bytes(draft, d_bpp)) / tp
    per_token = (kv_bytes_per_token(target, bytes_per_elem, tp) + kv_bytes_per_token(draft, bytes_per_elem, tp))
    return max_concurrency(kv_budget_bytes(gpu.memory_bytes, weights, reserve_fraction), per_token, context_len)
