"""Capacity economics: pay-as-you-go vs provisioned throughput (PTU) vs self-hosting.

One idea per module: :mod:`.prices` (published prices with source and date), :mod:`.payg`
(blended price and the one break-even formula, whatever way capacity is counted), :mod:`.ptu`
(capacity that depends on the mix, reservation terms), :mod:`.spillover` (a dedicated floor
with overflow to PAYG on a demand trace, and the cheapest floor's quantile),
:mod:`.selfhost` (throughput from the serving model, TCO, crossover). Prices are USD per 1k
tokens unless a name says otherwise.
"""
from .payg import (blended_price, break_even_tokens, break_even_utilization, capacity_units_per_token,
                   payg_cost_usd)
from .prices import (AZURE_PTU, GPT_4O, GPT_4O_MINI, H100_USD_PER_GPU_HOUR, HOURS_PER_MONTH, LLAMA_3_70B_HOSTED,
                     MINUTES_PER_MONTH, SECONDS_PER_MONTH, PtuPrice, Source, TokenPrice)
from .ptu import (ptu_break_even_utilization, ptu_capacity_tokens_per_month, ptu_monthly_cost_usd,
                  ptu_tokens_per_minute, ptu_usd_per_tpm_month, ptus_needed)
from .selfhost import (ReplicaThroughput, SelfHostedTCO, crossover_tokens_per_month,
                       lasting_crossover_tokens_per_month, replica_throughput, self_hosted_tco,
                       self_hosted_unit_cost)
from .spillover import (SpilloverResult, cheapest_floor, cheapest_floor_percentile, demand_trace,
                        floor_at_percentile, floor_break_even_utilization, spillover_cost)

__all__ = [
    "blended_price", "break_even_tokens", "break_even_utilization", "capacity_units_per_token", "payg_cost_usd",
    "AZURE_PTU", "GPT_4O", "GPT_4O_MINI", "H100_USD_PER_GPU_HOUR", "HOURS_PER_MONTH", "LLAMA_3_70B_HOSTED",
    "MINUTES_PER_MONTH", "SECONDS_PER_MONTH", "PtuPrice", "Source", "TokenPrice",
    "ptu_break_even_utilization", "ptu_capacity_tokens_per_month", "ptu_monthly_cost_usd",
    "ptu_tokens_per_minute", "ptu_usd_per_tpm_month", "ptus_needed",
    "ReplicaThroughput", "SelfHostedTCO", "crossover_tokens_per_month", "lasting_crossover_tokens_per_month",
    "replica_throughput",
    "self_hosted_tco", "self_hosted_unit_cost",
    "SpilloverResult", "cheapest_floor", "cheapest_floor_percentile", "demand_trace", "floor_at_percentile",
    "floor_break_even_utilization", "spillover_cost",
]
