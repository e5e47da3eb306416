"""Exercises of the chapter "Capacity economics: PAYG vs PTU vs self-hosting" (notebooks/07_economics.ipynb)."""
import dataclasses

from ..economics import (GPT_4O, GPT_4O_MINI, blended_price, break_even_tokens, cheapest_floor_percentile,
                         floor_at_percentile, ptu_break_even_utilization, ptu_monthly_cost_usd, ptus_needed,
                         replica_throughput, spillover_cost)
from ..economics.scenarios import AGENT_CACHED_INPUT_FRACTION, COMMITMENT, MIX_AFTER, MIX_TRACE, SELF_HOST, trace
from ..models import get_model
from .registry import exercise

_PRICES = {"gpt-4o-mini": GPT_4O_MINI, "gpt-4o": GPT_4O}
_MIXES = tuple(round(0.05 * k, 2) for k in range(2, 11))          # 10%, 15%, ..., 50% output


@exercise("ec-1", rtol=1e-3, unit="$ per 1M tokens", vary={"api": tuple(_PRICES), "output_fraction": _MIXES},
          text="**ec-1.** What is the blended price of {api}, in dollars per million tokens, for a workload "
               "whose tokens are {output_fraction:.0%} output?")
def _blended_usd_per_1m(api="gpt-4o-mini", output_fraction=0.2):
    p = _PRICES[api]
    return blended_price(p.usd_per_1k_input, p.usd_per_1k_output, output_fraction) * 1000


def _ec2_text(n_ptu, term, output_fraction):
    reserved = {"monthly": "monthly", "yearly": "for a year"}[term]
    return (f"**ec-2.** A team reserves {n_ptu} gpt-4o PTUs {reserved} in a regional deployment. At a "
            f"{output_fraction:.0%} output mix, how many tokens a month must it send before the reservation "
            f"costs no more than PAYG?")


@exercise("ec-2", rtol=1e-3, unit="tokens per month",
          vary={"n_ptu": (50, 100, 150, 200, 250, 300), "term": ("monthly", "yearly"), "output_fraction": _MIXES},
          text=_ec2_text)
def _break_even_tokens_of_ptus(n_ptu=50, term="monthly", output_fraction=0.3):
    blended = blended_price(GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output, output_fraction)
    return break_even_tokens(ptu_monthly_cost_usd(n_ptu, term), blended)


@exercise("ec-3", rtol=0, unit="PTUs",
          vary={"tokens_per_minute": tuple(range(20_000, 200_001, 10_000)), "output_fraction": _MIXES},
          text="**ec-3.** A gpt-4o PTU sustains 2,500 input tokens a minute and an output token counts as 4 "
               "input tokens. The deployment is Global: it starts at 15 PTUs and grows in steps of 5. How many "
               "PTUs carry {tokens_per_minute:,} tokens a minute at a {output_fraction:.0%} output mix? (Only "
               "the sizing rule matters here; no price is involved.)")
def _ptus_for_a_load(tokens_per_minute=80_000, output_fraction=0.2):
    return ptus_needed(tokens_per_minute, output_fraction, min_ptus=15, step=5)


def _ec4_text(term, output_fraction):
    reserved = {"monthly": "for a month", "yearly": "for a year"}[term]
    return (f"**ec-4.** With the same tokens per PTU, what is the break-even utilisation (a fraction) of a "
            f"gpt-4o PTU reserved {reserved} at the regional rate against gpt-4o PAYG at a "
            f"{output_fraction:.0%} output mix?")


@exercise("ec-4", rtol=1e-3, unit="(fraction)", vary={"term": ("monthly", "yearly"), "output_fraction": _MIXES},
          text=_ec4_text)
def _ptu_break_even(term="yearly", output_fraction=0.2):
    return ptu_break_even_utilization(output_fraction, term)


def _ec5_text(percentile, output_fraction):
    where = "the median" if percentile == 50 else f"the {percentile}th percentile"
    return (f"**ec-5.** On the chapter's trace (`servelib.economics.scenarios.trace()`: 30 days, 60,000 "
            f"tokens/min on average, seed 7), dedicated capacity costs \\$2.50 per million tokens it can carry "
            f"a month (\\$0.1095 per token/min per month) and overflow spills to gpt-4o PAYG at a "
            f"{output_fraction:.0%} output mix. What does a floor at {where} of demand cost a month, in "
            f"dollars, floor and spill together?")


@exercise("ec-5", rtol=1e-3, unit="USD per month",
          vary={"percentile": (20, 30, 40, 50, 60, 70, 80), "output_fraction": (0.1, 0.25, 0.4)}, text=_ec5_text)
def _floor_with_spill(percentile=50, output_fraction=0.25):
    d = trace()
    blended = blended_price(GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output, output_fraction)
    return spillover_cost(d, floor_at_percentile(d, percentile), COMMITMENT.usd_per_tpm_month, blended).total_usd


_ENGINEERS = {0.5: "half an engineer", 1: "one full-time engineer", 2: "two full-time engineers",
              3: "three full-time engineers"}


def _ec6_text(n_engineers, usd_per_gpu_hour):
    return (f"**ec-6.** The self-hosted deployment of this chapter (Llama-3-70B, 4 x H100 per replica at "
            f"\\${usd_per_gpu_hour:.2f} per GPU-hour, batch 64, 4,096-token contexts, at least 2 replicas, "
            f"average load at most 60%, 25% output mix, an engineer at \\$180,000 a year) is run by "
            f"{_ENGINEERS[n_engineers]}. Above what monthly volume, in tokens, does it cost no more than "
            f"gpt-4o PAYG?")


