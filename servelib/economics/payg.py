"""Pay-as-you-go (PAYG) arithmetic: the blended price of a mix and the break-even of a commitment.

Prices are USD per 1k tokens; ``output_fraction`` f is the share of all tokens (input plus
output) that are output tokens.
"""
from __future__ import annotations

from .. import _check


def blended_price(usd_per_1k_input: float, usd_per_1k_output: float, output_fraction: float) -> float:
    """Price of one average token of a mix, USD per 1k tokens: ``c_in * (1 - f) + c_out * f``.

    gpt-4o ($2.50 / $10 per 1M) gives 3.25 $/1M at f = 0.1 and 6.25 $/1M at f = 0.5.
    Raises ValueError for a negative price or ``output_fraction`` outside [0, 1].
    """
    c_in = _check.non_negative("usd_per_1k_input", usd_per_1k_input)
    c_out = _check.non_negative("usd_per_1k_output", usd_per_1k_output)
    f = _check.fraction("output_fraction", output_fraction)
    return c_in * (1 - f) + c_out * f


def payg_cost_usd(tokens: float, blended_usd_per_1k: float) -> float:
    """Pay-as-you-go bill for ``tokens`` tokens at a blended price (USD per 1k tokens).

    Raises ValueError for negative volumes or prices.
    """
    return (_check.non_negative("tokens", tokens) / 1000
            * _check.non_negative("blended_usd_per_1k", blended_usd_per_1k))


def break_even_tokens(monthly_commitment_usd: float, blended_usd_per_1k: float) -> float:
    """Monthly tokens at which a fixed commitment costs the same as pay-as-you-go:
    ``commitment / blended * 1000``.

    Below this volume the commitment costs more than paying per token. Raises ValueError for
    a negative commitment or a price that is not > 0.
    """
    c = _check.non_negative("monthly_commitment_usd", monthly_commitment_usd)
    return c / _check.positive("blended_usd_per_1k", blended_usd_per_1k) * 1000


def break_even_utilization(monthly_commitment_usd: float, capacity_tokens_per_month: float,
                           usd_per_1k_input: float, usd_per_1k_output: float,
                           output_fraction: float) -> float:
    """Share of a commitment's capacity that must be used for it to cost no more than PAYG.

    ``break_even_tokens(commitment, blended_price(c_in, c_out, f)) / capacity``. With the
    capacity counted in tokens regardless of mix, this scales with ``1 / blended``, so when
    output tokens cost more than input tokens it *falls* as the output fraction rises: the
    same commitment replaces more PAYG dollars per token. A result above 1 means the
    commitment never pays for itself at that mix.
    Raises ValueError for negative money, non-positive capacity or a fraction outside [0, 1].
    """
    cap = _check.positive("capacity_tokens_per_month", capacity_tokens_per_month)
    blended = blended_price(usd_per_1k_input, usd_per_1k_output, output_fraction)
    return break_even_tokens(monthly_commitment_usd, blended) / cap
