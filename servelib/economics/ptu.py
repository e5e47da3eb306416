"""Provisioned throughput units (PTU): capacity that depends on the mix, and what a reservation costs.

A PTU sustains a number of *input-equivalent* tokens per minute; an output token counts as
``output_weight`` input tokens (decode costs the provider more than prefill). So the tokens a
PTU serves per minute are ``K / ((1 - f) + w f)`` for an output fraction f: "tokens per PTU"
is not a constant of the datasheet but a function of your mix. When w equals the
output:input price ratio, the same factor scales a token's PAYG price, so the mix cancels
out of the break-even utilisation and moves the number of PTUs a load needs instead.
"""
from __future__ import annotations

import math

from .. import _check
from .payg import break_even_utilization, capacity_units_per_token
from .prices import (AZURE_PTU, GPT_4O, GPT_4O_INPUT_TPM_PER_PTU, HOURS_PER_MONTH, MINUTES_PER_MONTH,
                     PTU_CACHED_INPUT_WEIGHT, PTU_OUTPUT_TOKEN_WEIGHT, PtuPrice, TokenPrice)

TERMS = ("hourly", "monthly", "yearly")


def ptu_tokens_per_minute(n_ptu: float, output_fraction: float, *,
                          input_tpm_per_ptu: float = GPT_4O_INPUT_TPM_PER_PTU,
                          output_weight: float = PTU_OUTPUT_TOKEN_WEIGHT) -> float:
    """Tokens (input plus output) per minute that ``n_ptu`` PTUs sustain at output fraction f.

    ``n_ptu * input_tpm_per_ptu / ((1 - f) + output_weight * f)``. For gpt-4o (2,500 input
    tokens/min per PTU, weight 4) one PTU serves 2,500 tokens/min of pure input, 1,923 at a
    10% output mix and 1,000 at 50%. Raises ValueError for a negative count, a fraction
    outside [0, 1], a rate or weight that is not > 0, or a result that overflows a float.
    """
    n = _check.non_negative("n_ptu", n_ptu)
    k = _check.positive("input_tpm_per_ptu", input_tpm_per_ptu)
    tpm = n * k / capacity_units_per_token(output_fraction, output_weight)
    return _check.finite_result("the PTU throughput", tpm, n_ptu=n_ptu, input_tpm_per_ptu=input_tpm_per_ptu)


def ptu_capacity_tokens_per_month(n_ptu: float, output_fraction: float, **kwargs) -> float:
    """Tokens a month that ``n_ptu`` PTUs can serve at full utilisation (730-hour month).

    Keyword arguments are those of :func:`ptu_tokens_per_minute`.
    """
    tokens = ptu_tokens_per_minute(n_ptu, output_fraction, **kwargs) * MINUTES_PER_MONTH
    return _check.finite_result("the PTU capacity", tokens, n_ptu=n_ptu)


def ptu_monthly_cost_usd(n_ptu: float, term: str = "monthly", price: PtuPrice = AZURE_PTU) -> float:
    """Monthly cost of ``n_ptu`` PTUs under a term: ``'hourly'`` (price per hour x 730 h, no
    reservation), ``'monthly'`` (one-month reservation) or ``'yearly'`` (one-year
    reservation, per month). Default ``price``: Azure's list rates for a *regional*
    deployment (:data:`servelib.economics.prices.AZURE_PTU`): $1,460, $260 and about $221 per
    PTU-month. Raises ValueError for a negative count or an unknown term.
    """
    n = _check.non_negative("n_ptu", n_ptu)
    _check.instance("price", price, PtuPrice)
    per_ptu = {"hourly": price.usd_per_hour * HOURS_PER_MONTH, "monthly": price.usd_per_month,
               "yearly": price.usd_per_month_yearly}[_check.choice("term", term, TERMS)]
    return _check.finite_result("the PTU bill", n * per_ptu, n_ptu=n_ptu, term=term)


