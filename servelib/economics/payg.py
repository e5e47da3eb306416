"""Pay-as-you-go (PAYG) arithmetic: the blended price of a mix and the break-even of a commitment.

Prices are USD per 1k tokens; ``output_fraction`` f is the share of all tokens (input plus
output) that are output tokens, and ``cached_input_fraction`` h the share of *input* tokens
that the provider reads from its prompt cache (billed at a cached-input price).

The break-even of a commitment has one formula (:func:`break_even_utilization`) whose
behaviour depends on how the seller counts capacity: in tokens of any kind (every weight 1,
the case where the mix moves the break-even) or in input-equivalent tokens with output
tokens weighed at the output:input price ratio (a PTU: the mix cancels, and moves the
capacity instead).
"""
from __future__ import annotations

from .. import _check


def blended_price(usd_per_1k_input: float, usd_per_1k_output: float, output_fraction: float, *,
                  cached_input_fraction: float = 0.0, usd_per_1k_cached_input: float | None = None) -> float:
    """Price of one average token of a mix, USD per 1k tokens:
    ``c_in (1 - f)(1 - h) + c_cached (1 - f) h + c_out f``.

    With no cached input (h = 0) this is ``c_in (1 - f) + c_out f``: gpt-4o ($2.50 / $10 per
    1M) gives 3.25 $/1M at f = 0.1 and 6.25 $/1M at f = 0.5; with half the input cached at
    $1.25 per 1M, 2.69 $/1M at f = 0.1. Raises ValueError for a negative price (the cached
    one too, whenever it is given), a fraction outside [0, 1], or ``cached_input_fraction``
    > 0 without ``usd_per_1k_cached_input``; TypeError for a price that is not a number.
    """
    c_in = _check.non_negative("usd_per_1k_input", usd_per_1k_input)
    c_out = _check.non_negative("usd_per_1k_output", usd_per_1k_output)
    f = _check.fraction("output_fraction", output_fraction)
    h = _check.fraction("cached_input_fraction", cached_input_fraction)
    # A stated cached price is checked even when no input is cached: a typo must not pass quietly.
    c_cached = (None if usd_per_1k_cached_input is None
                else _check.non_negative("usd_per_1k_cached_input", usd_per_1k_cached_input))
    if h == 0:
        return c_in * (1 - f) + c_out * f
    if c_cached is None:
        raise ValueError("usd_per_1k_cached_input is required when cached_input_fraction > 0 "
                         f"(got cached_input_fraction={cached_input_fraction!r})")
    return c_in * (1 - f) * (1 - h) + c_cached * (1 - f) * h + c_out * f


def capacity_units_per_token(output_fraction: float, output_weight: float = 1.0, *,
                             cached_input_fraction: float = 0.0, cached_input_weight: float = 1.0) -> float:
    """Capacity one average token of the mix uses, in input-token units:
    ``(1 - f)(1 - h) + (1 - f) h w_cached + f w``.

    ``output_weight`` w: how many input tokens of capacity one output token uses (1 when the
    capacity is a count of tokens of any kind; the output:input price ratio for an Azure PTU
    of gpt-4.1 or later). ``cached_input_weight``: the same for a cached input token (Azure
    deducts cached tokens from PTU utilisation entirely: 0). Raises ValueError for a
    fraction outside [0, 1] or a weight that is negative (``output_weight`` must be > 0).
    """
    f = _check.fraction("output_fraction", output_fraction)
    w = _check.positive("output_weight", output_weight)
    h = _check.fraction("cached_input_fraction", cached_input_fraction)
    wc = _check.non_negative("cached_input_weight", cached_input_weight)
    return (1 - f) * (1 - h) + (1 - f) * h * wc + f * w


def payg_cost_usd(tokens: float, blended_usd_per_1k: float) -> float:
    """Pay-as-you-go bill for ``tokens`` tokens at a blended price (USD per 1k tokens).

    Raises ValueError for negative volumes or prices, or a bill that overflows a float.
    """
    usd = (_check.non_negative("tokens", tokens) / 1000
           * _check.non_negative("blended_usd_per_1k", blended_usd_per_1k))
    return _check.finite_result("the PAYG bill", usd, tokens=tokens, blended_usd_per_1k=blended_usd_per_1k)


def break_even_tokens(monthly_commitment_usd: float, blended_usd_per_1k: float) -> float:
    """Monthly tokens at which a fixed commitment costs the same as pay-as-you-go:
    ``commitment / blended * 1000``.

    Below this volume the commitment costs more than paying per token. It moves with the
    mix whatever the commitment, because the blended price does. Raises ValueError for a
    negative commitment, a price that is not > 0, or a volume that overflows a float.
    """
    c = _check.non_negative("monthly_commitment_usd", monthly_commitment_usd)
    volume = c / _check.positive("blended_usd_per_1k", blended_usd_per_1k) * 1000
    return _check.finite_result("the break-even volume", volume, monthly_commitment_usd=monthly_commitment_usd,
                                blended_usd_per_1k=blended_usd_per_1k)


def break_even_utilization(monthly_commitment_usd: float, capacity_tokens_per_month: float,
                           usd_per_1k_input: float, usd_per_1k_output: float,
                           output_fraction: float, *, output_weight: float = 1.0,
                           cached_input_fraction: float = 0.0, usd_per_1k_cached_input: float | None = None,
                           cached_input_weight: float = 1.0) -> float:
    """Share of a commitment's capacity that must be used for it to cost no more than PAYG.

    ``u* = V* x units / capacity``: the break-even volume ``V* = 1000 C / b`` (tokens,
    :func:`break_even_tokens`) times the capacity one token uses
    (:func:`capacity_units_per_token`), over the capacity sold, ``capacity_tokens_per_month``,
    counted as the seller counts it. With no cached input that is

        u* = 1000 C / (capacity x c_in) x ((1 - f) + w f) / ((1 - f) + r f),   r = c_out / c_in.

    * Capacity counted in tokens of any kind (``output_weight`` w = 1, the default): u* goes
      as ``1 / b(f)``, so when output costs more than input it *rises* as the output
      fraction falls (40% at f = 0.5 -> 77% at f = 0.1 for $2.50 per 1M tokens of capacity
      against gpt-4o).
    * Capacity in input-equivalent tokens with output weighed at the price ratio (w = r, an
      Azure PTU): the mix cancels and u* depends on prices alone; the mix moves how many
      tokens the capacity carries instead.

    A result above 1 means the commitment never pays for itself at that mix. Raises
    ValueError for negative money, non-positive capacity, a fraction outside [0, 1], or a
    result that overflows a float.
    """
    cap = _check.positive("capacity_tokens_per_month", capacity_tokens_per_month)
    blended = blended_price(usd_per_1k_input, usd_per_1k_output, output_fraction,
                            cached_input_fraction=cached_input_fraction,
                            usd_per_1k_cached_input=usd_per_1k_cached_input)
    units = capacity_units_per_token(output_fraction, output_weight,
                                     cached_input_fraction=cached_input_fraction,
                                     cached_input_weight=cached_input_weight)
    u = break_even_tokens(monthly_commitment_usd, blended) * units / cap
    return _check.finite_result("the break-even utilisation", u, monthly_commitment_usd=monthly_commitment_usd,
                                capacity_tokens_per_month=capacity_tokens_per_month)
