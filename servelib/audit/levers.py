"""Audit findings on the levers beyond the basics: quantizing the weights, speculative decoding.

Each function takes a plan and its :class:`~servelib.audit.audit.Derived` figures and
returns a list of :class:`~servelib.audit.findings.Finding` (empty when the plan's
``[quantization]`` or ``[speculative]`` table is absent or sound). The figures are
servelib's own: :func:`servelib.quantization.quantized_decode_speedup` and
:func:`servelib.speculative.speculative_estimate` at the batch the plan decodes at.
"""
from __future__ import annotations

from ..models import get_model
from ..quantization import assumed_bandwidth_ratio, quantized_decode_speedup
from ..speculative import crossover_batch, speculative_concurrency, speculative_estimate
from .findings import Finding

#: Relative slack on a claimed speed-up before it is called impossible (people round).
SPEEDUP_RTOL = 0.02


def quantization_findings(plan, d, model) -> list[Finding]:
    """``quantization-speedup-from-bytes`` when the claimed decode speed-up of the proposed
    weight format beats the roofline ceiling at the plan's batch and context: the speed-up
    of an ideal kernel (the full bandwidth, the bytes cut by the format, scales included).

    ``model`` is the plan's model (:func:`~servelib.audit.audit.plan_model`).
    """
    if plan.quantize_weights is None:
        return []
    kw = dict(batch=d.decode_batch, context_len=plan.context_len, bytes_per_elem=plan.kv_bytes_per_elem,
              tp_degree=plan.tp_degree, dtype=plan.dtype)
    gpu = plan.gpu_spec()
    ceiling = quantized_decode_speedup(model, gpu, plan.quantize_weights, bandwidth_ratio=1.0, **kw)
    if plan.claimed_quantized_speedup <= ceiling * (1 + SPEEDUP_RTOL):
        return []
    likely = quantized_decode_speedup(model, gpu, plan.quantize_weights, **kw)
    at_one = quantized_decode_speedup(model, gpu, plan.quantize_weights, bandwidth_ratio=1.0,
                                      **{**kw, "batch": 1})
    return [Finding(
        "quantization-speedup-from-bytes", "quantization.claimed_decode_speedup",
        plan.claimed_quantized_speedup, ceiling, "times as fast",
        f"{plan.quantize_weights} weights at batch {d.decode_batch} and {plan.context_len:,} tokens of "
        f"context: at most {ceiling:.2f}x with an ideal kernel ({at_one:.2f}x at batch 1, where the "
        f"weights dominate the bytes), {likely:.2f}x at the {assumed_bandwidth_ratio(plan.quantize_weights):.0%} "
        "of bandwidth gpt-fast's published kernels reached")]


def speculative_findings(plan, d, model) -> list[Finding]:
    """``speculative-at-large-batch`` when speculative decoding, at the batch the plan decodes
    (its decode batch, capped at what fits once the draft's weights and KV cache share the
    devices: :func:`servelib.speculative.speculative_concurrency`), its acceptance rate and
    draft length, is slower than plain decoding by the roofline. The draft runs on the same
    devices, split the same way.
    """
    if plan.draft_model is None:
        return []
    kw = dict(context_len=plan.context_len, tp_degree=plan.tp_degree, bytes_per_param=plan.bytes_per_param,
              bytes_per_elem=plan.kv_bytes_per_elem)
    draft, gpu = get_model(plan.draft_model), plan.gpu_spec()
    room = speculative_concurrency(model, draft, gpu, reserve_fraction=plan.reserve_fraction, **kw)
    batch = max(1, min(d.decode_batch, room))
    kw.update(acceptance_rate=plan.acceptance_rate, draft_len=plan.draft_len, dtype=plan.dtype)
    est = speculative_estimate(model, draft, gpu, batch=batch, **kw)
    if est.pays:
        return []
    cross = crossover_batch(model, draft, gpu, max_batch=batch, **kw)
    best = speculative_estimate(model, draft, gpu, batch=1, **kw).speedup
    pays_below = (f"it pays only below batch {cross} ({best:.2f}x at batch 1)" if cross > 1
                  else "it does not pay even at batch 1")
    memory = (f" (with the draft's weights and KV cache beside the target's, a replica holds {room} "
              f"sequences, not {d.decode_batch})" if room < d.decode_batch else "")
    return [Finding(
        "speculative-at-large-batch", "speculative.draft_model", batch, cross - 1, "sequences per step",
        f"drafting {plan.draft_len} tokens with {plan.draft_model} at {plan.acceptance_rate:.0%} acceptance "
        f"decodes at {est.speedup:.2f}x the plain speed at batch {batch}{memory}: a round costs "
        f"{plan.draft_len} x {est.draft_step_s * 1e3:.1f} ms of drafting + {est.verify_step_s * 1e3:.1f} ms "
        f"of verification and yields {est.tokens_per_step:.2f} tokens per sequence, against "
        f"{est.target_step_s * 1e3:.1f} ms per plain step; {pays_below}")]
