"""Exercises of the chapter "Capacity economics: PAYG vs PTU vs self-hosting" (notebooks/07_economics.ipynb)."""
from ..economics import (GPT_4O, GPT_4O_MINI, blended_price, break_even_tokens, cheapest_floor_percentile,
                         floor_at_percentile, ptu_break_even_utilization, ptu_monthly_cost_usd, ptus_needed,
                         replica_throughput, spillover_cost)
from ..economics.scenarios import AGENT_CACHED_INPUT_FRACTION, COMMITMENT, MIX_AFTER, MIX_TRACE, SELF_HOST, trace
from ..models import get_model
from .registry import exercise


@exercise("ec-1", rtol=1e-6, unit="$ per 1M tokens")
def _blended_gpt4o_mini():
    return blended_price(GPT_4O_MINI.usd_per_1k_input, GPT_4O_MINI.usd_per_1k_output, 0.2) * 1000


@exercise("ec-2", rtol=1e-4, unit="tokens per month")
def _break_even_tokens_50_ptu():
    blended = blended_price(GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output, 0.3)
    return break_even_tokens(ptu_monthly_cost_usd(50, "monthly"), blended)


@exercise("ec-3", rtol=0, unit="PTUs")
def _ptus_for_80k_tpm():
    return ptus_needed(80_000, 0.2, min_ptus=15, step=5)


@exercise("ec-4", rtol=1e-3, unit="(fraction)")
def _yearly_ptu_break_even():
    return ptu_break_even_utilization(0.2, "yearly")


@exercise("ec-5", rtol=1e-3, unit="USD per month")
def _p50_floor_with_spill():
    d = trace()
    blended = blended_price(GPT_4O.usd_per_1k_input, GPT_4O.usd_per_1k_output, MIX_TRACE)
    return spillover_cost(d, floor_at_percentile(d, 50), COMMITMENT.usd_per_tpm_month, blended).total_usd


@exercise("ec-6", rtol=1e-3, unit="tokens per month")
def _crossover_one_engineer():
    return SELF_HOST.crossover(n_engineers=1)


@exercise("ec-7", rtol=1e-3, unit="tokens per GPU-second")
def _llama8b_l4_tokens_per_gpu_s():
    return replica_throughput(get_model("llama-3-8b"), "l4", batch=48, context_len=2048,
                              output_fraction=0.2).tokens_per_gpu_s


@exercise("ec-8", rtol=0.05, unit="percentile")
def _cheapest_floor_percentile_yearly_ptu(output_fraction=MIX_TRACE, term="yearly"):
    return cheapest_floor_percentile(ptu_break_even_utilization(output_fraction, term))


@exercise("ec-9", rtol=0.01, unit="tokens per month")
def _crossover_against_hosted_llama(n_engineers=1.0):
    return SELF_HOST.crossover(n_engineers=n_engineers, price=SELF_HOST.hosted)


@exercise("ec-10", rtol=0.01, unit="(fraction)")
def _ptu_break_even_with_cached_input(output_fraction=MIX_AFTER, cached_input_fraction=AGENT_CACHED_INPUT_FRACTION,
                                      term="monthly"):
    return ptu_break_even_utilization(output_fraction, term, cached_input_fraction=cached_input_fraction)
