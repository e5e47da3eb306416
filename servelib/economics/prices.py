"""Published prices the chapter builds on, each with the page it was read from and the date.

Prices change; every figure in the book that depends on one says which constant it used,
so a reader can substitute today's price and re-run. Token prices are stored per 1k tokens
(the package's convention); the price pages quote them per 1M.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _check

#: Hours in a billing month as Azure meters it (8,760 hours a year / 12).
#: Source: Azure pricing calculator convention, https://azure.microsoft.com/en-us/pricing/calculator/
HOURS_PER_MONTH = 730
#: Minutes in that billing month.
MINUTES_PER_MONTH = HOURS_PER_MONTH * 60
#: Seconds in that billing month.
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600


@dataclass(frozen=True)
class Source:
    """Where a price was read: the page and the date it was read on (ISO format)."""

    url: str
    read_on: str


@dataclass(frozen=True)
class TokenPrice:
    """Pay-as-you-go list price of one hosted model, USD per 1k input and output tokens."""

    model: str
    usd_per_1k_input: float
    usd_per_1k_output: float
    source: Source

    def __post_init__(self):
        _check.non_negative("usd_per_1k_input", self.usd_per_1k_input)
        _check.non_negative("usd_per_1k_output", self.usd_per_1k_output)

    @property
    def output_to_input_ratio(self) -> float:
        """How many times an output token costs an input token (4 for gpt-4o).

        Raises ValueError when the input price is 0 (the ratio has no meaning)."""
        _check.positive("usd_per_1k_input", self.usd_per_1k_input)
        return self.usd_per_1k_output / self.usd_per_1k_input


@dataclass(frozen=True)
class PtuPrice:
    """Azure OpenAI provisioned throughput (PTU) prices, USD per PTU, for one deployment type.

    ``usd_per_hour``: hourly (no reservation); ``usd_per_month``: one-month reservation;
    ``usd_per_month_yearly``: the monthly equivalent of a one-year reservation. Azure lists
    separate rates per deployment type (regional, Global, Data Zone); the constant says which.
    """

    usd_per_hour: float
    usd_per_month: float
    usd_per_month_yearly: float
    source: Source

    def __post_init__(self):
        for name in ("usd_per_hour", "usd_per_month", "usd_per_month_yearly"):
            _check.non_negative(name, getattr(self, name))


_OPENAI_PRICING = Source("https://openai.com/api/pricing/", "2026-11-29")
_AZURE_OPENAI_PRICING = Source(
    "https://azure.microsoft.com/en-us/pricing/details/cognitive-services/openai-service/", "2026-11-29")

#: gpt-4o (2024-08-06 and later): $2.50 per 1M input, $10 per 1M output tokens.
GPT_4O = TokenPrice("gpt-4o", 2.50 / 1000, 10.00 / 1000, _OPENAI_PRICING)
#: gpt-4o-mini: $0.15 per 1M input, $0.60 per 1M output tokens.
GPT_4O_MINI = TokenPrice("gpt-4o-mini", 0.15 / 1000, 0.60 / 1000, _OPENAI_PRICING)

#: Azure OpenAI PTU list rates for a *regional* deployment: $2 per PTU-hour, $260 per
#: PTU-month reserved monthly, about $221 per PTU-month reserved for a year. These are the
#: only PTU rates the book uses; Global and Data Zone deployments are priced separately and
#: are not stored here. Sizing rules (minimum and step) differ by deployment type too: see
#: the constants below, and say which one a calculation uses.
AZURE_PTU = PtuPrice(usd_per_hour=2.0, usd_per_month=260.0, usd_per_month_yearly=221.0,
                     source=_AZURE_OPENAI_PRICING)

#: gpt-4o provisioned sizing: input tokens per minute that one PTU sustains (any deployment
#: type), and the minimum deployment and step, which depend on the type: Global 15 / 5,
#: regional 50 / 50. The prices in ``AZURE_PTU`` are the regional ones.
#: Source: https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/provisioned-throughput
#: (read 2026-11-29).
GPT_4O_INPUT_TPM_PER_PTU = 2500
GPT_4O_PTU_MIN_GLOBAL, GPT_4O_PTU_STEP_GLOBAL = 15, 5
GPT_4O_PTU_MIN_REGIONAL, GPT_4O_PTU_STEP_REGIONAL = 50, 50
#: How many input tokens one output token counts as toward PTU utilisation. Azure documents
#: that for gpt-4.1 and later this equals the model's output:input list-price ratio (4);
#: we use the same ratio for gpt-4o. Source: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/provisioned-throughput-onboarding
#: (read 2026-11-29).
PTU_OUTPUT_TOKEN_WEIGHT = 4.0

#: Rented H100 SXM, USD per GPU-hour: the low end of the specialist clouds' early-2026
#: on-demand range ($2.49-3.99). Source: https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price
#: (read 2026-11-29). Hyperscalers charge more; reservations less.
H100_USD_PER_GPU_HOUR = 2.50
H100_SOURCE = Source("https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price", "2026-11-29")
