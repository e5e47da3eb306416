"""The audit: recompute a plan's capacity figures with servelib and name each mistake in it.

:func:`derive` computes what the plan's inputs imply (weights, KV per token and per
sequence, budget, concurrency, the smallest TP degree, predicted TTFT/TPOT, the PTU
break-even at the workload's mix and the cheapest floor it implies). :func:`audit`
compares the plan's choices and claimed numbers with those figures and returns one
:class:`~servelib.audit.findings.Finding` per mistake. Every formula is servelib's own
(``memory``, ``roofline``, ``economics``, ``sim``); this module only decides which one a
plan got wrong.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from dataclasses import dataclass

from ..economics import (MINUTES_PER_MONTH, blended_price, break_even_utilization, capacity_units_per_token,
                         cheapest_floor, cheapest_floor_percentile, crossover_tokens_per_month, demand_trace,
                         floor_at_percentile, ptu_capacity_tokens_per_month, replica_throughput, self_hosted_tco,
                         spillover_cost)
from ..memory import (capacity, kv_bytes_per_sequence, kv_bytes_per_token, longest_sequence_tokens, min_tp_degree,
                      weight_bytes)
from ..models import ModelSpec
from ..hardware import ridge_point
from ..roofline import compute_utilization, decode_intensity, decode_tokens_per_s, predict_tpot_s, predict_ttft_s
from ..sim import simulate, workloads
from ..sim.core import token_budget
from .findings import Finding
from .levers import quantization_findings, speculative_findings
from .plan import CapacityPlan, PlanError
from .pools import pool_findings

#: Working-space reserve the audit uses where a plan kept none: the syllabus's "~10%".
SOUND_RESERVE_FRACTION = 0.10
#: A floor above the cheapest one is a mistake when it costs more than this share above the
#: cheapest floor on the seeded trace. The cost is flat near its minimum (a p50 floor where
#: the (1 - u*) quantile is p43 costs 0.5% more), so rounding the percentile is no mistake;
#: a p50 floor of gpt-4o PTUs reserved monthly (u* = 95%, cheapest p5) costs 14% more.
FLOOR_COST_RTOL = 0.05
#: Output mixes over which a break-even quoted without its mix is checked for moving.
_MIX_SPAN = (0.1, 0.5)
#: Relative tolerance when comparing a claimed number with the derived one (people round:
#: "about 183", "40%").
CLAIM_RTOL = 0.02


def plan_model(plan: CapacityPlan) -> ModelSpec:
    """The plan's model (its preset, or its ``[model]`` config.json), with ``n_params``
    overridden when the plan states it.

    An override (e.g. the syllabus's round 70e9 for a 70B model) scales the active
    parameters in proportion, so a mixture of experts keeps its active share.
    """
    m = plan.model_spec()
    if plan.n_params is None:
        return m
    n = round(plan.n_params)
    # At least one active parameter: a tiny override must not round a mixture of experts to none.
    return dataclasses.replace(m, n_params=n, n_active_params=max(1, round(n * m.n_active_params / m.n_params)))


def _capacity(plan, model=None, *, tp_degree=None, reserve_fraction=None):
    return capacity(model or plan_model(plan), plan.gpu_spec(), n_gpus=plan.n_gpus, context_len=plan.context_len,
                    tp_degree=plan.tp_degree if tp_degree is None else tp_degree,
                    bytes_per_param=plan.bytes_per_param, bytes_per_elem=plan.kv_bytes_per_elem,
                    reserve_fraction=plan.reserve_fraction if reserve_fraction is None else reserve_fraction)


def _sound_reserve(plan) -> float:
    return plan.reserve_fraction if plan.reserve_fraction > 0 else SOUND_RESERVE_FRACTION


def right_tp_degree(plan: CapacityPlan) -> int | None:
    """The smallest TP degree that divides ``n_gpus`` and holds ``target_concurrency`` conversations.

    Concurrency is counted over all replicas (``n_gpus // tp``) with the plan's reserve (the
    syllabus's 10% where the plan kept none). Degrees that cannot split the model's heads
    are skipped. ``None`` when no degree up to ``n_gpus`` meets the target.
    """
    model = plan_model(plan)
    for tp in _valid_tp_degrees(plan):
        if _capacity(plan, model, tp_degree=tp, reserve_fraction=_sound_reserve(plan)).concurrency \
                >= plan.target_concurrency:
            return tp
    return None


def _valid_tp_degrees(plan):
    """TP degrees that divide ``n_gpus`` and split the model's heads."""
    model = plan_model(plan)
    return [tp for tp in range(1, plan.n_gpus + 1)
            if not (plan.n_gpus % tp or model.n_heads % tp or (model.n_kv_heads % tp and tp % model.n_kv_heads))]


def max_concurrency_any_tp(plan: CapacityPlan) -> int:
    """The most conversations ``n_gpus`` can hold at any valid TP degree, with the plan's reserve
    (the syllabus's 10% where it kept none): what :func:`right_tp_degree` compares the target with."""
    model = plan_model(plan)
    return max(_capacity(plan, model, tp_degree=tp, reserve_fraction=_sound_reserve(plan)).concurrency
               for tp in _valid_tp_degrees(plan))


@dataclass(frozen=True)
class Derived:
    """What a plan's inputs imply, computed by servelib (bytes, seconds, fractions).

    ``weights_bytes`` and ``kv_bytes_per_token``/``kv_bytes_per_sequence`` are for the whole
    model (all devices); ``kv_budget_bytes`` is summed over the ``n_gpus`` devices;
    ``concurrency`` counts every replica. ``min_tp_degree``: the smallest degree that fits
    the weights plus one sequence (``None`` if none up to ``n_gpus`` does);
    ``right_tp_degree``: the smallest that also meets the target concurrency.
    ``decode_batch``: the batch TPOT is predicted at (``max_batch`` capped by what fits in a
    replica). ``ttft_s`` and ``tpot_s`` are None when the weights plus one sequence do not
    fit a replica: such a deployment has no speed. ``break_even_utilization``: of the PTU
    commitment at the workload's output mix, its capacity counted with the plan's
    ``output_token_weight`` (``None`` without a commitment); ``cheapest_floor_percentile``:
    the percentile of demand at which a floor of that capacity with spill costs least,
    ``100 (1 - u*)``. ``self_hosted_usd_per_1k``: the self-hosted unit
    cost with every line counted, and ``crossover_tokens_per_month`` the volume at which
    self-hosting meets pay-as-you-go (``None`` without a self-hosting case).
    """

    weights_bytes: float
    weights_fit: bool
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    kv_budget_bytes: float
    concurrency: int
    sequences_per_replica: int
    min_tp_degree: int | None
    right_tp_degree: int | None
    ttft_s: float | None
    decode_batch: int
    tpot_s: float | None
    break_even_utilization: float | None
    self_hosted_usd_per_1k: float | None
    crossover_tokens_per_month: float | None
    cheapest_floor_percentile: float | None


def _blended(plan) -> float:
    return blended_price(plan.usd_per_1k_input, plan.usd_per_1k_output, plan.output_fraction)


def _break_even(plan, output_fraction) -> float:
    return break_even_utilization(plan.monthly_commitment_usd, plan.capacity_tokens_per_month,
                                  plan.usd_per_1k_input, plan.usd_per_1k_output, output_fraction,
                                  output_weight=plan.output_token_weight)


def _units_per_token(plan) -> float:
    """Capacity one token of the workload's mix uses, as the commitment counts capacity."""
    return capacity_units_per_token(plan.output_fraction, plan.output_token_weight)


def _floor_usd_per_tpm(plan) -> float:
    """What one token/min of the commitment's capacity, at the workload's mix, costs a month."""
    tpm = plan.capacity_tokens_per_month / MINUTES_PER_MONTH / _units_per_token(plan)
    return plan.monthly_commitment_usd / tpm


def _tco_kwargs(plan) -> dict:
    model = plan_model(plan)
    tput = replica_throughput(model, plan.gpu_spec(), batch=plan.max_batch, context_len=plan.context_len,
                              output_fraction=plan.output_fraction, tp_degree=plan.tp_degree,
                              dtype=plan.dtype, bytes_per_param=plan.bytes_per_param,
                              bytes_per_elem=plan.kv_bytes_per_elem)
    return dict(tokens_per_gpu_s=tput.tokens_per_gpu_s, usd_per_gpu_hour=plan.gpu_usd_per_hour,
                gpus_per_replica=plan.tp_degree, min_replicas=plan.n_gpus // plan.tp_degree,
                n_engineers=plan.engineering_fte, usd_per_engineer_year=plan.usd_per_fte_year)


def plan_tco(plan: CapacityPlan, monthly_tokens: float | None = None):
    """The self-hosting TCO of ``plan`` (:class:`servelib.economics.SelfHostedTCO`), every line counted.

    Throughput from :func:`servelib.economics.replica_throughput` at the plan's batch, context
    and mix; replicas of ``tp_degree`` GPUs, at least ``n_gpus // tp_degree`` of them; the
    plan's GPU price and engineering line. ``monthly_tokens`` defaults to the plan's volume.
    Raises ValueError if the plan has no self-hosting case or its model does not fit.
    """
    if not plan.has_self_hosting:
        raise ValueError("plan has no [self_hosting] table")
    return self_hosted_tco(plan.monthly_tokens if monthly_tokens is None else monthly_tokens,
                           **_tco_kwargs(plan))


@contextlib.contextmanager
def _pricing(table):
    """Re-raise a ValueError from the economics as a PlanError naming the plan's table: every
    field lay in its range, but together they leave a float's range (a 1e300-USD commitment
    on a capacity of 1e-300 tokens), so the plan is invalid, not a crash of the audit."""
    try:
        yield
    except PlanError:
        raise
    except ValueError as e:
        raise PlanError(table, f"cannot be priced with these values together: {e}") from None


def derive(plan: CapacityPlan) -> Derived:
    """The capacity figures of ``plan`` (see :class:`Derived`), from servelib's formulas.

    Raises :class:`PlanError` naming ``ptu`` or ``self_hosting`` when that table's values,
    each in range, cannot be priced together (the arithmetic leaves a float's range)."""
    model = plan_model(plan)
    gpu = plan.gpu_spec()
    cap = _capacity(plan, model)
    try:
        min_tp = min_tp_degree(model, gpu, plan.bytes_per_param, context_len=plan.context_len,
                               bytes_per_elem=plan.kv_bytes_per_elem,
                               reserve_fraction=_sound_reserve(plan), max_tp=plan.n_gpus)
    except ValueError:
        min_tp = None
    batch = max(1, min(plan.max_batch, cap.sequences_per_replica))
    be = floor_p = unit_cost = cross = None
    if plan.has_ptu:
        with _pricing("ptu"):
            be = _break_even(plan, plan.output_fraction)
            floor_p = cheapest_floor_percentile(be)
    if plan.has_self_hosting and cap.fits:
        with _pricing("self_hosting"):
            unit_cost = plan_tco(plan).unit_cost_usd_per_1k
            cross = crossover_tokens_per_month(_blended(plan), **_tco_kwargs(plan))
    common = dict(dtype=plan.dtype, bytes_per_param=plan.bytes_per_param, tp_degree=plan.tp_degree)
    return Derived(
        weights_bytes=weight_bytes(model, plan.bytes_per_param),
        weights_fit=cap.fits,
        kv_bytes_per_token=kv_bytes_per_token(model, plan.kv_bytes_per_elem),
        kv_bytes_per_sequence=kv_bytes_per_sequence(model, plan.context_len, plan.kv_bytes_per_elem),
        kv_budget_bytes=cap.kv_budget_bytes_per_device * plan.n_gpus,
        concurrency=cap.concurrency,
        sequences_per_replica=cap.sequences_per_replica,
        min_tp_degree=min_tp,
        right_tp_degree=right_tp_degree(plan),
        # No speed for a deployment that cannot hold its weights plus one sequence.
        ttft_s=predict_ttft_s(model, gpu, plan.prompt_len, **common) if cap.fits else None,
        decode_batch=batch,
        tpot_s=(predict_tpot_s(model, gpu, batch, plan.context_len, bytes_per_elem=plan.kv_bytes_per_elem,
                               **common) if cap.fits else None),
        break_even_utilization=be,
        self_hosted_usd_per_1k=unit_cost,
        crossover_tokens_per_month=cross,
        cheapest_floor_percentile=floor_p,
    )


def _close(claimed, value) -> bool:
    return math.isclose(claimed, value, rel_tol=CLAIM_RTOL)


def _memory_findings(plan, d):
    """Findings on the deployment's memory: weights, reserve, KV heads, concurrency, TP."""
    model = plan_model(plan)
    mha = dataclasses.replace(model, n_kv_heads=model.n_heads)        # the heads-for-KV slip
    sound = _capacity(plan, reserve_fraction=_sound_reserve(plan)).concurrency
    out = []
    if not d.weights_fit:
        out.append(Finding(
            "weights-exceed-device", "deployment.tp_degree", plan.tp_degree, d.min_tp_degree, "devices",
            f"{d.weights_bytes / plan.tp_degree / 2**30:.1f} GiB of weights per device leave no room "
            f"for one {plan.context_len}-token sequence on one {plan.gpu} "
            f"({plan.gpu_spec().memory_bytes / 2**30:.0f} GiB)"))
    if plan.reserve_fraction == 0:
        out.append(Finding(
            "no-working-reserve", "deployment.reserve_fraction", d.concurrency, sound, "conversations",
            f"with a {SOUND_RESERVE_FRACTION:.0%} reserve the node holds {sound}, not {d.concurrency}"))
    if plan.claimed_kv_bytes_per_token is not None and not _close(plan.claimed_kv_bytes_per_token,
                                                                  d.kv_bytes_per_token):
        wrong = plan.claimed_kv_bytes_per_token
        code = ("attention-heads-for-kv" if _close(wrong, kv_bytes_per_token(mha, plan.kv_bytes_per_elem))
                else "claimed-number-wrong")
        how = (f"2 x {model.n_layers} layers x {model.n_kv_heads} KV heads x {model.head_dim} "
               f"x {plan.kv_bytes_per_elem:g} bytes" if not model.layers else
               f"layer by layer ({model.layer_mix}): the marginal bytes of a token past every window")
        out.append(Finding(code, "claims.kv_bytes_per_token", wrong, d.kv_bytes_per_token, "bytes", how))
    claimed = plan.claimed_concurrency
    if plan.concurrency_basis == "flops":
        out.append(Finding("concurrency-from-flops", "claims.concurrency_basis", claimed, sound,
                           "conversations", "the KV budget, not the FLOP/s, sets how many fit"))
    elif claimed is not None and not (_close(claimed, d.concurrency) or _close(claimed, sound)):
        if _close(claimed, _capacity(plan, mha).concurrency):
            code = "attention-heads-for-kv"
        elif _close(claimed, _capacity(plan, reserve_fraction=0.0).concurrency):
            code = "no-working-reserve"
        elif not d.weights_fit:
            code = "weights-exceed-device"
        else:
            code = "claimed-number-wrong"
        out.append(Finding(code, "claims.concurrency", claimed, d.concurrency if d.weights_fit else sound,
                           "conversations", "recomputed from the KV budget after weights and reserve"))
    if d.right_tp_degree is None:
        best = max_concurrency_any_tp(plan)
        out.append(Finding(
            "target-concurrency-unmet", "deployment.target_concurrency", plan.target_concurrency, best,
            "conversations",
            f"at most {best} conversations of {plan.context_len:,} tokens fit on {plan.n_gpus} x {plan.gpu} "
            f"at any TP degree (with a {_sound_reserve(plan):.0%} reserve): add GPUs or shorten the context"))
    if d.weights_fit and d.right_tp_degree is not None and plan.tp_degree > d.right_tp_degree:
        out.append(Finding(
            "max-tp-degree", "deployment.tp_degree", plan.tp_degree, d.right_tp_degree, "devices",
            f"TP={d.right_tp_degree} already holds the target of {plan.target_concurrency} conversations"))
    return out


@functools.lru_cache(maxsize=1)
def static_vs_continuous():
    """Static and continuous batching on the book's uneven-output workload (seed 0).

    Returns ``(static, continuous)`` :class:`servelib.sim.SimResult` of
    :func:`servelib.sim.workloads.uneven_outputs`; cached, the run is deterministic.
    """
    kw = workloads.uneven_outputs(seed=0)
    return simulate(policy="static", **kw), simulate(policy="continuous", **kw)


def _serving_findings(plan, d):
    """Findings on how the deployment is run: batching, admission, oversize requests, tiers."""
    model, gpu = plan_model(plan), plan.gpu_spec()
    out = []
    if 1 in (plan.max_batch, plan.benchmark_batch):
        right_batch = max(1, _capacity(plan, reserve_fraction=_sound_reserve(plan)).sequences_per_replica)
        kw = dict(dtype=plan.dtype, bytes_per_param=plan.bytes_per_param,
                  bytes_per_elem=plan.kv_bytes_per_elem, tp_degree=plan.tp_degree)
        one = decode_tokens_per_s(model, gpu, 1, plan.context_len, **kw)
        many = decode_tokens_per_s(model, gpu, right_batch, plan.context_len, **kw)
        fld = "serving.max_batch" if plan.max_batch == 1 else "serving.benchmark_batch"
        intensity = decode_intensity(model, 1, plan.context_len, plan.bytes_per_param, plan.kv_bytes_per_elem)
        ridge = ridge_point(gpu, plan.dtype)
        out.append(Finding("batch1-benchmark", fld, one, many, "tokens/s per replica",
                           f"batch-1 decode runs at {intensity:.2f} FLOP/byte against a ridge of {ridge:.0f}, "
                           f"{compute_utilization(intensity, ridge):.1%} of the arithmetic; batch "
                           f"{right_batch} fits in memory and decodes {many / one:.0f}x the tokens per second "
                           "on the same GPUs"))
    if plan.batching == "static" and plan.output_lengths == "variable":
        st, co = static_vs_continuous()
        out.append(Finding("static-batching-uneven-outputs", "serving.batching", st.makespan_s, co.makespan_s,
                           "s makespan",
                           f"continuous batching finishes {st.makespan_s / co.makespan_s:.1f}x sooner with "
                           f"{st.mean_latency_s / co.mean_latency_s:.1f}x lower mean latency "
                           f"({len(workloads.uneven_outputs(seed=0)['requests'])} requests, exponential outputs)"))
    if plan.admission == "prompt":
        out.append(Finding("admit-on-prompt-length", "serving.admission", "prompt", "final", "",
                           "reserve prompt plus maximum output at admission"))
    if plan.oversize_requests == "queue":
        cap = _capacity(plan, reserve_fraction=_sound_reserve(plan))
        limit = longest_sequence_tokens(model, cap.kv_budget_bytes_per_device, plan.kv_bytes_per_elem,
                                        plan.tp_degree)
        if math.isfinite(limit):          # with every layer windowed no request can outgrow the budget
            out.append(Finding("queue-never-fits", "serving.oversize_requests", "queue", "reject", "",
                               f"a request longer than {limit:,} tokens (a replica's whole KV budget) "
                               "can never be admitted"))
    try:
        token_budget(plan.max_batched_tokens, plan.max_batch)      # the simulator's own rule
    except ValueError:
        out.append(Finding("token-budget-below-batch", "serving.max_batched_tokens", plan.max_batched_tokens,
                           plan.max_batch, "tokens per step",
                           f"{plan.max_batch} running sequences need {plan.max_batch} tokens of every step "
                           "to decode, before any prompt is admitted"))
    missed = _slo_missed(plan, d)
    if missed:
        out.append(missed)
    if plan.shared_tiers:
        kw = dict(dtype=plan.dtype, bytes_per_param=plan.bytes_per_param,
                  bytes_per_elem=plan.kv_bytes_per_elem, tp_degree=plan.tp_degree)
        # A deployment that does not fit has no speed to quote (weights-exceed-device says so).
        waits = "" if d.tpot_s is None else (
            f"at the batch tier's batch of {d.decode_batch} a chat user waits {d.tpot_s * 1e3:.0f} ms per "
            f"token, against {predict_tpot_s(model, gpu, 1, plan.context_len, **kw) * 1e3:.0f} ms alone")
        out.append(Finding("shared-interactive-batch", "serving.shared_tiers", "one deployment",
                           "one deployment per tier", "", waits))
    return out


def _slo_missed(plan, d):
    """``slo-below-roofline`` when a latency target is below the roofline's own prediction:
    TTFT below one prompt's prefill on an idle replica, TPOT below a decode step at the batch
    the plan runs. Queueing and scheduling only add to those times."""
    if plan.ttft_slo_s is None or not d.weights_fit:
        return None
    misses = [(fld, target, got) for fld, target, got in
              (("slo.tpot_s", plan.tpot_slo_s, d.tpot_s), ("slo.ttft_s", plan.ttft_slo_s, d.ttft_s))
              if got > target]
    if not misses:
        return None
    kw = dict(dtype=plan.dtype, bytes_per_param=plan.bytes_per_param, bytes_per_elem=plan.kv_bytes_per_elem,
              tp_degree=plan.tp_degree)
    alone = predict_tpot_s(plan_model(plan), plan.gpu_spec(), 1, plan.context_len, **kw)
    said = {"slo.tpot_s": f"a decode step at batch {d.decode_batch} takes {d.tpot_s * 1e3:.1f} ms against a "
                          f"{plan.tpot_slo_s * 1e3:g} ms TPOT target ({alone * 1e3:.1f} ms at batch 1)",
            "slo.ttft_s": f"a {plan.prompt_len:,}-token prefill on an idle replica takes {d.ttft_s * 1e3:.1f} ms "
                          f"against a {plan.ttft_slo_s * 1e3:g} ms TTFT target"}
    fld, target, got = misses[0]
    return Finding("slo-below-roofline", fld, target * 1e3, got * 1e3, "ms",
                   "; ".join(said[f] for f, _, _ in misses))


def _ptu_findings(plan, d):
    """Findings on a PTU commitment: its break-even and mix, its capacity, the floor's size."""
    out = []
    f = plan.output_fraction
    if plan.claimed_break_even_utilization is not None:
        claimed, assumed = plan.claimed_break_even_utilization, plan.break_even_output_fraction
        lo, hi = (_break_even(plan, x) for x in _MIX_SPAN)
        moves = not _close(lo, hi)        # capacity counted so that the mix does not cancel
        span = (f"capacity counted with an output token as {plan.output_token_weight:g} input tokens, so "
                f"this commitment breaks even at {hi:.0%} at {_MIX_SPAN[1]:.0%} output, {lo:.0%} at "
                f"{_MIX_SPAN[0]:.0%}")
        if assumed is None and moves:
            out.append(Finding("ptu-break-even-without-mix", "ptu.break_even_output_fraction", claimed,
                               d.break_even_utilization, "fraction",
                               f"{span}; the workload's mix is {f:.0%} output"))
        elif assumed is not None and not _close(_break_even(plan, assumed), d.break_even_utilization):
            out.append(Finding("ptu-break-even-without-mix", "ptu.break_even_output_fraction", claimed,
                               d.break_even_utilization, "fraction",
                               f"computed at {assumed:.0%} output, but the workload is now {f:.0%} output; "
                               f"{span}"))
        elif not _close(claimed, d.break_even_utilization):
            out.append(Finding("claimed-number-wrong", "ptu.break_even_utilization", claimed,
                               d.break_even_utilization, "fraction",
                               f"commitment / (capacity x blended price at {f:.0%} output), capacity "
                               f"counted with an output token as {plan.output_token_weight:g} input tokens"))
    stated = plan.capacity_tokens_per_month
    at_mix = None if plan.n_ptu is None else ptu_capacity_tokens_per_month(plan.n_ptu, f)
    datasheet = None if plan.n_ptu is None else ptu_capacity_tokens_per_month(plan.n_ptu, 0.0)
    if plan.capacity_estimate == "constant" or (
            at_mix is not None and f > 0 and _close(stated, datasheet) and not _close(stated, at_mix)):
        out.append(Finding("tokens-per-ptu-constant", "ptu.capacity_tokens_per_month", stated, at_mix,
                           "tokens/month", f"output tokens weigh more toward a PTU; at {f:.0%} output "
                           "the same PTUs serve fewer tokens"))
    elif at_mix is not None and not _close(stated, at_mix):
        out.append(Finding("claimed-number-wrong", "ptu.capacity_tokens_per_month", stated, at_mix,
                           "tokens/month", f"{plan.n_ptu:g} PTUs at {f:.0%} output"))
    if plan.floor_percentile is not None and plan.floor_percentile > d.cheapest_floor_percentile:
        # A seeded diurnal-plus-bursts trace with the workload's mean, priced like the commitment.
        trace = demand_trace(mean_tpm=plan.monthly_tokens / MINUTES_PER_MONTH)
        unit, blended = _floor_usd_per_tpm(plan), _blended(plan)
        best = cheapest_floor(trace, unit, blended)
        chosen = spillover_cost(trace, floor_at_percentile(trace, plan.floor_percentile), unit, blended)
        if chosen.total_usd > best.total_usd * (1 + FLOOR_COST_RTOL):
            u, p_star = d.break_even_utilization, d.cheapest_floor_percentile
            used = plan.monthly_tokens * _units_per_token(plan) / plan.capacity_tokens_per_month
            runs = (f"the commitment runs at {used:.0%} utilisation against a {u:.0%} break-even" if used < 1
                    else f"the commitment breaks even at {u:.0%} utilisation")
            where = (f"the cheapest floor is the demand level exceeded {u:.0%} of the time, p{p_star:.0f}"
                     if u < 1 else "no floor pays for itself at these prices")
            out.append(Finding(
                "floor-sized-to-peak", "ptu.floor_percentile", plan.floor_percentile, round(p_star),
                "percentile", f"{runs}; {where}. On a seeded diurnal trace of this demand that floor with spill costs "
                f"${best.total_usd:,.0f} a month against ${chosen.total_usd:,.0f} at p{plan.floor_percentile:g}, "
                "and serves every token"))
    return out


def _self_hosting_findings(plan, d):
    """Findings on a self-hosting business case: which cost lines it counted."""
    if "engineering" in plan.cost_lines or d.self_hosted_usd_per_1k is None:
        return []
    t = plan_tco(plan)
    return [Finding("self-hosting-gpu-hours-only", "self_hosting.cost_lines", t.gpu_only_usd_per_1k * 1000,
                    t.unit_cost_usd_per_1k * 1000, "USD per 1M tokens",
                    f"{plan.engineering_fte:g} engineers on inference operations add "
                    f"${t.engineering_usd:,.0f} a month to ${t.gpu_usd:,.0f} of GPU hours "
                    f"({t.utilization:.0%} utilised)")]


def audit(plan: CapacityPlan) -> list[Finding]:
    """Every mistake in ``plan``, one :class:`Finding` per mistake (at most one per code).

    The plan's choices are checked against the syllabus's rules and each claimed number is
    recomputed with servelib; a claimed number that matches a known mistake's arithmetic
    gets that mistake's code, any other wrong claim the generic ``claimed-number-wrong``.
    An empty list means the plan is sound as far as the audit can tell.
    Raises TypeError if ``plan`` is not a :class:`CapacityPlan`.
    """
    if not isinstance(plan, CapacityPlan):
        raise TypeError(f"plan must be a CapacityPlan, got {type(plan).__name__}")
    d = derive(plan)
    found = {}
    findings = _memory_findings(plan, d) + _serving_findings(plan, d)
    if plan.has_ptu:
        with _pricing("ptu"):
            findings += _ptu_findings(plan, d)
    if plan.has_self_hosting:
        with _pricing("self_hosting"):
            findings += _self_hosting_findings(plan, d)
    model = plan_model(plan)
    findings += quantization_findings(plan, d, model) + speculative_findings(plan, d, model)
    if d.weights_fit:
        findings += pool_findings(plan, d.decode_batch, d.tpot_s)
    for f in findings:
        found.setdefault(f.code, f)
    return list(found.values())
