"""A dedicated floor with spillover: cost and availability on a demand trace.

Demand is a trace of tokens per minute. A floor of F tokens/min of dedicated capacity is paid
for every minute whether used or not; demand above it either spills to pay-as-you-go
(``spill=True``: it costs more, nothing fails) or is refused (``spill=False``: throttled,
HTTP 429). All costs are per month: a trace of any length is scaled to a 730-hour month.

The cheapest floor has a closed form. Raising the floor by one token/min costs the floor
price p a month and saves the PAYG price of that token/min in every minute demand exceeds
the floor, so the optimum is where the share of minutes above the floor equals the
break-even utilisation of dedicated capacity, ``u* = p / (minutes per month x b)``: the
floor sits at the (1 - u*) quantile of demand (:func:`cheapest_floor_percentile`). That is
p50 only when u* = 50%; the dearer the capacity, the lower the floor, and none at all when
u* >= 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _check
from .prices import MINUTES_PER_MONTH

MINUTES_PER_DAY = 1440


def demand_trace(days: int = 30, mean_tpm: float = 60_000, *, diurnal_amplitude: float = 0.6,
                 weekend_factor: float = 0.6, bursts_per_day: float = 1.5, burst_multiplier: float = 3.0,
                 burst_minutes: float = 30, noise: float = 0.1, seed: int = 0) -> np.ndarray:
    """A seeded, realistic demand trace: tokens per minute for ``days`` days, one value a minute.

    Shape: a daily cycle ``1 + a sin(...)`` peaking mid-afternoon (``diurnal_amplitude`` a
    in [0, 1)), weekends at ``weekend_factor`` of weekdays, bursts (a Poisson number,
    ``bursts_per_day`` on average) that add up to ``burst_multiplier - 1`` times the average
    level for an exponentially distributed duration of mean ``burst_minutes`` (batch jobs, retries, an
    agent loop), and multiplicative lognormal noise of log-sd ``noise``. The trace is scaled
    so that its mean is exactly ``mean_tpm``. Same arguments, same trace.
    Raises ValueError for out-of-range arguments, or a ``mean_tpm`` so large that the
    busiest minute overflows a float.
    """
    days = _check.positive_int("days", days)
    mean = _check.positive("mean_tpm", mean_tpm)
    amp = _check.fraction("diurnal_amplitude", diurnal_amplitude, open_right=True)
    weekend = _check.fraction("weekend_factor", weekend_factor)
    rate = _check.non_negative("bursts_per_day", bursts_per_day)
    mult = _check.positive("burst_multiplier", burst_multiplier)
    if mult < 1:
        raise ValueError(f"burst_multiplier must be >= 1, got {burst_multiplier!r}")
    dur = _check.positive("burst_minutes", burst_minutes)
    sigma = _check.non_negative("noise", noise)
    rng = np.random.default_rng(_check.non_negative_int("seed", seed))

    n = days * MINUTES_PER_DAY
    t = np.arange(n)
    day_phase = (t % MINUTES_PER_DAY) / MINUTES_PER_DAY
    shape = 1 + amp * np.sin(2 * np.pi * (day_phase - 0.375))      # peak at 15:00, trough at 03:00
    shape = shape * np.where((t // MINUTES_PER_DAY) % 7 >= 5, weekend, 1.0)
    for _ in range(rng.poisson(rate * days)):
        # A burst adds load on top of the cycle (a batch job does not scale with daytime
        # traffic): up to (burst_multiplier - 1) times the average level.
        start = rng.integers(n)
        length = max(1, int(rng.exponential(dur)))
        shape[start:start + length] += rng.uniform(0, mult - 1)
    shape = shape * rng.lognormal(-sigma**2 / 2, sigma, n) if sigma else shape
    if not (np.all(np.isfinite(shape)) and shape.mean() > 0):
        raise ValueError(f"noise is too large: the lognormal factor overflows (got {noise!r})")
    with np.errstate(over="ignore"):               # checked just below, naming the argument
        trace = shape * (mean / shape.mean())
    _check.finite_result("the busiest minute of the trace", float(trace.max()), mean_tpm=mean_tpm)
    return trace


def floor_at_percentile(demand_tpm, percentile: float) -> float:
    """The floor (tokens/min) at a percentile of demand, ``percentile`` in [0, 100] (50 = p50)."""
    p = _check._real("percentile", percentile)
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must lie in [0, 100], got {percentile!r}")
    return float(np.percentile(_demand(demand_tpm), p))


def floor_break_even_utilization(floor_usd_per_tpm_month: float, blended_usd_per_1k: float) -> float:
    """Break-even utilisation u* of dedicated capacity priced per token/min per month:
    ``floor_usd_per_tpm_month / (minutes per month x blended / 1000)``.

    One token/min of floor costs ``floor_usd_per_tpm_month``; fully used, it would carry
    730 x 60 tokens worth ``blended`` each on PAYG. Raises ValueError for a negative price,
    a blended price that is not > 0, or a result that overflows a float.
    """
    unit = _check.non_negative("floor_usd_per_tpm_month", floor_usd_per_tpm_month)
    u = unit / (MINUTES_PER_MONTH * _check.positive("blended_usd_per_1k", blended_usd_per_1k) / 1000)
    return _check.finite_result("the break-even utilisation", u, floor_usd_per_tpm_month=floor_usd_per_tpm_month,
                                blended_usd_per_1k=blended_usd_per_1k)


def cheapest_floor_percentile(break_even_utilization: float) -> float:
    """Percentile of demand at which the cheapest floor (with spill to PAYG) sits:
    ``100 (1 - u*)``, and 0 (no floor) when u* >= 1.

    u* = 0.5 gives p50; Azure's gpt-4o PTU list prices (u* about 0.95 monthly, 0.81 yearly)
    give p5 and p19. Raises ValueError for a negative u*.
    """
    u = _check.non_negative("break_even_utilization", break_even_utilization)
    return 100 * (1 - min(u, 1.0))


@dataclass(frozen=True)
class SpilloverResult:
    """Monthly outcome of a floor on a trace (USD, tokens).

    ``floor_usd`` pays for the dedicated floor; ``payg_usd`` for spilled tokens;
    ``unserved_tokens`` were refused (zero when spilling). ``availability`` is the share
    of demanded tokens that were served; ``floor_utilization`` the share of the floor's
    capacity that carried traffic.
    """

    floor_tpm: float
    spill: bool
    floor_usd: float
    payg_usd: float
    total_usd: float
    demand_tokens: float
    floor_tokens: float
    spilled_tokens: float
    unserved_tokens: float
    availability: float
    floor_utilization: float


def _demand(demand_tpm) -> np.ndarray:
    try:
        d = np.asarray(demand_tpm, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"demand_tpm must be a sequence of numbers (tokens per minute), "
                        f"got {type(demand_tpm).__name__}") from None
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"demand_tpm must be a non-empty 1-D sequence, got shape {d.shape}")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError("demand_tpm must hold finite values >= 0")
    return d


def spillover_cost(demand_tpm, floor_tpm: float, floor_usd_per_tpm_month: float,
                   blended_usd_per_1k: float, *, spill: bool = True) -> SpilloverResult:
    """Monthly cost and unserved demand of a dedicated floor of ``floor_tpm`` tokens/min.

    ``demand_tpm``: tokens per minute, one value per minute. ``floor_usd_per_tpm_month``:
    what one token/min of dedicated capacity costs a month (see
    :func:`servelib.economics.ptu.ptu_usd_per_tpm_month`). ``blended_usd_per_1k``: the PAYG
    price of the mix. Overflow above the floor is spilled to PAYG or, with ``spill=False``,
    refused. Raises ValueError for negative demand, floors or prices, or a month whose
    tokens or cost overflow a float.
    """
    d = _demand(demand_tpm)
    if not isinstance(spill, (bool, np.bool_)):
        raise TypeError(f"spill must be True or False, got {type(spill).__name__} {spill!r}")
    floor = _check.non_negative("floor_tpm", floor_tpm)
    unit = _check.non_negative("floor_usd_per_tpm_month", floor_usd_per_tpm_month)
    price = _check.non_negative("blended_usd_per_1k", blended_usd_per_1k)
    scale = MINUTES_PER_MONTH / d.size                 # trace minutes -> one billing month
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is checked below, by name
        over = np.maximum(d - floor, 0.0).sum() * scale
        demand = d.sum() * scale
        on_floor = demand - over
        floor_usd = floor * unit
        payg_usd = over / 1000 * price if spill else 0.0
    _check.finite_result("the month's token count or bill", demand + floor_usd + payg_usd, floor_tpm=floor_tpm,
                         floor_usd_per_tpm_month=floor_usd_per_tpm_month, blended_usd_per_1k=blended_usd_per_1k)
    return SpilloverResult(
        floor_tpm=floor, spill=spill, floor_usd=floor_usd, payg_usd=payg_usd,
        total_usd=floor_usd + payg_usd, demand_tokens=demand, floor_tokens=on_floor,
        spilled_tokens=over if spill else 0.0, unserved_tokens=0.0 if spill else over,
        availability=1.0 if spill or demand == 0 else on_floor / demand,
        floor_utilization=on_floor / (floor * MINUTES_PER_MONTH) if floor else math.nan)


def cheapest_floor(demand_tpm, floor_usd_per_tpm_month: float, blended_usd_per_1k: float) -> SpilloverResult:
    """The floor (with spill to PAYG) that minimises the monthly cost, searched exactly.

    The cost is convex and piecewise linear in the floor with kinks at the demand values, so
    the minimum lies at zero or at one of them; all are evaluated (O(n log n)). It sits at
    the (1 - u*) quantile of demand, u* the break-even utilisation of dedicated capacity
    (:func:`floor_break_even_utilization`, :func:`cheapest_floor_percentile`).
    """
    d = np.sort(_demand(demand_tpm))
    unit = _check.non_negative("floor_usd_per_tpm_month", floor_usd_per_tpm_month)
    price = _check.non_negative("blended_usd_per_1k", blended_usd_per_1k)
    scale = MINUTES_PER_MONTH / d.size
    candidates = np.concatenate(([0.0], d))
    n_above = np.concatenate(([d.size], d.size - np.arange(1, d.size + 1)))
    with np.errstate(over="ignore", invalid="ignore"):  # spillover_cost names an overflow
        above = np.concatenate(([d.sum()], d.sum() - np.cumsum(d)))    # sum of demand above each
        spilled = (above - n_above * candidates) * scale
        cost = candidates * unit + spilled / 1000 * price
    best = float(candidates[int(np.argmin(cost))])
    return spillover_cost(d, best, unit, price, spill=True)