def ptus_needed(tokens_per_minute: float, output_fraction: float, *, min_ptus: int = 15,
                step: int = 5, **kwargs) -> int:
    """PTUs to deploy for a sustained load: enough to carry ``tokens_per_minute`` at the mix,
    rounded up to the deployment step and at least the minimum. The defaults are gpt-4o's
    *Global* deployment rule (at least 15, steps of 5); pass ``min_ptus=50, step=50`` for a
    regional deployment, the type whose prices :data:`~servelib.economics.prices.AZURE_PTU`
    holds. Keyword arguments are those of :func:`ptu_tokens_per_minute`. Raises ValueError
    for a negative load or a minimum or step that is not a positive integer.
    """
    load = _check.non_negative("tokens_per_minute", tokens_per_minute)
    lo, st = _check.positive_int("min_ptus", min_ptus), _check.positive_int("step", step)
    per_ptu = ptu_tokens_per_minute(1, output_fraction, **kwargs)
    n = _check.finite_result("the PTU count", load / per_ptu / st, tokens_per_minute=tokens_per_minute, **kwargs)
    return max(lo, st * math.ceil(n - 1e-12))


def ptu_usd_per_tpm_month(output_fraction: float, term: str = "monthly", price: PtuPrice = AZURE_PTU,
                          **kwargs) -> float:
    """Monthly cost of one token-per-minute of dedicated PTU capacity at the mix (USD).

    The price of a spillover floor: a floor of F tokens/min costs ``F`` times this a month.
    """
    usd = ptu_monthly_cost_usd(1, term, price) / ptu_tokens_per_minute(1, output_fraction, **kwargs)
    return _check.finite_result("the price of a token/min", usd, term=term, **kwargs)


def ptu_break_even_utilization(output_fraction: float, term: str = "monthly", *,
                               token_price: TokenPrice = GPT_4O, price: PtuPrice = AZURE_PTU,
                               input_tpm_per_ptu: float = GPT_4O_INPUT_TPM_PER_PTU,
                               output_weight: float = PTU_OUTPUT_TOKEN_WEIGHT,
                               cached_input_fraction: float = 0.0,
                               cached_input_weight: float = PTU_CACHED_INPUT_WEIGHT) -> float:
    """Break-even utilisation of a PTU against PAYG for the same model, with the PTU's
    capacity counted in input-equivalent tokens
    (:func:`servelib.economics.payg.break_even_utilization` with ``output_weight`` w).

    When w equals the output:input price ratio the mix cancels: both the PAYG value of a
    token and the PTU capacity it consumes scale with ``(1 - f) + w f``. gpt-4o at the
    regional PTU list prices: about 0.95 (monthly), 0.81 (yearly), 5.3 (hourly: never), at
    every mix. Cached input (``cached_input_fraction`` of the input tokens, billed by PAYG
    at ``token_price``'s cached price and weighing ``cached_input_weight`` toward the PTU)
    lowers it: with half the input cached and a 10% output mix, 0.75 monthly.
    Raises ValueError for an unknown term or arguments out of range, TypeError for prices
    of the wrong type.
    """
    _check.instance("token_price", token_price, TokenPrice)
    capacity = _check.positive("input_tpm_per_ptu", input_tpm_per_ptu) * MINUTES_PER_MONTH
    return break_even_utilization(ptu_monthly_cost_usd(1, term, price), capacity,
                                  token_price.usd_per_1k_input, token_price.usd_per_1k_output,
                                  output_fraction, output_weight=output_weight,
                                  cached_input_fraction=cached_input_fraction,
                                  usd_per_1k_cached_input=token_price.usd_per_1k_cached_input,
                                  cached_input_weight=cached_input_weight)


__all__ = ["TERMS", "ptu_tokens_per_minute", "ptu_capacity_tokens_per_month", "ptu_monthly_cost_usd",
           "ptus_needed", "ptu_usd_per_tpm_month", "ptu_break_even_utilization"]
