"""The chapter's documented scenarios: every assumption behind its war stories, stated once.

Prices come from :mod:`.prices`; what is assumed here (a commitment's size, a demand trace,
a deployment, what an engineer costs) is an assumption of the scenario, not a published
fact, and the chapter prints it beside each result.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import _check
from ..models import get_model
from .payg import blended_price, break_even_utilization
from .prices import GPT_4O, H100_USD_PER_GPU_HOUR, LLAMA_3_70B_HOSTED, MINUTES_PER_MONTH, TokenPrice
from .selfhost import (crossover_tokens_per_month, lasting_crossover_tokens_per_month, replica_throughput,
                       self_hosted_tco)
from .spillover import demand_trace


@dataclass(frozen=True)
class Commitment:
    """A dedicated commitment: a fixed monthly price for a fixed throughput in tokens/min.

    Its capacity is counted in tokens of any kind, whatever the mix: a contract sold as so
    many tokens a minute, or a sizing sheet that treats a PTU as a fixed tokens-per-minute
    figure. That is the assumption under which the mix moves its break-even utilisation
    (40% at a 50% output mix, 77% at 10%). Were the same capacity counted as a PTU counts
    it, in input-equivalent tokens with output weighed at the price ratio
    (``output_weight=4`` below), the mix would cancel out of the break-even.
    """

    monthly_usd: float
    capacity_tokens_per_minute: float

    def __post_init__(self):
        _check.non_negative("monthly_usd", self.monthly_usd)
        _check.positive("capacity_tokens_per_minute", self.capacity_tokens_per_minute)

    @property
    def capacity_tokens_per_month(self) -> float:
        """Tokens a month at full use (730-hour month)."""
        return self.capacity_tokens_per_minute * MINUTES_PER_MONTH

    @property
    def usd_per_tpm_month(self) -> float:
        """What one token/min of this capacity costs a month: the price of a spillover floor."""
        return self.monthly_usd / self.capacity_tokens_per_minute

    def break_even_utilization(self, output_fraction: float, price: TokenPrice = GPT_4O, *,
                               output_weight: float = 1.0) -> float:
        """Break-even utilisation against PAYG at ``price`` for the mix; ``output_weight``:
        how many tokens of capacity an output token uses (1: capacity counted in tokens).
        Raises TypeError unless ``price`` is a TokenPrice."""
        _check.instance("price", price, TokenPrice)
        return break_even_utilization(self.monthly_usd, self.capacity_tokens_per_month,
                                      price.usd_per_1k_input, price.usd_per_1k_output, output_fraction,
                                      output_weight=output_weight)

    def sized_for(self, capacity_tokens_per_minute: float) -> "Commitment":
        """The same price per unit of capacity, for a different capacity."""
        return Commitment(self.usd_per_tpm_month * capacity_tokens_per_minute, capacity_tokens_per_minute)


#: $13,140 a month for 120,000 tokens/min (2,000 tokens/s, 5.256 B tokens a month): $2.50 per
#: 1M tokens of capacity, counted in tokens of any kind. Against gpt-4o list prices its
#: break-even is 40% at a 50% output mix and 77% at 10%.
COMMITMENT = Commitment(monthly_usd=13_140, capacity_tokens_per_minute=120_000)
MIX_BEFORE, MIX_AFTER = 0.5, 0.1           # output fraction before and after the agents' retrieval
MIX_TRACE = 0.25                           # the mix of the traffic in the demand trace
#: Share of the agents' input tokens that repeat a prefix the provider has cached (system
#: prompt, tool schemas, documents several requests retrieve): an assumption of the scenario.
AGENT_CACHED_INPUT_FRACTION = 0.5

#: The seeded demand trace of the spillover sections: 30 days, 60,000 tokens/min on average.
TRACE_KWARGS = dict(days=30, mean_tpm=60_000, seed=7)


def trace():
    """The chapter's demand trace (tokens per minute, one value a minute): see TRACE_KWARGS."""
    return demand_trace(**TRACE_KWARGS)


