"""Where prefill runs: one pool that puts whole prompts into decode steps under a token-latency
target those steps cannot meet (code ``one-pool-tight-slos``).

A step that carries a prompt lasts as long as the prompt's arithmetic, and every sequence
decoding beside it waits that long for its next token (:mod:`servelib.disagg`). The finding
gives the step, the chunk that would fit the target, and what the plan's load costs in GPUs
with one pool and chunked prefill and with separate prefill and decode pools.
"""
from __future__ import annotations

from ..disagg import (SLO, InfeasibleSLO, Workload, kv_transfer_bytes, max_prefill_tokens, mixed_step_time_s,
                      size_decode_pool, size_mixed_pool, size_prefill_pool, transfer_time_s)
from ..economics import SECONDS_PER_MONTH
from ..units import fmt_bytes
from .findings import Finding
from .plan import CapacityPlan


def plan_workload(plan: CapacityPlan) -> Workload:
    """The plan's traffic as a :class:`servelib.disagg.Workload`.

    Output tokens per request: ``prompt_len f / (1 - f)`` (f the output fraction of all
    tokens), rounded, at least 2 and at most what the context leaves; the arrival rate:
    monthly tokens over the seconds of a month and the tokens of one request.
    """
    f, s = plan.output_fraction, plan.prompt_len
    room = plan.context_len - s
    out = room if f >= 1 else min(room, round(s * f / (1 - f)))
    out = max(2, out)
    return Workload(plan.monthly_tokens / SECONDS_PER_MONTH / (s + out), s, out)


def _gpus(size):
    try:
        return size().n_gpus
    except InfeasibleSLO:
        return None


def _count(n):
    return "cannot meet both targets" if n is None else f"{n} GPUs"


def pool_findings(plan: CapacityPlan, decode_batch: int, decode_step_s: float) -> list[Finding]:
    """``one-pool-tight-slos`` when ``plan`` serves prefill and decode on one pool, states a
    TPOT target that its decode steps alone meet (``decode_step_s`` at ``decode_batch``, the
    audit's predicted TPOT), and a step carrying its prompt (whole, or the chunk its
    ``max_batched_tokens`` leaves beside the decodes) misses it. A target that the decode
    steps alone miss is ``slo-below-roofline`` instead (:mod:`servelib.audit.audit`)."""
    if plan.pools != "mixed" or plan.tpot_slo_s is None or decode_step_s > plan.tpot_slo_s:
        return []
    from .audit import plan_model         # audit imports this module
    model, gpu, tp, target = plan_model(plan), plan.gpu_spec(), plan.tp_degree, plan.tpot_slo_s
    kw = dict(dtype=plan.dtype, bytes_per_param=plan.bytes_per_param, bytes_per_elem=plan.kv_bytes_per_elem)
    per = plan.prompt_len if plan.max_batched_tokens is None else \
        max(1, min(plan.prompt_len, plan.max_batched_tokens - decode_batch))
    at = dict(decode_batch=decode_batch, context_len=plan.context_len, tp_degree=tp, **kw)
    step = mixed_step_time_s(model, gpu, prefill_tokens=per, **at)
    if step <= target:
        return []
    chunk = max_prefill_tokens(model, gpu, step_target_s=target, **at)
    wl = plan_workload(plan)
    slo = SLO(plan.ttft_slo_s, target, plan.slo_percentile)
    sizing = dict(reserve_fraction=plan.reserve_fraction, **kw)
    kv = kv_transfer_bytes(model, wl.prompt_len, bytes_per_elem=plan.kv_bytes_per_elem, tp_degree=tp)
    transfer = 0.0 if plan.kv_link_Bps is None else transfer_time_s(kv, plan.kv_link_Bps)
    mixed = {ov: _gpus(lambda: size_mixed_pool(model, gpu, wl, slo, tp_degree=tp, overlap=ov, **sizing))
             for ov in (True, False)}
    prefill = _gpus(lambda: size_prefill_pool(model, gpu, wl, slo, tp_degree=tp, transfer_s=transfer, **sizing))
    decode = _gpus(lambda: size_decode_pool(model, gpu, wl, slo, tp_degree=tp, **sizing))
    split = None if None in (prefill, decode) else prefill + decode
    moved = (f"{fmt_bytes(kv)} of KV per device per request"
             + ("" if plan.kv_link_Bps is None else f", {transfer * 1e3:.1f} ms over the link"))
    return [Finding(
        "one-pool-tight-slos", "serving.pools", step * 1e3, target * 1e3, "ms per step",
        f"a step carrying {per:,} prompt tokens beside {decode_batch} decodes takes {step * 1e3:.1f} ms "
        f"({decode_step_s * 1e3:.1f} ms without them); chunks of at most {chunk:,} prompt tokens a step keep "
        f"every step within the target. At {wl.arrival_rate_per_s:.2f} requests/s and a p{slo.percentile:g} "
        f"TTFT of {plan.ttft_slo_s * 1e3:.0f} ms, one pool with chunked prefill needs {_count(mixed[True])} "
        f"({_count(mixed[False])} if a step's arithmetic and memory traffic do not overlap); separate "
        f"pools at TP={tp} need {_count(split)}" + ("" if split is None else f" ({prefill} prefill + {decode} decode)")
        + f", moving {moved}")]
