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
from .prices import GPT_4O, H100_USD_PER_GPU_HOUR, MINUTES_PER_MONTH, TokenPrice
from .selfhost import crossover_tokens_per_month, replica_throughput, self_hosted_tco
from .spillover import demand_trace


@dataclass(frozen=True)
class Commitment:
    """A dedicated commitment: a fixed monthly price for a fixed throughput in tokens/min.

    Its capacity is counted in tokens whatever the mix, as a team counts it when it sizes a
    contract in tokens per minute.
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

    def break_even_utilization(self, output_fraction: float, price: TokenPrice = GPT_4O) -> float:
        """Break-even utilisation against PAYG at ``price`` for the mix."""
        return break_even_utilization(self.monthly_usd, self.capacity_tokens_per_month,
                                      price.usd_per_1k_input, price.usd_per_1k_output, output_fraction)

    def sized_for(self, capacity_tokens_per_minute: float) -> "Commitment":
        """The same price per unit of capacity, for a different capacity."""
        return Commitment(self.usd_per_tpm_month * capacity_tokens_per_minute, capacity_tokens_per_minute)


#: $13,140 a month for 120,000 tokens/min (2,000 tokens/s, 5.256 B tokens a month): $2.50 per
#: 1M tokens of capacity. Against gpt-4o list prices its break-even is 40% at a 50% output
#: mix and 77% at 10%.
COMMITMENT = Commitment(monthly_usd=13_140, capacity_tokens_per_minute=120_000)
MIX_BEFORE, MIX_AFTER = 0.5, 0.1           # output fraction before and after the agents' retrieval
MIX_TRACE = 0.25                           # the mix of the traffic in the demand trace

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
    operations costs $180,000 a year loaded (salary, benefits, on-call). Compared with
    gpt-4o at list price for the same mix.
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

    def throughput(self, batch: int | None = None):
        """:func:`~servelib.economics.selfhost.replica_throughput` of one replica."""
        return replica_throughput(get_model(self.model), self.gpu, batch=batch or self.batch,
                                  context_len=self.context_len, output_fraction=self.output_fraction,
                                  tp_degree=self.tp_degree)

    @property
    def payg_usd_per_1k(self) -> float:
        """The blended PAYG price of the mix (USD per 1k tokens)."""
        return blended_price(self.payg.usd_per_1k_input, self.payg.usd_per_1k_output, self.output_fraction)

    def _kwargs(self, n_engineers):
        return dict(gpus_per_replica=self.tp_degree, min_replicas=self.min_replicas,
                    max_utilization=self.max_utilization, n_engineers=n_engineers,
                    usd_per_engineer_year=self.usd_per_engineer_year)

    def tco(self, monthly_tokens: float, n_engineers: float, batch: int | None = None):
        """:func:`~servelib.economics.selfhost.self_hosted_tco` of ``monthly_tokens``."""
        return self_hosted_tco(monthly_tokens, self.throughput(batch).tokens_per_gpu_s,
                               self.usd_per_gpu_hour, **self._kwargs(n_engineers))

    def crossover(self, n_engineers: float, batch: int | None = None) -> float:
        """Monthly tokens at which this deployment costs no more than PAYG."""
        return crossover_tokens_per_month(self.payg_usd_per_1k, self.throughput(batch).tokens_per_gpu_s,
                                          self.usd_per_gpu_hour, **self._kwargs(n_engineers))


SELF_HOST = SelfHostScenario()
#: The business case counted a quarter of an engineer; eighteen months later it was two.
ENGINEERS_PLANNED, ENGINEERS_ACTUAL = 0.25, 2
#: The monthly volume of the self-hosting war story.
STORY_TOKENS_PER_MONTH = 6e9