@exercise("ec-6", rtol=1e-3, unit="tokens per month",
          vary={"n_engineers": tuple(_ENGINEERS), "usd_per_gpu_hour": (2.0, 2.5, 3.0, 3.5)}, text=_ec6_text)
def _crossover_tokens(n_engineers=1, usd_per_gpu_hour=2.5):
    # "Above what volume": the volume from which it stays cheaper. Against gpt-4o's price that
    # is also the first volume at which it costs no more, in every variant (no replica added
    # later makes it dearer again; tests/test_grading_tolerance.py works ec-6 the first way).
    sh = dataclasses.replace(SELF_HOST, usd_per_gpu_hour=usd_per_gpu_hour)
    return sh.lasting_crossover(n_engineers=n_engineers)


@exercise("ec-7", rtol=1e-3, unit="tokens per GPU-second",
          vary={"gpu": ("l4", "a100-40gb", "l40s", "a100-80gb", "h100-pcie"), "batch": (16, 32, 48, 64),
                "context_len": (1024, 2048, 4096), "output_fraction": (0.1, 0.2, 0.3)},
          text="**ec-7.** Llama-3-8B in bf16 on one {gpu} ({gpu.memory_gib} GiB, {gpu.gb_per_s} GB/s, "
               "{gpu.bf16_tflops} TFLOP/s), {context_len:,}-token contexts with a 10% memory reserve, a "
               "requested batch of {batch}, a {output_fraction:.0%} output mix. Using the roofline model for "
               "decode and prefill and capping the batch at what the KV cache allows, how many tokens per "
               "GPU-second does it serve?")
def _tokens_per_gpu_s(gpu="l4", batch=48, context_len=2048, output_fraction=0.2):
    return replica_throughput(get_model("llama-3-8b"), gpu, batch=batch, context_len=context_len,
                              output_fraction=output_fraction).tokens_per_gpu_s


def _ec8_text(output_fraction, term):
    return (f"**ec-8.** A gpt-4o PTU sustains 2,500 input tokens a minute, an output token counts as 4 of "
            f"them, and a {term} reservation costs \\${ptu_monthly_cost_usd(1, term):,.0f} a PTU-month. Traffic "
            f"is {output_fraction:.0%} output, and overflow spills to gpt-4o PAYG. At which percentile of "
            f"demand does the cheapest floor of such PTUs sit?")


# A percentile is read off rounded to a whole number (p19 for 19.27, p5 for 5.02): 2% takes that
# and still refuses the capacity counted in plain tokens, the other term's price and 100 u*.
@exercise("ec-8", rtol=0.02, unit="percentile",
          vary={"output_fraction": _MIXES, "term": ("monthly", "yearly")}, text=_ec8_text)
def _cheapest_floor_percentile_yearly_ptu(output_fraction=MIX_TRACE, term="yearly"):
    return cheapest_floor_percentile(ptu_break_even_utilization(output_fraction, term))


def _ec9_text(n_engineers, usd_per_gpu_hour):
    return (f"**ec-9.** The self-hosted deployment of this chapter (Llama-3-70B, 4 x H100 per replica at "
            f"\\${usd_per_gpu_hour:.2f} per GPU-hour, batch 64, 4,096-token contexts, at least 2 replicas, "
            f"average load at most 60%, 25% output mix, an engineer at \\$180,000 a year), run by "
            f"{_ENGINEERS[n_engineers]}, is compared like for like: with Llama-3-70B hosted by a provider at "
            f"\\$0.90 per 1M tokens. What is the smallest monthly volume, in tokens, at which self-hosting "
            f"costs no more? (Each replica added is a step up in cost, so just past that volume it may "
            f"cost more again.)")


@exercise("ec-9", rtol=1e-3, unit="tokens per month",
          vary={"n_engineers": tuple(_ENGINEERS), "usd_per_gpu_hour": (2.0, 2.5, 3.0, 3.5)}, text=_ec9_text)
def _crossover_against_hosted_llama(n_engineers=1, usd_per_gpu_hour=2.5):
    sh = dataclasses.replace(SELF_HOST, usd_per_gpu_hour=usd_per_gpu_hour)
    return sh.crossover(n_engineers=n_engineers, price=sh.hosted)


_CACHED_SHARES = {0.25: "a quarter", 0.5: "half", 0.75: "three quarters"}


def _ec10_text(output_fraction, cached_input_fraction, term):
    reserved = {"monthly": "monthly", "yearly": "for a year"}[term]
    return (f"**ec-10.** The agents' traffic is {output_fraction:.0%} output, and "
            f"{_CACHED_SHARES[cached_input_fraction]} of their input tokens are read from the prompt cache: "
            f"PAYG bills them at gpt-4o's cached price, and a PTU does not count them at all (output tokens "
            f"count as 4 input tokens, 2,500 input tokens a minute per PTU). What is the break-even "
            f"utilisation (a fraction) of a PTU reserved {reserved}?")


@exercise("ec-10", rtol=1e-3, unit="(fraction)",
          vary={"output_fraction": (0.05, 0.1, 0.15, 0.2, 0.25, 0.3), "cached_input_fraction": tuple(_CACHED_SHARES),
                "term": ("monthly", "yearly")}, text=_ec10_text)
def _ptu_break_even_with_cached_input(output_fraction=MIX_AFTER, cached_input_fraction=AGENT_CACHED_INPUT_FRACTION,
                                      term="monthly"):
    return ptu_break_even_utilization(output_fraction, term, cached_input_fraction=cached_input_fraction)
