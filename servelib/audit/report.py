"""The audit as text: the plan's derived capacity figures, then one block per finding."""
from __future__ import annotations

import math
from numbers import Real

from ..units import fmt_bytes
from .audit import audit, derive, plan_model
from .plan import CapacityPlan


def _value(v, unit: str) -> str:
    if v is None:
        return "not stated"
    if isinstance(v, str) or isinstance(v, bool) or not isinstance(v, Real):
        return str(v)
    if unit == "bytes":
        return f"{fmt_bytes(v)} ({v:,.0f} B)"
    if unit == "fraction":
        return f"{v:.0%}"
    if unit == "USD per 1M tokens":
        return f"${v:,.2f} per 1M tokens"
    if unit == "percentile":
        return f"p{v:g}"
    if unit == "tokens/month":
        return f"{v / 1e9:.2f} B tokens a month"
    text = f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.3g}"
    first, _, rest = unit.partition(" ")
    if v == 1 and first.isalpha() and len(first) > 2 and first.endswith("s"):   # "1 device", not "1 devices";
        unit = f"{first[:-1]} {rest}".rstrip()                                   # "1 ms" stays

    return f"{text} {unit}".rstrip()


def derived_lines(plan: CapacityPlan) -> list[str]:
    """The derived capacity figures of ``plan``, one per line."""
    d = derive(plan)
    tp = plan.tp_degree
    rows = [
        ("weights", f"{fmt_bytes(d.weights_bytes, digits=4)} ({fmt_bytes(d.weights_bytes / tp, digits=4)} per device at TP={tp})"),
        ("KV per token", fmt_bytes(d.kv_bytes_per_token) + (
            f" (marginal past every window; layers: {plan_model(plan).layer_mix})"
            if plan_model(plan).layers else "")),
        ("KV per sequence", f"{fmt_bytes(d.kv_bytes_per_sequence)} at {plan.context_len:,} tokens"),
        ("KV budget", f"{fmt_bytes(d.kv_budget_bytes, digits=4)} over {plan.n_gpus} devices "
                      f"({plan.reserve_fraction:.0%} reserve)"),
        ("concurrency", f"{d.concurrency} conversations ({d.sequences_per_replica} per replica x "
                        f"{plan.n_gpus // tp})"),
        ("smallest TP degree", f"{d.min_tp_degree or 'none'} fits; "
                               f"{d.right_tp_degree or 'none'} meets the target of "
                               f"{plan.target_concurrency} conversations"),
        ("predicted TTFT", f"{d.ttft_s * 1e3:.1f} ms for a {plan.prompt_len:,}-token prompt, empty queue"
                           if d.weights_fit else "none: the deployment does not fit"),
        ("predicted TPOT", f"{d.tpot_s * 1e3:.1f} ms at batch {d.decode_batch}"
                           if d.weights_fit else "none: the deployment does not fit"),
        ("PTU break-even", "no PTU commitment" if d.break_even_utilization is None else
         f"{d.break_even_utilization:.0%} utilisation at {plan.output_fraction:.0%} output "
         f"(an output token uses {plan.output_token_weight:g} input tokens of capacity)"),
    ]
    if d.cheapest_floor_percentile is not None:
        rows.append(("cheapest floor", f"p{d.cheapest_floor_percentile:.0f} of demand, the (1 - u*) "
                                       "quantile, overflow spilled to pay-as-you-go"))
    if d.self_hosted_usd_per_1k is not None:
        per_1m, cross = d.self_hosted_usd_per_1k * 1000, d.crossover_tokens_per_month
        cost = f"${per_1m:,.2f}" if per_1m < 1e9 else f"${per_1m:.3g}"      # no 300-digit figures
        rows += [("self-hosted cost", f"{cost} per 1M tokens at {plan.monthly_tokens / 1e9:.2f} B tokens a "
                                      "month, every line counted"),
                 ("crossover", (f"{cross / 1e9:.2f} B tokens a month against" if math.isfinite(cross)
                                else "none: self-hosting never costs less than")
                  + f" pay-as-you-go at {plan.output_fraction:.0%} output")]
    return [f"  {k:<20}{v}" for k, v in rows]


def finding_lines(plan: CapacityPlan) -> list[str]:
    """The audit of ``plan`` as text: a header, then code, field, wrong/right and why per finding."""
    findings = audit(plan)
    if not findings:
        return ["Audit: no mistakes found"]
    lines = [f"Audit: {len(findings)} mistake{'s' if len(findings) > 1 else ''}"]
    for f in findings:
        lines.append(f"  [{f.code}] {f.mistake} ({f.field})")
        if f.wrong is not None or f.right is not None:
            lines.append(f"    wrong: {_value(f.wrong, f.unit)}; right: {_value(f.right, f.unit)}")
        if f.detail:
            lines.append(f"    {f.detail}")
        lines.append(f"    why: {f.why}")
    return lines


def report(plan: CapacityPlan) -> str:
    """The full report :command:`python -m servelib plan.toml` prints for ``plan``."""
    head = f"Plan: {plan.name}" + (f" ({plan.description})" if plan.description else "")
    gpu = f"{plan.model} on {plan.n_gpus} x {plan.gpu}, TP={plan.tp_degree}"
    return "\n".join([head, gpu, "", "Derived capacity"] + derived_lines(plan) + [""]
                     + finding_lines(plan)) + "\n"
