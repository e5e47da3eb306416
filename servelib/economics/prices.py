"""Published prices the chapter builds on, each with the page it was read from and the date.

Prices change; every figure in the book that depends on one says which constant it used,
so a reader can substitute today's price and re-run. Token prices are stored per 1k tokens
(the package's convention); the price pages quote them per 1M.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _check
from .payg import blended_price

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
    """Pay-as-you-go list price of one hosted model, USD per 1k input and output tokens.

    ``usd_per_1k_cached_input``: the price of an input token read from the provider's prompt
    cache (``None`` where the page lists none). ``batch_discount``: the share taken off input
    and output prices for requests sent through the provider's batch API (answers within a
    day instead of seconds); 0 where there is none.
    """

    model: str
    usd_per_1k_input: float
    usd_per_1k_output: float
    source: Source
    usd_per_1k_cached_input: float | None = None
    batch_discount: float = 0.0

    def __post_init__(self):
        _check.non_negative("usd_per_1k_input", self.usd_per_1k_input)
        _check.non_negative("usd_per_1k_output", self.usd_per_1k_output)
        if self.usd_per_1k_cached_input is not None:
            _check.non_negative("usd_per_1k_cached_input", self.usd_per_1k_cached_input)
        _check.fraction("batch_discount", self.batch_discount, open_right=True)

    def blended(self, output_fraction: float, *, cached_input_fraction: float = 0.0) -> float:
        """Blended price of a mix at these prices, USD per 1k tokens (see
        :func:`servelib.economics.payg.blended_price`); ``cached_input_fraction`` of the input
        tokens are billed at the cached-input price."""
        return blended_price(self.usd_per_1k_input, self.usd_per_1k_output, output_fraction,
                             cached_input_fraction=cached_input_fraction,
                             usd_per_1k_cached_input=self.usd_per_1k_cached_input)

    def batch(self) -> "TokenPrice":
        """The same model through the batch API: input and output at ``1 - batch_discount``
        of the list price. Raises ValueError when the provider lists no batch discount."""
        if not self.batch_discount:
            raise ValueError(f"{self.model} has no batch discount (batch_discount is 0)")
        keep = 1 - self.batch_discount
        return TokenPrice(f"{self.model} (batch API)", self.usd_per_1k_input * keep,
                          self.usd_per_1k_output * keep, self.source)

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


_OPENAI_PRICING = Source("https://openai.com/api/pricing/", "2026-11-30")
_AZURE_OPENAI_PRICING = Source(
    "https://azure.microsoft.com/en-us/pricing/details/cognitive-services/openai-service/", "2026-11-29")

#: gpt-4o (2024-08-06 and later): $2.50 per 1M input, $1.25 per 1M cached input, $10 per 1M
#: output tokens; the batch API takes 50% off input and output.
GPT_4O = TokenPrice("gpt-4o", 2.50 / 1000, 10.00 / 1000, _OPENAI_PRICING,
                    usd_per_1k_cached_input=1.25 / 1000, batch_discount=0.5)
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
#: that for gpt-4.1 and later this equals the model's output:input list-price ratio (4), and
#: that older models, gpt-4o among them, "use a different ratio" which it gives only through
#: its capacity calculator: for gpt-4o the 4 used here is gpt-4.1's rule standing in for
#: that number, and the first thing to ask before signing. Azure also deducts cached input tokens from PTU utilisation entirely
#: (weight 0; the prompt-caching page says "up to 100%").
#: Sources: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/provisioned-throughput-onboarding
#: and https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/prompt-caching (read 2026-11-30).
PTU_OUTPUT_TOKEN_WEIGHT = 4.0
PTU_CACHED_INPUT_WEIGHT = 0.0

#: An open-weights 70B model (Llama-3/3.1/3.3-70B) served by a hosting provider: Fireworks'
#: serverless price for models of 16.1B to 80B parameters, $0.90 per 1M tokens, input and
#: output alike. The same weights and tokenizer as a self-hosted Llama-3-70B, so its price
#: compares like with like; the provider picks the serving precision.
#: Source: https://fireworks.ai/pricing (read 2026-11-30).
LLAMA_3_70B_HOSTED = TokenPrice("llama-3-70b (hosted)", 0.90 / 1000, 0.90 / 1000,
                                Source("https://fireworks.ai/pricing", "2026-11-30"))

#: Rented H100 SXM, USD per GPU-hour: the low end of the specialist clouds' early-2026
#: on-demand range ($2.49-3.99). Source: https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price
#: (read 2026-11-29). Hyperscalers charge more; reservations less.
H100_USD_PER_GPU_HOUR = 2.50
H100_SOURCE = Source("https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price", "2026-11-29")