@dataclass(frozen=True)
class SelfHostScenario:
    """A self-hosted deployment and the assumptions that price it.

    Llama-3-70B in bf16, tensor-parallel over 4 H100 SXM per replica, batch 64 at 4,096-token
    contexts, traffic at a 25% output mix; two replicas at least (one can fail or be
    upgraded), average load at most 60% of capacity; GPUs rented at
    :data:`~servelib.economics.prices.H100_USD_PER_GPU_HOUR`; an engineer on inference
    operations costs $180,000 a year loaded (salary, benefits, on-call). Compared with two
    PAYG lines for the same mix: ``payg``, gpt-4o, the closed model the team would otherwise
    call (a different model with a different tokenizer: the comparison holds only if the
    open model does the job as well); and ``hosted``, the same open weights served by a
    provider (:data:`~servelib.economics.prices.LLAMA_3_70B_HOSTED`), like for like.
    """

    model: str = "llama-3-70b"
    gpu: str = "h100-sxm"
    tp_degree: int = 4
    batch: int = 64
    context_len: int = 4096
    output_fraction: float = MIX_TRACE
    usd_per_gpu_hour: float = H100_USD_PER_GPU_HOUR
    min_replicas: int = 2
    max_utilization: float = 0.6
    usd_per_engineer_year: float = 180_000
    payg: TokenPrice = field(default=GPT_4O)
    hosted: TokenPrice = field(default=LLAMA_3_70B_HOSTED)

    def throughput(self, batch: int | None = None):
        """:func:`~servelib.economics.selfhost.replica_throughput` of one replica at ``batch``
        (default: the scenario's). Every method taking ``batch`` passes it here, so a bad one
        (0, -1, 2.5) raises as replica_throughput does rather than falling back to the default."""
        batch = self.batch if batch is None else batch
        return replica_throughput(get_model(self.model), self.gpu, batch=batch,
                                  context_len=self.context_len, output_fraction=self.output_fraction,
                                  tp_degree=self.tp_degree)

    def blended_usd_per_1k(self, price: TokenPrice | None = None) -> float:
        """The blended PAYG price of the mix at ``price`` (default ``payg``), USD per 1k tokens."""
        p = self.payg if price is None else _check.instance("price", price, TokenPrice)
        return blended_price(p.usd_per_1k_input, p.usd_per_1k_output, self.output_fraction)

    @property
    def payg_usd_per_1k(self) -> float:
        """The blended gpt-4o PAYG price of the mix (USD per 1k tokens)."""
        return self.blended_usd_per_1k()

    @property
    def hosted_usd_per_1k(self) -> float:
        """The blended price of the same model hosted by a provider (USD per 1k tokens)."""
        return self.blended_usd_per_1k(self.hosted)

    def _kwargs(self, n_engineers):
        return dict(gpus_per_replica=self.tp_degree, min_replicas=self.min_replicas,
                    max_utilization=self.max_utilization, n_engineers=n_engineers,
                    usd_per_engineer_year=self.usd_per_engineer_year)

    def tco(self, monthly_tokens: float, n_engineers: float, batch: int | None = None):
        """:func:`~servelib.economics.selfhost.self_hosted_tco` of ``monthly_tokens``."""
        return self_hosted_tco(monthly_tokens, self.throughput(batch).tokens_per_gpu_s,
                               self.usd_per_gpu_hour, **self._kwargs(n_engineers))

    def crossover(self, n_engineers: float, batch: int | None = None, price: TokenPrice | None = None) -> float:
        """Monthly tokens at which this deployment costs no more than PAYG at ``price``
        (default ``payg``, gpt-4o; pass ``hosted`` for the like-for-like line)."""
        return crossover_tokens_per_month(self.blended_usd_per_1k(price), self.throughput(batch).tokens_per_gpu_s,
                                          self.usd_per_gpu_hour, **self._kwargs(n_engineers))

    def lasting_crossover(self, n_engineers: float, batch: int | None = None,
                          price: TokenPrice | None = None) -> float:
        """Monthly tokens above which this deployment never costs more than PAYG at ``price``
        again (:func:`~servelib.economics.selfhost.lasting_crossover_tokens_per_month`)."""
        return lasting_crossover_tokens_per_month(self.blended_usd_per_1k(price),
                                                  self.throughput(batch).tokens_per_gpu_s,
                                                  self.usd_per_gpu_hour, **self._kwargs(n_engineers))


SELF_HOST = SelfHostScenario()
#: The business case counted a quarter of an engineer; eighteen months later it was two.
ENGINEERS_PLANNED, ENGINEERS_ACTUAL = 0.25, 2
#: The monthly volume of the self-hosting war story.
STORY_TOKENS_PER_MONTH = 6e9
