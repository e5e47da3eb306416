"""Speculative decoding timed on this device: a small and a large random-weight decoder.

Both models are :class:`~servelib.measure.ToyDecoder` instances: the target is the toy
decoder the other chapters time, the draft a scaled-down copy of it (:func:`draft_spec`).
Random weights cannot agree with each other, so acceptance is simulated: the tokens a
round yields are drawn with :func:`servelib.speculative.simulate_tokens_per_step` at a
chosen acceptance rate. Everything that costs time is real: ``k`` draft decode steps and
the target's verification pass over ``k + 1`` tokens per sequence (causal attention over
the cache, logits at every position), timed together as one round, against a plain decode
step of the target at the same batch. Predictions come from
:func:`servelib.speculative.speculative_estimate` on the device's measured ceilings.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from .. import _check
from ..hardware import GPUSpec
from ..models import ModelSpec
from ..speculative import simulate_tokens_per_step, speculative_estimate
from .ceilings import Ceilings
from .timer import time_interleaved
from .toy import ToyDecoder


def draft_spec(target: ModelSpec) -> ModelSpec:
    """A draft model for ``target``: a third of the layers (at least one), half the width,
    heads and MLP, the same vocabulary (a draft must speak the target's tokens).

    For the CPU 'full' toy (6 layers, hidden 2048) that is 2 layers of hidden 1024, about a
    tenth of its weight bytes, the ratio of Llama-2-7B drafting for Llama-2-70B; for the
    'small' toy (2 layers) one layer, about a fifth.
    """
    _check.instance("target", target, ModelSpec)
    return target.scaled(n_layers=max(1, target.n_layers // 3), hidden_size=target.hidden_size // 2,
                         n_heads=max(1, target.n_heads // 2), n_kv_heads=max(1, target.n_kv_heads // 2),
                         intermediate_size=target.intermediate_size // 2, name=f"draft for {target.name}")


def ceilings_spec(ceilings: Ceilings, memory_bytes: float | None = None,
                  name: str = "this machine (measured)") -> GPUSpec:
    """The measured ceilings as a :class:`~servelib.hardware.GPUSpec`, so that servelib's
    roofline functions predict for this device: bandwidth = copy bandwidth, peak = matmul
    FLOP/s in ``ceilings.dtype``. ``memory_bytes`` (no roofline time depends on it) defaults
    to the host's RAM; ValueError where the platform cannot report it and none is given.
    """
    _check.instance("ceilings", ceilings, Ceilings)
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            raise ValueError("this platform does not report its RAM: pass memory_bytes") from None
    return GPUSpec(name, float(memory_bytes), ceilings.copy_bandwidth_Bps, {ceilings.dtype: ceilings.matmul_flops})


@dataclass(frozen=True)
class SpeculativePoint:
    """One batch size: measured seconds of a plain target step, the verification pass and a
    whole round (``draft_len`` draft steps + verification), the simulated ``tokens_per_step``,
    tokens/s without and with speculation, the measured ``speedup``, and the roofline's
    ``predicted_speedup`` on the measured ceilings."""

    batch: int
    target_step_s: float
    verify_step_s: float
    round_s: float
    tokens_per_step: float
    baseline_tokens_per_s: float
    tokens_per_s: float
    speedup: float
    predicted_speedup: float


@dataclass(frozen=True)
class SpeculativeSweep:
    """A sweep over batch sizes: the models' names and weight bytes, ``draft_len``,
    ``acceptance_rate``, ``context_len`` and the :class:`SpeculativePoint` list."""

    target: str
    draft: str
    target_weights_bytes: float
    draft_weights_bytes: float
    draft_len: int
    acceptance_rate: float
    context_len: int
    points: tuple

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def speculative_sweep(target: ToyDecoder, draft: ToyDecoder, batches, *, context_len: int,
                      acceptance_rate: float, draft_len: int, ceilings: Ceilings,
                      repeats: int = 3, min_run_time: float = 0.05, seed: int = 0,
                      progress=None) -> SpeculativeSweep:
    """Time speculative decoding of ``target`` with ``draft`` at each batch in ``batches``.

    Every sequence holds ``context_len`` cached tokens (random values: a step's cost does not
    depend on them). A round is ``draft_len`` draft steps then the target's pass over
    ``draft_len + 1`` tokens with ``all_logits``; its tokens are simulated at
    ``acceptance_rate`` (4,096 seeded rounds). The plain step, the verification pass and the
    round are timed in turn, ``repeats`` times (:func:`servelib.measure.timer.time_interleaved`). ``progress``, if given, gets a line per batch.
    Raises ValueError for bad sizes, an empty or non-increasing ``batches``, or models with
    different vocabularies.
    """
    _check.instance("target", target, ToyDecoder)
    _check.instance("draft", draft, ToyDecoder)
    if target.spec.vocab_size != draft.spec.vocab_size:
        raise ValueError("the draft must share the target's vocabulary (vocab_size differs)")
    batches = [_check.positive_int("batch", b) for b in batches]
    if not batches or any(a >= b for a, b in zip(batches, batches[1:])):
        raise ValueError(f"batches must be a non-empty increasing sequence, got {batches!r}")
    ctx = _check.positive_int("context_len", context_len)
    k = _check.positive_int("draft_len", draft_len)
    e = simulate_tokens_per_step(acceptance_rate, k, 4096, seed)
    spec = ceilings_spec(ceilings)
    points = []
    for b in batches:
        t_cache, d_cache = target.new_cache(b, ctx + k + 1), draft.new_cache(b, ctx + k)
        t_cache.normal_()
        d_cache.normal_()
        one, block = target.tokens(b, 1, seed), target.tokens(b, k + 1, seed)

        def plain():
            target.forward(one, t_cache, ctx)

        def verify():
            target.forward(block, t_cache, ctx, all_logits=True)

        def round_():
            for i in range(k):
                draft.forward(one, d_cache, ctx + i)
            verify()

        t_plain, t_verify, t_round = (t.median_s for t in time_interleaved(
            (plain, verify, round_), target.device, repeats=repeats, min_run_time=min_run_time))
        predicted = speculative_estimate(target.spec, draft.spec, spec, batch=b, context_len=ctx,
                                         acceptance_rate=acceptance_rate, draft_len=k,
                                         dtype=ceilings.dtype, bytes_per_param=target.bytes_per_param,
                                         bytes_per_elem=target.bytes_per_param).speedup
        base, spec_rate = b / t_plain, b * e / t_round
        points.append(SpeculativePoint(b, t_plain, t_verify, t_round, e, base, spec_rate, spec_rate / base,
                                       predicted))
        if progress:
            progress(f"batch {b}: plain {t_plain * 1e3:.1f} ms, round {t_round * 1e3:.1f} ms, "
                     f"speed-up {spec_rate / base:.2f}x (predicted {predicted:.2f}x)")
    return SpeculativeSweep(target.spec.name, draft.spec.name, target.weights_read_bytes, draft.weights_read_bytes,
                            k, acceptance_rate, ctx, tuple(points))
